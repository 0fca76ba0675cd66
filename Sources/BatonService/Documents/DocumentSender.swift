#if canImport(Glibc)
import Glibc
#endif
import BatonCore
import BatonStore
import BatonTransport

/// A snapshot attached to an activity: the daemon's copy and what the wire says of it. The path
/// stays on this machine; only `info` travels (§6.5).
public struct AttachedDocument: Hashable, Sendable {
    public var path: String
    public var info: DocumentInfo

    public init(path: String, info: DocumentInfo) {
        self.path = path
        self.info = info
    }
}

/// The source side of FetchDocument (§6.5): DocumentInfo, then the snapshot from the asked offset in
/// chunks of 64 KiB, all with the request's id, as fast as the channel takes them.
public enum DocumentSender {
    /// Streams `document` for `request`; at most `atMost` chunks (the whole rest by default; tests cut
    /// a stream short with it to play a source that dies). Returns the chunks sent.
    @discardableResult
    public static func stream(_ document: AttachedDocument, for request: DocumentRequest, requestID: UInt32, on channel: SecureChannel,
                       atMost: Int = .max) async throws -> Int {
        guard request.asksForAnySnapshot || request.digest == document.info.digest else {
            throw ErrorFrame(code: .unknownActivity, message: "the snapshot changed")
        }
        let total = document.info.totalSize
        guard request.offset <= total else { throw ErrorFrame(code: .malformed, message: "offset beyond the snapshot") }
        // Opened before DocumentInfo goes out: a commit replacing the file (a rename) leaves this
        // descriptor on the snapshot announced.
        let descriptor = open(document.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw ErrorFrame(code: .unknownActivity, message: "the snapshot is gone") }
        defer { close(descriptor) }
        try await channel.send(Frame(type: .documentInfo, requestID: requestID, payload: document.info.payload))
        var offset = request.offset
        var sent = 0
        while offset < total && sent < atMost {
            let length = Int(min(UInt64(DocumentChunk.maxDataBytes), total - offset))
            var payload = [UInt8]()
            payload.reserveCapacity(DocumentChunk.headerByteCount + length)
            payload.appendBigEndian(offset)
            payload.append(contentsOf: repeatElement(0, count: length))
            let read = payload.withUnsafeMutableBytes { raw in
                Self.readFully(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: raw[DocumentChunk.headerByteCount...]), at: offset)
            }
            // The file is ours and never rewritten in place; a short read means it was damaged.
            guard read == length else { throw ErrorFrame(code: .internalError, message: "the snapshot cannot be read") }
            try await channel.send(Frame(type: .documentChunk, requestID: requestID, payload: payload))
            offset += UInt64(length)
            sent += 1
        }
        return sent
    }

    private static func readFully(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> Int {
        var done = 0
        while done < buffer.count {
            let count = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            done += count
        }
        return done
    }
}
