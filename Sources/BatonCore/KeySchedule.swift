import BatonCrypto

/// Protocol constants (§2).
public enum Protocol {
    public static let version: UInt8 = 1
    public static let defaultCompanyID: UInt16 = 0xFFFF
    public static let advertLength = 24
    public static let epochSeconds: Int64 = 900
    public static let hkdfSalt = "baton/v1".utf8Bytes
    public static let maxSequencePerEpoch = 256

    /// Epoch of a Unix time in seconds; negative times clamp to epoch 0.
    public static func epoch(unixSeconds: Int64) -> UInt64 {
        unixSeconds <= 0 ? 0 : UInt64(unixSeconds / epochSeconds)
    }
}

/// A device's advertising secret and its generation (§1, §3).
public struct AdvertisingSecret: Hashable, Sendable {
    public static let byteCount = 32
    public let bytes: [UInt8]
    public let generation: UInt32

    public init(bytes: [UInt8], generation: UInt32) throws(WireError) {
        guard bytes.count == Self.byteCount else { throw .malformed("secret length") }
        self.bytes = bytes
        self.generation = generation
    }

    public static func generate(generation: UInt32, using random: some RandomSource) -> AdvertisingSecret {
        // Length is right by construction.
        try! AdvertisingSecret(bytes: random.bytes(byteCount), generation: generation)
    }
}

/// What one epoch of one secret contributes to the advert (§3).
public struct EpochMaterial: Hashable, Sendable {
    public let epoch: UInt64
    public let tag: [UInt8]   // 6 bytes
    public let mask: UInt8

    /// The tag as the integer key of the matching table.
    public var tagKey: UInt64 { tagKeyOf(tag[...]) }
}

@inlinable func tagKeyOf(_ tag: ArraySlice<UInt8>) -> UInt64 {
    var key: UInt64 = 0
    for byte in tag { key = key << 8 | UInt64(byte) }
    return key
}

/// Keys derived from one advertising secret with HKDF and distinct labels (§3).
public struct DerivedKeys: Sendable {
    public let tagKey: [UInt8]
    public let typeKey: [UInt8]
    public let mdnsKey: [UInt8]
    private let secret: [UInt8]

    public init(secret: AdvertisingSecret) {
        func derive(_ label: String, _ count: Int) -> [UInt8] {
            // HKDF with a fixed small length cannot fail.
            try! HKDF.deriveKey(ikm: secret.bytes, salt: Protocol.hkdfSalt, info: label.utf8Bytes, count: count)
        }
        self.secret = secret.bytes
        tagKey = derive("baton/v1 tag", 32)
        typeKey = derive("baton/v1 type", 32)
        mdnsKey = derive("baton/v1 mdns", 32)
    }

    /// K_seal for one epoch (§3): a key per epoch, so a nonce reuse, should one ever happen,
    /// exposes one epoch's GHASH key only, and no key sees more than a few epochs of decryptions.
    public func sealKeyBytes(epoch: UInt64) -> [UInt8] {
        var info = "baton/v1 seal".utf8Bytes
        info.appendBigEndian(epoch)
        return try! HKDF.deriveKey(ikm: secret, salt: Protocol.hkdfSalt, info: info, count: 16)
    }

    public func sealKey(epoch: UInt64) -> AESGCMKey {
        // 16 bytes by construction.
        try! AESGCMKey(sealKeyBytes(epoch: epoch))
    }

    public func epochMaterial(_ epoch: UInt64) -> EpochMaterial {
        var message = "baton/v1 epoch".utf8Bytes
        message.appendBigEndian(epoch)
        let mac = HMACSHA256.mac(key: tagKey, message: message)
        return EpochMaterial(epoch: epoch, tag: Array(mac[0..<6]), mask: mac[6])
    }

    public func typeHash(_ activityType: String) -> TypeHash {
        let mac = HMACSHA256.mac(key: typeKey, message: "baton/v1 type".utf8Bytes + activityType.utf8Bytes)
        return TypeHash(bytes: mac[0..<4])
    }

    /// DNS-SD instance name for an epoch (§3, §8.2).
    public func mdnsInstanceName(epoch: UInt64) -> String {
        var message = "baton/v1 mdns".utf8Bytes
        message.appendBigEndian(epoch)
        return Array(HMACSHA256.mac(key: mdnsKey, message: message).prefix(8)).hexString
    }
}

/// A 4-byte keyed activity type hash.
public struct TypeHash: Hashable, Sendable, CustomStringConvertible {
    public let value: UInt32
    public init(value: UInt32) { self.value = value }
    public init(bytes: ArraySlice<UInt8>) {
        var v: UInt32 = 0
        for b in bytes.prefix(4) { v = v << 8 | UInt32(b) }
        value = v
    }
    public static let none = TypeHash(value: 0)
    public var bytes: [UInt8] { var out: [UInt8] = []; out.appendBigEndian(value); return out }
    public var description: String { bytes.hexString }
}
