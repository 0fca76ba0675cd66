// SPDX-License-Identifier: LGPL-2.1-or-later
/// Frame types and their payload limits (§6.2).
public enum FrameType: UInt8, CaseIterable, Sendable {
    case hello = 0x01
    case fetchActivity = 0x02
    case activityPayload = 0x03
    case activityContinued = 0x04
    case ack = 0x05
    case error = 0x06
    case fetchDocument = 0x07
    case documentInfo = 0x08
    case documentChunk = 0x09
    case claimEditSession = 0x0A
    case editSessionGrant = 0x0B
    case fetchActivityOfVersions = 0x0C
    case fetchClipboardOffer = 0x0D
    case clipboardOffer = 0x0E
    case fetchClipboardData = 0x0F
    case ringSync = 0x10
    case clipboardData = 0x11
    case fetchClipboardFile = 0x12
    case pairCommit = 0x20
    case pairHello = 0x21
    case pairReveal = 0x22
    case pairSealed = 0x23

    public var maxPayload: Int {
        switch self {
        case .hello: 28
        case .fetchActivity, .activityContinued: 8
        case .activityPayload: 262_144
        case .ack: 0
        case .error: 4 + ErrorFrame.maxMessageBytes
        case .fetchDocument: DocumentRequest.byteCount
        case .documentInfo: DocumentInfo.maxByteCount
        case .documentChunk: DocumentChunk.headerByteCount + DocumentChunk.maxDataBytes
        case .claimEditSession: EditSessionClaim.maxByteCount
        case .editSessionGrant: EditSessionGrant.byteCount
        case .fetchActivityOfVersions: FetchActivityOfVersions.maxByteCount
        case .fetchClipboardOffer: 0
        case .clipboardOffer: ClipboardOffer.maxByteCount
        case .fetchClipboardData: ClipboardDataRequest.maxByteCount
        case .clipboardData: ClipboardData.headerByteCount + ClipboardData.maxDataBytes
        case .fetchClipboardFile: ClipboardFileRequest.byteCount
        case .ringSync: 1_048_576
        case .pairCommit: 41
        case .pairHello, .pairReveal: 48
        case .pairSealed: 8 + PairingSession.maxSealedPlaintext + 16
        }
    }
}

/// One frame: 12-byte header and payload (§6.1).
public struct Frame: Hashable, Sendable {
    public static let headerLength = 12
    public var type: FrameType
    public var requestID: UInt32
    public var payload: [UInt8]

    public init(type: FrameType, requestID: UInt32, payload: [UInt8]) {
        self.type = type
        self.requestID = requestID
        self.payload = payload
    }

    public func encoded() throws(WireError) -> [UInt8] {
        guard payload.count <= type.maxPayload else { throw .payloadTooLarge(limit: type.maxPayload, actual: payload.count) }
        var out: [UInt8] = [Protocol.version, type.rawValue, 0, 0]
        out.reserveCapacity(Self.headerLength + payload.count)
        out.appendBigEndian(requestID)
        out.appendBigEndian(UInt32(payload.count))
        out.append(contentsOf: payload)
        return out
    }

    /// Parses a header; returns type, request id and payload length, all checked (§6.1).
    public static func parseHeader(_ header: ArraySlice<UInt8>) throws(WireError) -> (type: FrameType, requestID: UInt32, length: Int) {
        var reader = ByteReader(Array(header))
        let version = try reader.readByte()
        guard version == Protocol.version else { throw .unsupportedVersion(version) }
        let rawType = try reader.readByte()
        guard let type = FrameType(rawValue: rawType) else { throw .unknownType(rawType) }
        guard try reader.readUInt16() == 0 else { throw .malformed("reserved") }
        let requestID = try reader.readUInt32()
        let length = Int(try reader.readUInt32())
        guard length <= type.maxPayload else { throw .payloadTooLarge(limit: type.maxPayload, actual: length) }
        return (type, requestID, length)
    }

    /// Decodes exactly one frame from `bytes`.
    public static func decode(_ bytes: [UInt8]) throws(WireError) -> Frame {
        var decoder = FrameDecoder()
        decoder.append(bytes)
        guard let frame = try decoder.next() else { throw .truncated }
        guard decoder.bufferedByteCount == 0 else { throw .trailingBytes }
        return frame
    }
}

/// Incremental decoder for a byte stream: feed what arrives, take whole frames out.
/// It never buffers more than one header plus one maximal payload of a valid type.
public struct FrameDecoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0

    public init() {}

    public var bufferedByteCount: Int { buffer.count - start }

    public mutating func append(_ bytes: [UInt8]) {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame, nil if more bytes are needed. Errors are final for the stream.
    public mutating func next() throws(WireError) -> Frame? {
        guard bufferedByteCount >= Frame.headerLength else { return nil }
        let header = try Frame.parseHeader(buffer[start..<start + Frame.headerLength])
        guard bufferedByteCount >= Frame.headerLength + header.length else { return nil }
        let payloadStart = start + Frame.headerLength
        let payload = Array(buffer[payloadStart..<payloadStart + header.length])
        start = payloadStart + header.length
        return Frame(type: header.type, requestID: header.requestID, payload: payload)
    }
}

/// Hello (§6.2). `rosterDigest` is the first 8 bytes of the sender's roster digest (§7.3) as
/// u64be: two members hold the same roster exactly when they agree on it.
public struct HelloMessage: Hashable, Sendable {
    public var deviceID: DeviceID
    public var rosterDigest: UInt64
    public var maxFramePayload: UInt32

    public init(deviceID: DeviceID, rosterDigest: UInt64, maxFramePayload: UInt32) {
        self.deviceID = deviceID
        self.rosterDigest = rosterDigest
        self.maxFramePayload = maxFramePayload
    }

