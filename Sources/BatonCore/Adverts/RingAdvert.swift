// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// Flags of the sealed advert body (§4.1).
public struct AdvertFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let hasActivity = AdvertFlags(rawValue: 1 << 0)
    public static let hasWebpageURL = AdvertFlags(rawValue: 1 << 1)
    public static let hasDocument = AdvertFlags(rawValue: 1 << 2)
    public static let prefersBLE = AdvertFlags(rawValue: 1 << 3)
    static let known: AdvertFlags = [.hasActivity, .hasWebpageURL, .hasDocument, .prefersBLE]
}

/// The 8-byte plaintext of a ring advert (§4.1).
public struct AdvertBody: Hashable, Sendable {
    public static let maxRevision: UInt32 = 0xFF_FFFF
    public var typeHash: TypeHash
    public var revision: UInt32
    /// The flags byte without the clipboard bits 4–5 (a decoded body holds only bits 0–3: receivers
    /// ignore the reserved bits 6–7; a body built here may set them, for tests of that rule).
    public var flags: AdvertFlags
    /// Bits 4–5: the kind of the device's clipboard offer (§4.1, §9.5); nil: none.
    public var clipboard: ClipboardKind?

    public init(typeHash: TypeHash, revision: UInt32, flags: AdvertFlags, clipboard: ClipboardKind? = nil) {
        self.typeHash = typeHash
        self.revision = revision & Self.maxRevision
        self.flags = AdvertFlags(rawValue: flags.rawValue & ~0x30)
        self.clipboard = clipboard
    }

    public static func presence(revision: UInt32, clipboard: ClipboardKind? = nil) -> AdvertBody {
        AdvertBody(typeHash: .none, revision: revision, flags: [], clipboard: clipboard)
    }

    public var isActivity: Bool { flags.contains(.hasActivity) }

    var encoded: [UInt8] {
        var out = typeHash.bytes
        out.appendBigEndian(UInt64(revision), width: 3)
        out.append(flags.rawValue | (clipboard?.flagBits ?? 0))
        return out
    }

    static func decode(_ bytes: [UInt8]) throws(WireError) -> AdvertBody {
        var reader = ByteReader(bytes)
        let hash = TypeHash(value: try reader.readUInt32())
        let revision = UInt32(try reader.readBigEndian(3))
        let flagsByte = try reader.readByte()
        let flags = AdvertFlags(rawValue: flagsByte).intersection(.known)
        // Bits 4–5: the clipboard; bits 6–7 are reserved and ignored (§4.1).
        let clipboard = ClipboardKind(flagsByte: flagsByte)
        try reader.expectEnd()
        let body = AdvertBody(typeHash: hash, revision: revision, flags: flags, clipboard: clipboard)
        if !body.isActivity && (hash != .none || !flags.isDisjoint(with: [.hasWebpageURL, .hasDocument])) {
            throw .malformed("body")
        }
        return body
    }
}

/// Advert header byte: version in the high nibble, kind in the low one.
public enum AdvertKind: UInt8, Sendable {
    case ring = 1
    case pairing = 2

    public var headerByte: UInt8 { Protocol.version << 4 | rawValue }

    /// Checks length, version and kind of any Baton advert (§4.3 steps 1–2).
    public static func classify(_ advert: [UInt8]) throws(WireError) -> AdvertKind {
        guard advert.count == Protocol.advertLength else { throw .malformed("length") }
        let version = advert[0] >> 4
        guard version == Protocol.version else { throw .unsupportedVersion(version) }
        guard let kind = AdvertKind(rawValue: advert[0] & 0x0F) else { throw .unknownKind(advert[0] & 0x0F) }
        return kind
    }
}

/// Sealing and opening of ring adverts (§4.1). Pure functions of their inputs.
public enum RingAdvert {
    public static let tagLength = 8

    static func nonce(epoch: UInt64, sequence: UInt8) -> [UInt8] {
        var nonce: [UInt8] = []
        nonce.reserveCapacity(12)
        nonce.appendBigEndian(epoch)
        nonce.append(contentsOf: [0, 0, 0, sequence])
        return nonce
    }

    /// Builds the 24 manufacturer-data bytes. The caller guarantees (keys, epoch, sequence)
    /// is never reused for a different body (§4.2); `AdvertSender` does that bookkeeping.
    public static func seal(body: AdvertBody, keys: DerivedKeys, epoch: EpochMaterial, sequence: UInt8) -> [UInt8] {
        var advert: [UInt8] = [AdvertKind.ring.headerByte]
        advert.reserveCapacity(Protocol.advertLength)
        advert.append(contentsOf: epoch.tag)
        advert.append(sequence ^ epoch.mask)
        // 12-byte nonce, 16-byte key and 8-byte tag are valid by construction.
        let sealed = try! AESGCM.seal(key: keys.sealKey(epoch: epoch.epoch), nonce: nonce(epoch: epoch.epoch, sequence: sequence),
                                      plaintext: body.encoded, aad: advert, tagLength: tagLength)
        advert.append(contentsOf: sealed.ciphertext)
        advert.append(contentsOf: sealed.tag)
        return advert
    }

    /// Opens a ring advert with one candidate's keys. Returns the sequence and body, or
    /// throws `authenticationFailed` / `malformed`.
    public static func open(_ advert: [UInt8], keys: DerivedKeys, epoch: UInt64, mask: UInt8) throws(WireError) -> (sequence: UInt8, body: AdvertBody) {
        try open(advert, sealKey: keys.sealKey(epoch: epoch), epoch: epoch, mask: mask)
    }

    /// The matcher's hot path: nonce on the stack and the packet's own bytes handed to
    /// libcrypto, so opening allocates only the 8-byte plaintext.
    static func open(_ advert: [UInt8], sealKey: AESGCMKey, epoch: UInt64, mask: UInt8) throws(WireError) -> (sequence: UInt8, body: AdvertBody) {
        guard advert.count == Protocol.advertLength else { throw .malformed("length") }
        let sequence = advert[7] ^ mask
        // u64be(epoch) || 00 00 00 || seq: the tuple's 12 bytes lie in declaration order, no padding.
        var nonce: (UInt64, UInt32) = (epoch.bigEndian, UInt32(sequence).bigEndian)
        let plaintext: [UInt8]
        do {
            plaintext = try withUnsafeBytes(of: &nonce) { nonce in
                try advert.withUnsafeBytes { packet in
                    try AESGCM.open(key: sealKey, nonce: nonce,
                                    ciphertext: UnsafeRawBufferPointer(rebasing: packet[8..<16]),
                                    tag: UnsafeRawBufferPointer(rebasing: packet[16..<24]),
                                    aad: UnsafeRawBufferPointer(rebasing: packet[0..<8]))
                }
            }
        } catch {
            throw .authenticationFailed
        }
        return (sequence, try AdvertBody.decode(plaintext))
    }
}
