// SPDX-License-Identifier: LGPL-2.1-or-later
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

/// Where a key sits in its generation's day chain (§3.1): `bytes` of an `AdvertisingSecret` is
/// S_day; the chain ends at `endDay`, whose value S_endDay is the signed `commitment`.
public struct DayChain: Hashable, Sendable {
    public let day: UInt64
    public let endDay: UInt64
    public let commitment: [UInt8]
}

/// A device's advertising secret of one generation, as one member stores it: the key of one day
/// and the generation's commitment (§3.1). Keys of later days follow one-way (`ratcheted`);
/// earlier days' keys cannot be computed from it.
public struct AdvertisingSecret: Hashable, Sendable {
    public static let byteCount = 32
    /// Days covered by one generation: S_a .. S_(a+1023) are keys, S_(a+1024) is the commitment.
    public static let chainDays: UInt64 = 1024
    public static let secondsPerDay: Int64 = 86_400
    public static let epochsPerDay: UInt64 = 96
    /// S_day (for a secret without a chain: the one key of every day).
    public let bytes: [UInt8]
    public let generation: UInt32
    /// nil only for a fixed key that never ratchets (tests and the §10.1 vectors of one day's key);
    /// a roster never carries one (RosterMember requires a chain).
    public let chain: DayChain?

    /// A fixed key without a day chain: every day uses `bytes`.
    public init(bytes: [UInt8], generation: UInt32) throws(WireError) {
        guard bytes.count == Self.byteCount else { throw .malformed("secret length") }
        self.bytes = bytes
        self.generation = generation
        self.chain = nil
    }

    /// A received key of `day` with its generation's commitment: valid only if ratcheting it
    /// forward reaches the commitment within `chainDays` steps (§3.1).
    public init(bytes: [UInt8], generation: UInt32, day: UInt64, commitment: [UInt8]) throws(WireError) {
        guard bytes.count == Self.byteCount else { throw .malformed("secret length") }
        guard commitment.count == Self.byteCount else { throw .malformed("commitment length") }
        guard day <= UInt64(UInt32.max) else { throw .malformed("day") }
        var key = bytes
        var endDay: UInt64?
        for step in 1...Self.chainDays {
            key = Self.step(key, toDay: day + step)
            if key == commitment { endDay = day + step; break }
        }
        guard let endDay else { throw .badSignature }
        self.bytes = bytes
        self.generation = generation
        self.chain = DayChain(day: day, endDay: endDay, commitment: commitment)
    }

    private init(unchecked bytes: [UInt8], generation: UInt32, chain: DayChain) {
        self.bytes = bytes
        self.generation = generation
        self.chain = chain
    }

    /// A new generation issued on `day` from the root `root` (S_day): computes the commitment.
    public static func issue(root: [UInt8], generation: UInt32, day: UInt64) throws(WireError) -> AdvertisingSecret {
        guard root.count == byteCount else { throw .malformed("secret length") }
        var key = root
        for step in 1...chainDays { key = Self.step(key, toDay: day + step) }
        return AdvertisingSecret(unchecked: root, generation: generation,
                                 chain: DayChain(day: day, endDay: day + chainDays, commitment: key))
    }

    public static func generate(generation: UInt32, day: UInt64, using random: some RandomSource) -> AdvertisingSecret {
        // Length is right by construction.
        try! issue(root: random.bytes(byteCount), generation: generation, day: day)
    }

    /// S_d = SHA-256("baton/v1 ratchet" || u64be(d) || S_(d−1)) (§3.1): one way, labelled with
    /// the day it yields, so a key cannot be passed off as another day's.
    public static func step(_ key: [UInt8], toDay day: UInt64) -> [UInt8] {
        var input = "baton/v1 ratchet".utf8Bytes
        input.appendBigEndian(day)
        return SHA256.hash(input + key)
    }

    /// UTC day of an epoch (§3.1).
    public static func day(ofEpoch epoch: UInt64) -> UInt64 { epoch / epochsPerDay }

    /// The day this key belongs to (0 for a fixed key).
    public var day: UInt64 { chain?.day ?? 0 }

    /// Whether this secret has a key for `day`: not before its own day (erased), not at or after the end.
    public func covers(day: UInt64) -> Bool {
        guard let chain else { return true }
        return day >= chain.day && day < chain.endDay
    }

    public func covers(epoch: UInt64) -> Bool { covers(day: Self.day(ofEpoch: epoch)) }

