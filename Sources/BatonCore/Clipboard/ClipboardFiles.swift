// SPDX-License-Identifier: LGPL-2.1-or-later
/// A copy of files (§6.7 "Files"): the offer's one item is the list of the files (names, sizes, media
/// types, no path), and each file's bytes travel as a document (§6.5's DocumentInfo and DocumentChunk
/// frames), asked for with FetchClipboardFile only when an app pastes.

/// One file of a copy: its name (no path), exact size and media type.
public struct ClipboardFile: Hashable, Sendable {
    public static let maxNameBytes = 255

    public var name: String
    public var size: UInt64
    public var mediaType: String

    public init(name: String, size: UInt64, mediaType: String) throws(WireError) {
        try Self.checkName(name)
        try ClipboardText.checkMediaType(mediaType)
        self.name = name
        self.size = size
        self.mediaType = mediaType
    }

    /// A file name: 1–255 bytes of UTF-8 without control characters (U+0000–U+001F, U+007F) or `/`,
    /// and neither `.` nor `..`: one component of a path, safe to create in a directory of one's own.
    public static func checkName(_ name: String) throws(WireError) {
        let count = name.utf8.count
        guard count > 0, count <= maxNameBytes else { throw .malformed("file name length") }
        guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "/" }), name != ".", name != ".." else {
            throw .malformed("file name characters")
        }
    }

    /// A name as it travels: its length byte (1–255) before its bytes, then UTF-8, then its characters.
    static func readName(_ reader: inout ByteReader) throws(WireError) -> String {
        let length = Int(try reader.readByte())
        guard length > 0 else { throw .malformed("file name length") }
        guard let name = String(validating: try reader.readBytes(length), as: UTF8.self) else { throw .malformed("file name not UTF-8") }
        try checkName(name)
        return name
    }

    /// The last component of a local path (bytes, as Linux keeps them) as a file name; trailing
    /// slashes are ignored. nil when it is not a valid name (not UTF-8, a control character, `/` alone).
    public static func name(ofPath path: [UInt8]) -> String? {
        var end = path.count
        while end > 0, path[end - 1] == UInt8(ascii: "/") { end -= 1 }
        var start = end
        while start > 0, path[start - 1] != UInt8(ascii: "/") { start -= 1 }
        guard start < end, let name = String(validating: path[start..<end], as: UTF8.self), (try? checkName(name)) != nil else { return nil }
        return name
    }
}

/// The item of a files offer (§6.7 "Files"): u16be count (1–256), then per file its name (u8 length,
/// UTF-8), size (u64be) and media type (u8 length, ASCII).
public struct ClipboardFileList: Hashable, Sendable {
    /// The media type of the list in a ClipboardOffer of kind files (its only item).
    public static let mediaType = "application/x-baton-file-list"
    public static let maxFiles = 256
    public static let maxEncodedBytes = 2 + maxFiles * (1 + ClipboardFile.maxNameBytes + 8 + 1 + ClipboardText.maxMediaTypeBytes)
    /// What batond shares at once, all files together (source and receiver): 1 GiB.
    public static let totalLimit: UInt64 = 1 << 30

    public let files: [ClipboardFile]
    /// The sizes added up.
    public let totalSize: UInt64

    public init(files: [ClipboardFile]) throws(WireError) {
        guard !files.isEmpty, files.count <= Self.maxFiles else { throw .malformed("file count") }
        var total: UInt64 = 0
        for file in files {
            let (sum, overflow) = total.addingReportingOverflow(file.size)
            guard !overflow else { throw .malformed("file sizes") }
            total = sum
        }
        self.files = files
        totalSize = total
    }

    public var encoded: [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(UInt16(files.count))
        for file in files {
            out.append(UInt8(file.name.utf8.count))
            out.append(contentsOf: file.name.utf8)
            out.appendBigEndian(file.size)
            out.append(UInt8(file.mediaType.utf8.count))
            out.append(contentsOf: file.mediaType.utf8)
        }
        return out
    }

