// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// Who paired a member into the ring: the introducer's device id and its Ed25519 signature over
/// `"baton/v1 introduce" || identityKey of the member` (§7.3). Lets receivers check that a new
/// entry was vouched for by a current member, and show "introduced by".
public struct Introduction: Hashable, Sendable {
    public let introducer: DeviceID
    public let signature: [UInt8]

    public init(introducer: DeviceID, signature: [UInt8]) throws(WireError) {
        guard signature.count == Ed25519.signatureByteCount else { throw .malformed("introduction") }
        self.introducer = introducer
        self.signature = signature
    }

    static func signingInput(member identityKey: [UInt8]) -> [UInt8] { "baton/v1 introduce".utf8Bytes + identityKey }

    public static func make(for identityKey: [UInt8], by introducer: Ed25519PrivateKey) throws(WireError) -> Introduction {
        guard let signature = try? introducer.signature(for: signingInput(member: identityKey)) else { throw .badSignature }
        return try Introduction(introducer: DeviceID(identityKey: introducer.publicKey), signature: signature)
    }

    public func isValid(for identityKey: [UInt8], introducerKey: [UInt8]) -> Bool {
        DeviceID(identityKey: introducerKey) == introducer
            && Ed25519.isValidSignature(signature, for: Self.signingInput(member: identityKey), publicKey: introducerKey)
    }

    /// `introducer (16) || signature (64)`: one record of a member's `introductions` (§7.3).
    public static let recordByteCount = DeviceID.byteCount + Ed25519.signatureByteCount
    var record: [UInt8] { introducer.bytes + signature }

    /// Records of `recordByteCount` bytes each, back to back.
    static func records(_ bytes: [UInt8]) throws(WireError) -> [Introduction] {
        guard bytes.count % recordByteCount == 0 else { throw .malformed("roster introductions") }
        var out: [Introduction] = []
        var offset = 0
        while offset < bytes.count {
            let id = try DeviceID(bytes: Array(bytes[offset..<offset + DeviceID.byteCount]))
            let signature = Array(bytes[offset + DeviceID.byteCount..<offset + recordByteCount])
            out.append(try Introduction(introducer: id, signature: signature))
            offset += recordByteCount
        }
        return out
    }

    /// The set rule of §7.3: at most one introduction per introducer (the lower signature bytes
    /// when one introducer signed twice), in ascending order of introducer id.
    public static func union(_ a: [Introduction], _ b: [Introduction]) -> [Introduction] {
        var byIntroducer: [DeviceID: Introduction] = [:]
        for introduction in a + b {
            if let held = byIntroducer[introduction.introducer],
               !introduction.signature.lexicographicallyPrecedes(held.signature) { continue }
            byIntroducer[introduction.introducer] = introduction
        }
        return byIntroducer.values.sorted { $0.introducer < $1.introducer }
    }
}

/// A removal mark, or tombstone (§7.3): who removed the device and the remover's Ed25519
/// signature over `"baton/v1 remove" || removed device id` (a plain mark) or
/// `"baton/v1 remove subtree" || removed device id` (a cascading mark: it also removes what the
/// device introduced, now and later, §7.3 "Cascade"), with the removed device's identity key (so
/// the marks and introductions it signed while a member stay checkable) and the introductions
/// that made it a member (so a receiver that never knew it can tell it was one, and "introduced
/// by" survives). Marks kept from before v1 rosters carried keys have neither (`removedKey` nil)
/// and are always plain.
public struct RemovalMark: Hashable, Sendable {
    public let remover: DeviceID
    public let signature: [UInt8]
    public let removedKey: [UInt8]?
    public let introductions: [Introduction]
    /// The mark also removes every member of the removed device's introduced subtree (§7.3).
    public let cascading: Bool

    public init(remover: DeviceID, signature: [UInt8], removedKey: [UInt8]? = nil, introductions: [Introduction] = [],
                cascading: Bool = false) throws(WireError) {
        guard signature.count == Ed25519.signatureByteCount else { throw .malformed("roster removed entry") }
        guard removedKey == nil || removedKey?.count == 32 else { throw .malformed("roster removed entry") }
        // The legacy dictionary form (no key) is plain only.
        guard !cascading || removedKey != nil else { throw .malformed("roster removed entry") }
        self.remover = remover
        self.signature = signature
        self.removedKey = removedKey
        self.introductions = removedKey == nil ? [] : Introduction.union(introductions, [])
        self.cascading = cascading
    }