    public var payload: [UInt8] {
        var out = deviceID.bytes
        out.appendBigEndian(rosterDigest)
        out.appendBigEndian(maxFramePayload)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        deviceID = try DeviceID(bytes: try reader.readBytes(DeviceID.byteCount))
        rosterDigest = try reader.readUInt64()
        maxFramePayload = try reader.readUInt32()
        try reader.expectEnd()
    }
}

/// FetchActivity and ActivityContinued share one payload: type hash and revision (§6.2).
public struct ActivityReference: Hashable, Sendable {
    /// In FetchActivity: "the current activity of this type, whatever its revision" (§6.2), for a
    /// receiver that did not hear the advert (continuing by hand, no radio).
    public static let anyRevision: UInt32 = 0xFFFF_FFFF
    public var typeHash: TypeHash
    public var revision: UInt32

    public init(typeHash: TypeHash, revision: UInt32) {
        self.typeHash = typeHash
        self.revision = revision
    }

    public var payload: [UInt8] {
        var out = typeHash.bytes
        out.appendBigEndian(revision)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        try self.init(reading: &reader)
        try reader.expectEnd()
    }

    /// Reads the 8 bytes with the revision rule (§6.2); FetchActivityOfVersions begins with them.
    init(reading reader: inout ByteReader) throws(WireError) {
        typeHash = TypeHash(value: try reader.readUInt32())
        revision = try reader.readUInt32()
        guard revision <= AdvertBody.maxRevision || revision == Self.anyRevision else { throw .malformed("revision") }
    }
}

/// Error frame (§6.3).
public struct ErrorFrame: Hashable, Sendable, Error {
    public static let maxMessageBytes = 256

    public enum Code: UInt16, Sendable, CaseIterable {
        case malformed = 1, unsupportedVersion, payloadTooLarge, unknownActivity, notPermitted, timedOut, internalError
        /// §6.6: the owner did not save and release the edit session in time; it keeps it.
        case sessionBusy = 8
        /// §6.6: the claimer's copy is at a revision the owner's history does not contain.
        case documentConflict = 9
        /// §6.2, §9: the current activity's version is in none of FetchActivityOfVersions' ranges.
        case versionUnsupported = 10
        /// §6.7 "Files": the file asked for changed, was removed or cannot be read at the source since
        /// it was copied; the source takes the offer back.
        case fileChanged = 11
    }

    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        // Cut at a character boundary so the message stays valid UTF-8.
        var cut = ""
        for character in message {
            if cut.utf8.count + String(character).utf8.count > Self.maxMessageBytes { break }
            cut.append(character)
        }
        self.message = cut
    }

    public var payload: [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(code.rawValue)
        let bytes = Array(message.utf8)
        out.appendBigEndian(UInt16(bytes.count))
        out.append(contentsOf: bytes)
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let raw = try reader.readUInt16()
        guard let code = Code(rawValue: raw) else { throw .malformed("error code \(raw)") }
        let length = Int(try reader.readUInt16())
        guard length <= Self.maxMessageBytes else { throw .payloadTooLarge(limit: Self.maxMessageBytes, actual: length) }
        guard let message = String(validating: try reader.readBytes(length), as: UTF8.self) else { throw .malformed("message not UTF-8") }
        try reader.expectEnd()
        self.code = code
        self.message = message
    }

    /// Maps a decoding failure to the code a peer should see.
    public init(_ error: WireError) {
        switch error {
        case .unsupportedVersion: self.init(code: .unsupportedVersion, message: "unsupported version")
        case .payloadTooLarge: self.init(code: .payloadTooLarge, message: "payload too large")
        default: self.init(code: .malformed, message: "malformed request")
        }
    }

    /// The answer to a refused RingSync (§6.2 "Ring sync"): `payloadTooLarge` when the roster or
    /// the merge result breaks a size bound, `internal` when the merge could not be saved,
    /// `malformed` otherwise; the message names the check (`badSignature`, `malformed(roster …)`).
    public init(refusedRoster error: WireError) {
        switch error {
        case .payloadTooLarge, .malformed("roster size"), .malformed("roster removals per remover"):
            self.init(code: .payloadTooLarge, message: "\(error)")
        case .malformed("ring not saved"): self.init(code: .internalError, message: "ring not saved")
        default: self.init(code: .malformed, message: "\(error)")
        }
    }
}

/// Remembers the last replies per peer so a retried request id is answered without acting
/// twice (§6.2). Bounded: the oldest entry goes first. Each reply may carry a digest of the request
/// it answered, so a reused id with another request can be told from a retry.
public struct ReplyCache: Sendable {
    public static let defaultCapacity = 64
    private var entries: [DeviceID: [(id: UInt32, requestDigest: [UInt8], reply: Frame)]] = [:]
    private let capacity: Int

    public init(capacity: Int = ReplyCache.defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    public func reply(peer: DeviceID, requestID: UInt32) -> Frame? {
        entry(peer: peer, requestID: requestID)?.reply
    }

    /// The stored reply with the digest of the request it answered.
    public func entry(peer: DeviceID, requestID: UInt32) -> (requestDigest: [UInt8], reply: Frame)? {
        guard let found = entries[peer]?.last(where: { $0.id == requestID }) else { return nil }
        return (found.requestDigest, found.reply)
    }

    public mutating func store(peer: DeviceID, requestID: UInt32, requestDigest: [UInt8] = [], reply: Frame) {
        var list = entries[peer, default: []]
        list.removeAll { $0.id == requestID }
        list.append((requestID, requestDigest, reply))
        if list.count > capacity { list.removeFirst(list.count - capacity) }
        entries[peer] = list
    }

    public mutating func forget(peer: DeviceID) { entries[peer] = nil }
}
