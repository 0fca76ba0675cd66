// SPDX-License-Identifier: LGPL-2.1-or-later
/// The document frames (§6.5): FetchDocument asks for the snapshot attached to a member's current
/// activity from an offset; the answer is a stream of frames with the request's id, one DocumentInfo
/// then DocumentChunk frames in order up to the total size. Nothing here names a local path.

/// FetchDocument (§6.5): type hash, revision, the snapshot's digest (all zero: whatever snapshot is
/// attached now, only from offset 0) and the offset to start from.
public struct DocumentRequest: Hashable, Sendable {
    public static let byteCount = 4 + 4 + 32 + 8
    public static let anySnapshot = [UInt8](repeating: 0, count: 32)

    public var activity: ActivityReference
    public var digest: [UInt8]
    public var offset: UInt64

    public init(activity: ActivityReference, digest: [UInt8], offset: UInt64) {
        self.activity = activity
        self.digest = digest
        self.offset = offset
    }

    public var asksForAnySnapshot: Bool { digest == Self.anySnapshot }

    public var payload: [UInt8] {
        var out = activity.payload
        out.append(contentsOf: digest)
        out.appendBigEndian(offset)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        activity = try ActivityReference(payload: try reader.readBytes(8))
        digest = try reader.readBytes(32)
        offset = try reader.readUInt64()
        try reader.expectEnd()
        guard !asksForAnySnapshot || offset == 0 else { throw .malformed("an offset needs the snapshot's digest") }
    }
}

/// DocumentInfo (§6.5): what the stream that follows is a part of.
public struct DocumentInfo: Hashable, Sendable {
    public static let maxTextBytes = 255
    public static let maxByteCount = 8 + 32 + 2 * (1 + maxTextBytes)

    public var totalSize: UInt64
    public var digest: [UInt8]
    public var mediaType: String
    public var documentID: String

    public init(totalSize: UInt64, digest: [UInt8], mediaType: String, documentID: String) throws(WireError) {
        guard digest.count == 32 else { throw .malformed("digest length") }
        try Self.checkText(mediaType, "media type")
        try Self.checkText(documentID, "document id")
        self.totalSize = totalSize
        self.digest = digest
        self.mediaType = mediaType
        self.documentID = documentID
    }

    /// Non-empty UTF-8 of at most 255 bytes without control characters: it is shown and logged.
    public static func checkText(_ text: String, _ what: String) throws(WireError) {
        let count = text.utf8.count
        guard count > 0, count <= maxTextBytes else { throw .malformed("\(what) length") }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { throw .malformed("\(what) has control characters") }
    }

    public var payload: [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(totalSize)
        out.append(contentsOf: digest)
        for text in [mediaType, documentID] {
            out.append(UInt8(text.utf8.count))
            out.append(contentsOf: text.utf8)
        }
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let total = try reader.readUInt64()
        let digest = try reader.readBytes(32)
        var texts: [String] = []
        for _ in 0..<2 {
            let length = Int(try reader.readByte())
            guard let text = String(validating: try reader.readBytes(length), as: UTF8.self) else { throw .malformed("text not UTF-8") }
            texts.append(text)
        }
        try reader.expectEnd()
        try self.init(totalSize: total, digest: digest, mediaType: texts[0], documentID: texts[1])
    }
}

/// DocumentChunk (§6.5): an offset and up to 64 KiB of the snapshot from there.
public struct DocumentChunk: Hashable, Sendable {
    public static let headerByteCount = 8
    public static let maxDataBytes = 65_536

    public var offset: UInt64
    public var data: [UInt8]

    public init(offset: UInt64, data: [UInt8]) {
        self.offset = offset
        self.data = data
    }

    public var payload: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.headerByteCount + data.count)
        out.appendBigEndian(offset)
        out.append(contentsOf: data)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        let (offset, _) = try Self.header(ofPayload: payload)
        self.offset = offset
        data = Array(payload.dropFirst(Self.headerByteCount))
    }

    /// The offset and data length of a chunk's payload, checked as `init(payload:)` checks them, for a
    /// bulk receiver that writes the data straight from the payload instead of copying it out.
    public static func header(ofPayload payload: [UInt8]) throws(WireError) -> (offset: UInt64, count: Int) {
        var reader = ByteReader(payload)
        let offset = try reader.readUInt64()
        let count = payload.count - headerByteCount
        guard count > 0 else { throw .malformed("empty chunk") }
        guard count <= maxDataBytes else { throw .payloadTooLarge(limit: maxDataBytes, actual: count) }
        return (offset, count)
    }
}

/// The receiving side's check of one stream (§6.5): chunks in order, inside the announced size, for
/// the snapshot asked for. Pure: the adapter writes the bytes and hashes them.
public struct DocumentStreamCheck: Sendable {
    public private(set) var info: DocumentInfo?
    public private(set) var next: UInt64
    let wantedDigest: [UInt8]

    public init(request: DocumentRequest) {
        self.init(digest: request.digest, offset: request.offset)
    }

    /// The check of a stream asked for with `digest` (all zero: any) from `offset` (FetchDocument or
    /// FetchClipboardFile).
    public init(digest: [UInt8], offset: UInt64) {
        wantedDigest = digest
        next = offset
    }

    public var isComplete: Bool { info.map { next == $0.totalSize } ?? false }

    public mutating func accept(_ info: DocumentInfo) throws(WireError) {
        guard self.info == nil else { throw .unexpectedMessage("a second DocumentInfo") }
        guard wantedDigest == DocumentRequest.anySnapshot || info.digest == wantedDigest else { throw .malformed("another snapshot") }
        guard next <= info.totalSize else { throw .malformed("offset beyond the snapshot") }
        self.info = info
    }

    public mutating func accept(_ chunk: DocumentChunk) throws(WireError) {
        try accept(chunkAt: chunk.offset, count: chunk.data.count)
    }

    /// The same check for a chunk known by its offset and data length (`DocumentChunk.header(ofPayload:)`).
    public mutating func accept(chunkAt offset: UInt64, count: Int) throws(WireError) {
        guard let info else { throw .unexpectedMessage("DocumentChunk before DocumentInfo") }
        guard offset == next else { throw .malformed("chunk out of order") }
        let (end, overflow) = offset.addingReportingOverflow(UInt64(count))
        guard !overflow, end <= info.totalSize else { throw .malformed("chunk beyond the snapshot") }
        next = end
    }
}