    /// The same mark with the removed device's key and introductions (what a tombstone keeps).
    public func keeping(key: [UInt8]?, introductions more: [Introduction]) -> RemovalMark {
        let key = removedKey ?? key
        return (try? RemovalMark(remover: remover, signature: signature, removedKey: key,
                                 introductions: Introduction.union(introductions, more), cascading: cascading)) ?? self
    }

    /// Compact form (§7.3): `identityKey of the removed (32) || removedBy (16) || signature (64)
    /// || [0x01 when cascading] || introductions (80 each)`.
    var record: [UInt8]? {
        guard let removedKey else { return nil }
        return removedKey + remover.bytes + signature + (cascading ? [Self.cascadingFlag] : []) + introductions.flatMap(\.record)
    }

    static let recordHeaderByteCount = 32 + DeviceID.byteCount + Ed25519.signatureByteCount
    static let cascadingFlag: UInt8 = 0x01

    /// Parses the compact form; returns the removed device id with the mark. A record of
    /// 112 + 80·n bytes is plain, one of 113 + 80·n bytes carries the flag byte 0x01 after the
    /// signature; any other length or flag is malformed.
    static func parse(record bytes: [UInt8]) throws(WireError) -> (DeviceID, RemovalMark) {
        guard bytes.count >= recordHeaderByteCount else { throw .malformed("roster removed entry") }
        let key = Array(bytes[0..<32])
        let remover = try DeviceID(bytes: Array(bytes[32..<48]))
        let signature = Array(bytes[48..<recordHeaderByteCount])
        let rest = (bytes.count - recordHeaderByteCount) % Introduction.recordByteCount
        guard rest <= 1 else { throw .malformed("roster removed entry") }
        let cascading = rest == 1
        if cascading { guard bytes[recordHeaderByteCount] == cascadingFlag else { throw .malformed("roster removed entry") } }
        let introductions = try Introduction.records(Array(bytes[(recordHeaderByteCount + (cascading ? 1 : 0))...]))
        guard Set(introductions.map(\.introducer)).count == introductions.count else { throw .malformed("roster introductions") }
        return (DeviceID(identityKey: key), try RemovalMark(remover: remover, signature: signature, removedKey: key,
                                                            introductions: introductions, cascading: cascading))
    }

    static func signingInput(removed id: DeviceID, cascading: Bool = false) -> [UInt8] {
        (cascading ? "baton/v1 remove subtree" : "baton/v1 remove").utf8Bytes + id.bytes
    }

    /// A plain mark without the removed device's key (a cascading mark always keeps it).
    public static func make(removing id: DeviceID, by remover: Ed25519PrivateKey) throws(WireError) -> RemovalMark {
        guard let signature = try? remover.signature(for: signingInput(removed: id)) else { throw .badSignature }
        return try RemovalMark(remover: DeviceID(identityKey: remover.publicKey), signature: signature)
    }

    /// The tombstone of `member`, removed by `remover`: its key and introductions stay.
    public static func make(removing member: RosterMember, by remover: Ed25519PrivateKey, cascading: Bool = false) throws(WireError) -> RemovalMark {
        try make(removingKey: member.identityKey, introductions: member.introductions, by: remover, cascading: cascading)
    }

    /// The tombstone of the device with identity key `key` and these introductions.
    public static func make(removingKey key: [UInt8], introductions: [Introduction], by remover: Ed25519PrivateKey,
                            cascading: Bool = false) throws(WireError) -> RemovalMark {
        guard let signature = try? remover.signature(for: signingInput(removed: DeviceID(identityKey: key), cascading: cascading)) else {
            throw .badSignature
        }
        return try RemovalMark(remover: DeviceID(identityKey: remover.publicKey), signature: signature, removedKey: key,
                               introductions: introductions, cascading: cascading)
    }

