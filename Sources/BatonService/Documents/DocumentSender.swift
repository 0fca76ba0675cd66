// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonCore
import BatonStore
import BatonSystem
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
/// chunks of 64 KiB, all with the request's id, as fast as the channel takes them. Memory: one batch
/// of chunks and its encrypted form.
public enum DocumentSender {
    /// Chunks sent with one TLS write: fewer trips through the channel per byte, and a batch (about
    /// 192 KiB, plus its encrypted copy) stays below batond's fixed mmap threshold (256 KiB), so its
    /// buffers come from the heap.
    static let batchChunks = 3

    /// Streams `document` for `request`; at most `atMost` chunks (the whole rest by default; tests cut
    /// a stream short with it to play a source that dies). Returns the chunks sent.
    /// `stillMember` is asked before each batch: a peer removed from the ring while its stream runs
    /// gets no further byte: the connection is aborted, dropping what it still queues (§6.5, §7.4).
    @discardableResult
    public static func stream(_ document: AttachedDocument, for request: DocumentRequest, requestID: UInt32, on channel: SecureChannel,
                              stillMember: @Sendable () async -> Bool, atMost: Int = .max) async throws -> Int {
        guard request.asksForAnySnapshot || request.digest == document.info.digest else {
            throw ErrorFrame(code: .unknownActivity, message: "the snapshot changed")
        }
        let total = document.info.totalSize
        guard request.offset <= total else { throw ErrorFrame(code: .malformed, message: "offset beyond the snapshot") }
        // Opened before DocumentInfo goes out: a commit replacing the file (a rename) leaves this
        // descriptor on the snapshot announced.
        guard let file = try? FileDescriptor.open(document.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) else {
            throw ErrorFrame(code: .unknownActivity, message: "the snapshot is gone")
        }
        return try await stream(file, info: document.info, from: request.offset, requestID: requestID, on: channel,
                                stillMember: stillMember, atMost: atMost)
    }

    /// DocumentInfo, then `file`'s bytes from `offset` to `info.totalSize` in DocumentChunk frames: the
    /// stream of any request answered as FetchDocument is (FetchClipboardFile too). The caller checked
    /// the digest asked for and that `offset` is at most the total. `stillMember` as above.
    @discardableResult
    public static func stream(_ file: borrowing FileDescriptor, info: DocumentInfo, from offset: UInt64, requestID: UInt32,
                              on channel: SecureChannel, stillMember: @Sendable () async -> Bool, atMost: Int = .max) async throws -> Int {
        let total = info.totalSize
        try await channel.send(Frame(type: .documentInfo, requestID: requestID, payload: info.payload))
        var offset = offset
        var sent = 0
        while offset < total && sent < atMost {
            guard await stillMember() else {
                // What the connection still queues for the removed peer (socket buffers: MiB) is dropped too.
                channel.abort()
                return sent
            }
            var batch: [Frame] = []
            while batch.count < batchChunks && offset < total && sent + batch.count < atMost {
                let length = Int(min(UInt64(DocumentChunk.maxDataBytes), total - offset))
                var readCount = 0
                // Read straight into the payload, after its offset field: no zero fill, no copy.
                let payload = [UInt8](unsafeUninitializedCapacity: DocumentChunk.headerByteCount + length) { buffer, initialized in
                    withUnsafeBytes(of: offset.bigEndian) { field in
                        UnsafeMutableRawBufferPointer(buffer).copyMemory(from: field)
                    }
                    let data = UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[DocumentChunk.headerByteCount...])
                    // A failed read counts as none: the check below refuses the chunk.
                    readCount = (try? file.readFully(into: data, at: offset)) ?? 0
                    initialized = DocumentChunk.headerByteCount + readCount
                }
                // A snapshot is ours and never rewritten in place; a short read means it was damaged
                // (or a clipboard file was cut short).
                guard readCount == length else { throw ErrorFrame(code: .internalError, message: "the snapshot cannot be read") }
                batch.append(Frame(type: .documentChunk, requestID: requestID, payload: payload))
                offset += UInt64(length)
            }
            try await channel.send(batch)
            sent += batch.count
        }
        return sent
    }
}