    /// Every field checked in wire order, as it is read; the count before any file.
    public init(encoded bytes: [UInt8]) throws(WireError) {
        guard bytes.count <= Self.maxEncodedBytes else { throw .payloadTooLarge(limit: Self.maxEncodedBytes, actual: bytes.count) }
        var reader = ByteReader(bytes)
        let count = Int(try reader.readUInt16())
        guard count >= 1, count <= Self.maxFiles else { throw .malformed("file count") }
        var files: [ClipboardFile] = []
        var total: UInt64 = 0
        for _ in 0..<count {
            let name = try ClipboardFile.readName(&reader)
            let size = try reader.readUInt64()
            let (sum, overflow) = total.addingReportingOverflow(size)
            guard !overflow else { throw .malformed("file sizes") }
            total = sum
            let mediaType = try ClipboardText.readMediaType(&reader)
            files.append(try ClipboardFile(name: name, size: size, mediaType: mediaType))
        }
        try reader.expectEnd()
        try self.init(files: files)
    }

    /// The offer's item for this list.
    public var item: ClipboardItem {
        // A list is at most `maxEncodedBytes`, far below an item's limit.
        try! ClipboardItem(mediaType: Self.mediaType, size: UInt64(encoded.count))
    }

    /// Why this machine does not share the list (its own limit on all files together), in words; nil
    /// when it does.
    public func refusal(totalLimit: UInt64 = ClipboardFileList.totalLimit) -> String? {
        guard totalSize > totalLimit else { return nil }
        return "the files add up to \(totalSize) bytes, more than the \(totalLimit) shared at once"
    }
}

/// FetchClipboardFile (0x12, §6.7 "Files"): one file of a files offer, from an offset, answered as
/// FetchDocument is (§6.5): DocumentInfo, then DocumentChunk frames.
public struct ClipboardFileRequest: Hashable, Sendable {
    public static let byteCount = 8 + 2 + 32 + 8

    public var offerID: UInt64
    /// The file's place in the offer's list, from 0.
    public var index: UInt16
    /// The digest a DocumentInfo announced for it; all zero: "the file as it is now", from offset 0 only.
    public var digest: [UInt8]
    public var offset: UInt64

    public init(offerID: UInt64, index: UInt16, digest: [UInt8] = DocumentRequest.anySnapshot, offset: UInt64 = 0) throws(WireError) {
        guard Int(index) < ClipboardFileList.maxFiles else { throw .malformed("file index") }
        guard digest.count == 32 else { throw .malformed("digest length") }
        guard digest != DocumentRequest.anySnapshot || offset == 0 else { throw .malformed("an offset needs the file's digest") }
        self.offerID = offerID
        self.index = index
        self.digest = digest
        self.offset = offset
    }

    public var asksForAnyDigest: Bool { digest == DocumentRequest.anySnapshot }

    public var payload: [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(offerID)
        out.appendBigEndian(index)
        out.append(contentsOf: digest)
        out.appendBigEndian(offset)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let offerID = try reader.readUInt64()
        let index = try reader.readUInt16()
        guard Int(index) < ClipboardFileList.maxFiles else { throw .malformed("file index") }
        let digest = try reader.readBytes(32)
        let offset = try reader.readUInt64()
        try reader.expectEnd()
        try self.init(offerID: offerID, index: index, digest: digest, offset: offset)
    }

    /// The DocumentInfo that answers this request must describe the listed file: its size, media type
    /// and name (as the document id), and the digest asked for when one was.
    public func describes(_ info: DocumentInfo, file: ClipboardFile) -> Bool {
        info.totalSize == file.size && info.mediaType == file.mediaType && info.documentID == file.name
            && (asksForAnyDigest || info.digest == digest)
    }
}

/// What a FetchDocument-style answer is about: the snapshot of a member's activity (FetchDocument,
/// §6.5) or a file of its clipboard offer (FetchClipboardFile, §6.7). The answer is the same stream.
public enum DocumentAddress: Hashable, Sendable {
    case activity(ActivityReference)
    case clipboardFile(offerID: UInt64, index: UInt16)

    /// The request for the snapshot with `digest` (all zero: whatever it is now) from `offset`.
    public func request(digest: [UInt8], offset: UInt64, requestID: UInt32) throws(WireError) -> Frame {
        switch self {
        case .activity(let activity):
            return Frame(type: .fetchDocument, requestID: requestID, payload: DocumentRequest(activity: activity, digest: digest, offset: offset).payload)
        case .clipboardFile(let offerID, let index):
            return Frame(type: .fetchClipboardFile, requestID: requestID,
                         payload: try ClipboardFileRequest(offerID: offerID, index: index, digest: digest, offset: offset).payload)
        }
    }
}