    /// The order §7.3 keeps one mark per removed device by: a cascading mark before a plain one,
    /// then the lower `removedBy`, then the lower signature.
    func precedes(_ other: RemovalMark) -> Bool {
        if cascading != other.cascading { return cascading }
        if remover != other.remover { return remover < other.remover }
        return signature.lexicographicallyPrecedes(other.signature)
    }

    public func isValid(removing id: DeviceID, removerKey: [UInt8]) -> Bool {
        DeviceID(identityKey: removerKey) == remover
            && Ed25519.isValidSignature(signature, for: Self.signingInput(removed: id, cascading: cascading), publicKey: removerKey)
    }
}

/// One ring member as the roster carries it (§7.3), signed by the identity it describes, so no
/// other member can change its name, commitment or generation. The key of the current day is not
/// signed (the holder ratchets it, §3.1) but must lead to the signed commitment.
public struct RosterMember: Hashable, Sendable {
    public static let maxNameBytes = 64
    /// 2³²−1 is never a valid generation: a successor could not be issued without wrapping.
    public static let maxGeneration = UInt32.max - 1
    public let name: String
    public let identityKey: [UInt8]
    public let secret: AdvertisingSecret
    /// Ed25519 by `identityKey` over `signingInput` (§7.3).
    public let signature: [UInt8]
    /// Who paired this member in (§7.3): one per introducer, ascending by introducer id; empty
    /// for a ring's founder and for an entry only its owner holds.
    public let introductions: [Introduction]
    /// The first of `introductions` (lowest introducer id).
    public var introduction: Introduction? { introductions.first }
    /// SHA-256 of `identityKey`, cut (§1): computed once, since rosters sort and key by it all the time.
    public let deviceID: DeviceID

    /// Checks lengths, the generation and the self-signature: every RosterMember is signed.
    public init(name: String, identityKey: [UInt8], secret: AdvertisingSecret, signature: [UInt8],
                introduction: Introduction? = nil, introductions: [Introduction] = []) throws(WireError) {
        guard identityKey.count == 32 else { throw .malformed("identity key length") }
        guard name.utf8.count <= Self.maxNameBytes else { throw .malformed("name length") }
        guard secret.generation <= Self.maxGeneration else { throw .malformed("generation") }
        guard secret.chain != nil else { throw .malformed("secret without day chain") }
        guard Ed25519.isValidSignature(signature, for: Self.signingInput(name: name, identityKey: identityKey, secret: secret),
                                       publicKey: identityKey) else { throw .badSignature }
        self.name = name
        self.identityKey = identityKey
        deviceID = DeviceID(identityKey: identityKey)
        self.secret = secret
        self.signature = signature
        self.introductions = Introduction.union(introduction.map { [$0] } ?? [], introductions)
    }

    /// This device's own entry, signed with its identity.
    public static func signed(name: String, identity: Ed25519PrivateKey, secret: AdvertisingSecret,
                              introduction: Introduction? = nil, introductions: [Introduction] = []) throws(WireError) -> RosterMember {
        let input = signingInput(name: name, identityKey: identity.publicKey, secret: secret)
        guard let signature = try? identity.signature(for: input) else { throw .badSignature }
        return try RosterMember(name: name, identityKey: identity.publicKey, secret: secret, signature: signature,
                                introduction: introduction, introductions: introductions)
    }

    /// `"baton/v1 member" || identityKey || commitment || u32be(generation) || name` (the device id
    /// follows from the key; the name goes last because only it has a variable length). The
    /// commitment, not a day's key, is signed, so the signature outlives every ratchet step.
    public static func signingInput(name: String, identityKey: [UInt8], secret: AdvertisingSecret) -> [UInt8] {
        signingInput(name: name, identityKey: identityKey, commitment: secret.chain?.commitment ?? secret.bytes, generation: secret.generation)
    }

    static func signingInput(name: String, identityKey: [UInt8], commitment: [UInt8], generation: UInt32) -> [UInt8] {
        var input = "baton/v1 member".utf8Bytes + identityKey + commitment
        input.appendBigEndian(generation)
        return input + Array(name.utf8)
    }