    /// The same generation moved forward to `day` (nil when not covered). The caller that stores
    /// the result and drops `self` has erased the earlier days' keys.
    public func ratcheted(toDay target: UInt64) -> AdvertisingSecret? {
        guard let chain else { return self }
        guard covers(day: target) else { return nil }
        var key = bytes
        var day = chain.day
        while day < target { day += 1; key = Self.step(key, toDay: day) }
        return AdvertisingSecret(unchecked: key, generation: generation,
                                 chain: DayChain(day: target, endDay: chain.endDay, commitment: chain.commitment))
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

/// Keys derived from one advertising secret with HKDF and distinct labels (§3): K_type from the
/// generation's commitment (the same every day), the rest from the key of the epoch's day.
public struct DerivedKeys: Sendable {
    /// K_tag, K_mdns and the input of K_seal for one day.
    struct DayKeys: Sendable {
        let day: UInt64
        let dayKey: [UInt8]
        let tagKey: [UInt8]
        let mdnsKey: [UInt8]

        init(day: UInt64, dayKey: [UInt8]) {
            self.day = day
            self.dayKey = dayKey
            tagKey = DerivedKeys.derive(dayKey, "baton/v1 tag", 32)
            mdnsKey = DerivedKeys.derive(dayKey, "baton/v1 mdns", 32)
        }
    }

    public let typeKey: [UInt8]
    private let secret: AdvertisingSecret
    /// The secret's own day and the next one: together they cover a receiver's e−1, e, e+1.
    private let first: DayKeys
    private let second: DayKeys?

    public init(secret: AdvertisingSecret) {
        self.secret = secret
        typeKey = Self.derive(secret.chain?.commitment ?? secret.bytes, "baton/v1 type", 32)
        first = DayKeys(day: secret.day, dayKey: secret.bytes)
        second = secret.chain == nil ? nil : secret.ratcheted(toDay: secret.day + 1).map { DayKeys(day: $0.day, dayKey: $0.bytes) }
    }

    static func derive(_ ikm: [UInt8], _ label: String, _ count: Int) -> [UInt8] {
        // HKDF with a fixed small length cannot fail.
        try! HKDF.deriveKey(ikm: ikm, salt: Protocol.hkdfSalt, info: label.utf8Bytes, count: count)
    }

    /// K_tag of the secret's own day.
    public var tagKey: [UInt8] { first.tagKey }
    /// K_mdns of the secret's own day.
    public var mdnsKey: [UInt8] { first.mdnsKey }

    /// Whether the secret has a key for this epoch's day (callers that seal check it first).
    public func covers(epoch: UInt64) -> Bool { secret.covers(epoch: epoch) }

    /// The keys of an epoch's day. Outside the chain (an erased earlier day, or past its end) the
    /// nearest covered day's keys: their material for a foreign epoch matches no sealed advert,
    /// and nothing is sealed there (`covers`).
    private func dayKeys(_ epoch: UInt64) -> DayKeys {
        guard let chain = secret.chain else { return first }
        let day = min(max(AdvertisingSecret.day(ofEpoch: epoch), chain.day), chain.endDay - 1)
        if day == first.day { return first }
        if let second, day == second.day { return second }
        let later = secret.ratcheted(toDay: day)!
        return DayKeys(day: day, dayKey: later.bytes)
    }

    /// K_seal for one epoch (§3): a key per epoch, so a nonce reuse, should one ever happen,
    /// exposes one epoch's GHASH key only, and no key sees more than a few epochs of decryptions.
    public func sealKeyBytes(epoch: UInt64) -> [UInt8] {
        var info = "baton/v1 seal".utf8Bytes
        info.appendBigEndian(epoch)
        return try! HKDF.deriveKey(ikm: dayKeys(epoch).dayKey, salt: Protocol.hkdfSalt, info: info, count: 16)
    }

    public func sealKey(epoch: UInt64) -> AESGCMKey {
        // 16 bytes by construction.
        try! AESGCMKey(sealKeyBytes(epoch: epoch))
    }

    public func epochMaterial(_ epoch: UInt64) -> EpochMaterial {
        var message = "baton/v1 epoch".utf8Bytes
        message.appendBigEndian(epoch)
        let mac = HMACSHA256.mac(key: dayKeys(epoch).tagKey, message: message)
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
        return Array(HMACSHA256.mac(key: dayKeys(epoch).mdnsKey, message: message).prefix(8)).hexString
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
