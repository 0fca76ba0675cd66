// SPDX-License-Identifier: LGPL-2.1-or-later
/// The clipboard in the ring advert and its frames (§4.1, §6.7, §9.5): the advert says only that a
/// copy is offered and its kind (a new copy also moves the advert's revision); the offer (types and
/// sizes) and the bytes of one type are asked for over the ring connection, the bytes only when an
/// app pastes.

/// What kind of thing was copied (advert flag bits 4–5). Only a hint for what a receiver shows and
/// takes: the offer lists the exact media types.
public enum ClipboardKind: UInt8, Sendable, CaseIterable, Hashable {
    case text = 1
    case image = 2
    case files = 3

    public var name: String {
        switch self {
        case .text: "text"
        case .image: "image"
        case .files: "files"
        }
    }
}

extension ClipboardKind {
    /// Bits 4–5 of the advert flags byte (§4.1).
    public var flagBits: UInt8 { rawValue << 4 }

    /// The kind in an advert flags byte; nil: the device offers no clipboard.
    public init?(flagsByte: UInt8) { self.init(rawValue: (flagsByte >> 4) & 0x03) }
}

/// The checks every clipboard frame applies to its texts (§6.7).
public enum ClipboardText {
    public static let maxMediaTypeBytes = 255
    public static let maxAccountBytes = 64

    /// A media type: 1–255 bytes of printable ASCII without spaces (`text/plain;charset=utf-8`).
    public static func checkMediaType(_ text: String) throws(WireError) {
        try checkMediaType(bytes: Array(text.utf8))
    }

    static func checkMediaType(bytes: [UInt8]) throws(WireError) {
        guard !bytes.isEmpty, bytes.count <= maxMediaTypeBytes else { throw .malformed("media type length") }
        guard bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { throw .malformed("media type characters") }
    }

    /// An account name: 1–64 bytes of UTF-8 without control characters, `/` or `:`.
    public static func checkAccount(_ text: String) throws(WireError) {
        let count = text.utf8.count
        guard count > 0, count <= maxAccountBytes else { throw .malformed("account length") }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "/" || $0 == ":" }) else {
            throw .malformed("account characters")
        }
    }

    /// A media type as it travels (§6.7): its length checked before its bytes are read, then each byte.
    static func readMediaType(_ reader: inout ByteReader) throws(WireError) -> String {
        let length = Int(try reader.readByte())
        guard length > 0 else { throw .malformed("media type length") }
        let bytes = try reader.readBytes(length)
        try checkMediaType(bytes: bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// An account as it travels (§6.7): length (1–64) before the bytes, then UTF-8, then its characters.
    static func readAccount(_ reader: inout ByteReader) throws(WireError) -> String {
        let length = Int(try reader.readByte())
        guard length > 0, length <= maxAccountBytes else { throw .malformed("account length") }
        guard let text = String(validating: try reader.readBytes(length), as: UTF8.self) else { throw .malformed("account not UTF-8") }
        try checkAccount(text)
        return text
    }
}

/// One type of an offer: its media type and the exact size of its bytes.
public struct ClipboardItem: Hashable, Sendable {
    /// No item is larger (§6.7): 64 MiB.
    public static let maxSize: UInt64 = 64 << 20

    public var mediaType: String
    public var size: UInt64

    public init(mediaType: String, size: UInt64) throws(WireError) {
        try ClipboardText.checkMediaType(mediaType)
        guard size <= Self.maxSize else { throw .malformed("item size") }
        self.mediaType = mediaType
        self.size = size
    }
}

/// ClipboardOffer (0x0E, §6.7): the answer to FetchClipboardOffer.
public struct ClipboardOffer: Hashable, Sendable {
    public static let maxItems = 16
    public static let maxExpirySeconds: UInt16 = 3_600
    public static let maxByteCount = 8 + 1 + 2 + (1 + ClipboardText.maxAccountBytes) + 1 + maxItems * (1 + ClipboardText.maxMediaTypeBytes + 8)

    /// Names this copy in FetchClipboardData; a new copy gets a new, random one.
    public var offerID: UInt64
    public var kind: ClipboardKind
    /// Seconds the offer stays valid from this answer's sending (1–3,600).
    public var expiresIn: UInt16
    /// The account on the source that copied: the offer is for the account of the same name only.
    public var account: String
    /// 1–16 items, media types distinct.
    public var items: [ClipboardItem]

    public init(offerID: UInt64, kind: ClipboardKind, expiresIn: UInt16, account: String, items: [ClipboardItem]) throws(WireError) {
        guard expiresIn >= 1, expiresIn <= Self.maxExpirySeconds else { throw .malformed("expiry") }
        try ClipboardText.checkAccount(account)
        guard !items.isEmpty, items.count <= Self.maxItems else { throw .malformed("item count") }
        guard Set(items.map(\.mediaType)).count == items.count else { throw .malformed("media type repeated") }
        self.offerID = offerID
        self.kind = kind
        self.expiresIn = expiresIn
        self.account = account
        self.items = items
    }

    public func item(_ mediaType: String) -> ClipboardItem? { items.first { $0.mediaType == mediaType } }

    public var payload: [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(offerID)
        out.append(kind.rawValue)
        out.appendBigEndian(expiresIn)
        out.append(UInt8(account.utf8.count))
        out.append(contentsOf: account.utf8)
        out.append(UInt8(items.count))
        for item in items {
            out.append(UInt8(item.mediaType.utf8.count))
            out.append(contentsOf: item.mediaType.utf8)
            out.appendBigEndian(item.size)
        }
        return out
    }

    /// Every field checked in wire order, as it is read (§6.7).
    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let offerID = try reader.readUInt64()
        let rawKind = try reader.readByte()
        guard let kind = ClipboardKind(rawValue: rawKind) else { throw .malformed("kind") }
        let expiresIn = try reader.readUInt16()
        guard expiresIn >= 1, expiresIn <= Self.maxExpirySeconds else { throw .malformed("expiry") }
        let account = try ClipboardText.readAccount(&reader)
        let count = Int(try reader.readByte())
        guard count >= 1, count <= Self.maxItems else { throw .malformed("item count") }
        var items: [ClipboardItem] = []
        var seen: Set<String> = []
        for _ in 0..<count {
            let mediaType = try ClipboardText.readMediaType(&reader)
            let item = try ClipboardItem(mediaType: mediaType, size: try reader.readUInt64())
            guard seen.insert(mediaType).inserted else { throw .malformed("media type repeated") }
            items.append(item)
        }
        try reader.expectEnd()
        try self.init(offerID: offerID, kind: kind, expiresIn: expiresIn, account: account, items: items)
    }
}