    /// The same entry also vouched for by `introduction` (added to the set; nil adds nothing).
    public func introduced(by introduction: Introduction?) -> RosterMember {
        with(introductions: Introduction.union(introductions, introduction.map { [$0] } ?? []))
    }

    /// The same entry with exactly these introductions.
    public func with(introductions: [Introduction]) -> RosterMember {
        // Unchanged: no need to check the signature again (merges keep most entries as they are).
        if Introduction.union(introductions, []) == self.introductions { return self }
        // The self-signature does not cover the introductions, so it stays valid.
        return try! RosterMember(name: name, identityKey: identityKey, secret: secret, signature: signature, introductions: introductions)
    }

    /// The entry with its key moved forward to `day` (§3.1); nil when the chain does not cover it.
    public func ratcheted(toDay day: UInt64) -> RosterMember? {
        guard let later = secret.ratcheted(toDay: day) else { return nil }
        // The signature covers the commitment, which ratcheting keeps.
        return try! RosterMember(name: name, identityKey: identityKey, secret: later, signature: signature, introductions: introductions)
    }

    var propertyValue: PropertyValue {
        var entry: [String: PropertyValue] = [
            "deviceId": .bytes(deviceID.bytes), "name": .string(name), "identityKey": .bytes(identityKey),
            "secret": .bytes(secret.bytes), "generation": .integer(Int64(secret.generation)), "signature": .bytes(signature),
            "day": .integer(Int64(secret.day)), "commitment": .bytes(secret.chain?.commitment ?? []),
        ]
        // One introduction travels in the two keys of §7.3; several as `introductions` records.
        if introductions.count == 1, let only = introductions.first {
            entry["introducedBy"] = .bytes(only.introducer.bytes)
            entry["introduction"] = .bytes(only.signature)
        } else if !introductions.isEmpty {
            entry["introductions"] = .bytes(introductions.flatMap(\.record))
        }
        return .dictionary(entry)
    }

    init(value: PropertyValue) throws(WireError) {
        guard let m = value.dictionaryValue, let id = m["deviceId"]?.bytesValue, let name = m["name"]?.stringValue,
              let key = m["identityKey"]?.bytesValue, let secret = m["secret"]?.bytesValue,
              let generation = m["generation"]?.integerValue, generation >= 0, generation <= Int64(Self.maxGeneration),
              let signature = m["signature"]?.bytesValue, let day = m["day"]?.integerValue, day >= 0, day <= Int64(UInt32.max),
              let commitment = m["commitment"]?.bytesValue else {
            throw .malformed("roster member")
        }
        var introductions: [Introduction] = []
        if let records = m["introductions"] {
            guard let bytes = records.bytesValue else { throw .malformed("roster member") }
            introductions = try Introduction.records(bytes)
            guard Set(introductions.map(\.introducer)).count == introductions.count else { throw .malformed("roster introductions") }
        }
        // One introduction (§7.3): the two keys; with `introductions` too, both count.
        switch (m["introducedBy"]?.bytesValue, m["introduction"]?.bytesValue) {
        case (nil, nil) where m["introducedBy"] == nil && m["introduction"] == nil: break
        case (let by?, let signature?):
            let single = try Introduction(introducer: DeviceID(bytes: by), signature: signature)
            // Both forms naming one introducer must carry the same record: otherwise which one
            // counts would depend on whether it is checked before the set rule picks one (§7.3).
            if let listed = introductions.first(where: { $0.introducer == single.introducer }) {
                guard listed == single else { throw .malformed("roster introductions") }
            } else {
                introductions.append(single)
            }
        default: throw .malformed("roster member")
        }
        // The id is derived from the key; a mismatch means a forged or broken entry.
        guard DeviceID(identityKey: key).bytes == id else { throw .malformed("roster member id") }
        // A key that does not lead to the commitment is refused like a bad signature (§7.3).
        try self.init(name: name, identityKey: key,
                      secret: AdvertisingSecret(bytes: secret, generation: UInt32(generation), day: UInt64(day), commitment: commitment),
                      signature: signature, introductions: introductions)
    }
}