/// FetchClipboardData (0x0F, §6.7): the bytes of one offered type, from an offset.
public struct ClipboardDataRequest: Hashable, Sendable {
    public static let maxByteCount = 8 + 1 + ClipboardText.maxMediaTypeBytes + 8

    public var offerID: UInt64
    public var mediaType: String
    public var offset: UInt64

    public init(offerID: UInt64, mediaType: String, offset: UInt64) throws(WireError) {
        try ClipboardText.checkMediaType(mediaType)
        guard offset <= ClipboardItem.maxSize else { throw .malformed("offset") }
        self.offerID = offerID
        self.mediaType = mediaType
        self.offset = offset
    }

    public var payload: [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(offerID)
        out.append(UInt8(mediaType.utf8.count))
        out.append(contentsOf: mediaType.utf8)
        out.appendBigEndian(offset)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let offerID = try reader.readUInt64()
        let mediaType = try ClipboardText.readMediaType(&reader)
        let offset = try reader.readUInt64()
        try reader.expectEnd()
        try self.init(offerID: offerID, mediaType: mediaType, offset: offset)
    }
}

/// ClipboardData (0x11, §6.7): the item's total size, an offset and up to 64 KiB from there.
public struct ClipboardData: Hashable, Sendable {
    public static let headerByteCount = 16
    public static let maxDataBytes = 65_536

    public var offset: UInt64
    public var total: UInt64
    public var data: [UInt8]

    public init(offset: UInt64, total: UInt64, data: [UInt8]) throws(WireError) {
        guard data.count <= Self.maxDataBytes else { throw .payloadTooLarge(limit: Self.maxDataBytes, actual: data.count) }
        guard total <= ClipboardItem.maxSize else { throw .malformed("item size") }
        let (end, overflow) = offset.addingReportingOverflow(UInt64(data.count))
        guard !overflow, end <= total else { throw .malformed("data beyond the item") }
        guard !data.isEmpty || offset == total else { throw .malformed("empty data") }
        self.offset = offset
        self.total = total
        self.data = data
    }

    public var payload: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.headerByteCount + data.count)
        out.appendBigEndian(offset)
        out.appendBigEndian(total)
        out.append(contentsOf: data)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let offset = try reader.readUInt64()
        let total = try reader.readUInt64()
        try self.init(offset: offset, total: total, data: Array(payload.dropFirst(Self.headerByteCount)))
    }

    /// Whether this frame ends the answer.
    public var isLast: Bool { offset + UInt64(data.count) == total }
}

/// The receiving side's check of one answer to FetchClipboardData (§6.7): frames in order from the
/// offset asked for, one total that is the offered size, ending exactly at it.
public struct ClipboardDataCheck: Sendable {
    public let expectedTotal: UInt64
    public private(set) var next: UInt64
    public private(set) var isComplete = false

    public init(request: ClipboardDataRequest, offered: ClipboardItem) {
        expectedTotal = offered.size
        next = request.offset
    }

    public mutating func accept(_ data: ClipboardData) throws(WireError) {
        guard !isComplete else { throw .unexpectedMessage("ClipboardData after the last") }
        guard data.total == expectedTotal else { throw .malformed("total is not the offered size") }
        guard data.offset == next else { throw .malformed("data out of order") }
        next = data.offset + UInt64(data.data.count)
        isComplete = data.isLast
    }
}
