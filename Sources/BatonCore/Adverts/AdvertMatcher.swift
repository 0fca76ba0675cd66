// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// What a receiver learns from an accepted ring advert (§4.3).
public struct Sighting: Hashable, Sendable {
    public enum Outcome: Hashable, Sendable {
        /// First advert of this member, or a revision it had not seen.
        case newRevision
        /// The same revision again (re-sighting, or the same content in a new epoch).
        case sameRevision
    }
    public let member: DeviceID
    public let epoch: UInt64
    public let sequence: UInt8
    public let body: AdvertBody
    public let outcome: Outcome
}

/// Why a ring advert was not accepted, and whose tag it carried (nil: no member's).
public struct RingAdvertRefusal: Error, Hashable, Sendable {
    public let taggedMember: DeviceID?
    public let reason: WireError
}

/// Recognises ring members' adverts with one hash-table lookup, whatever the number of
/// members, then opens the seal and rejects replays (§4.3). Input in, verdict out; no I/O.
public struct AdvertMatcher: Sendable {
    struct Candidate: Sendable {
        let member: DeviceID
        let generation: UInt32
        let epoch: UInt64
        let mask: UInt8
        /// Only the seal key, not all of DerivedKeys: less to retain on every lookup.
        let sealKey: AESGCMKey
    }

    /// Most buckets hold one candidate; the rest only exist on 48-bit tag collisions.
    struct Bucket: Sendable {
        var first: Candidate
        var others: [Candidate] = []
    }

    struct ReplayState: Sendable {
        var generation: UInt32
        var epoch: UInt64
        var sequence: UInt8
        var body: AdvertBody
    }

    private var secrets: [DeviceID: AdvertisingSecret] = [:]
    private var keys: [DeviceID: DerivedKeys] = [:]
    private var table: [UInt64: Bucket] = [:]
    private var replay: [DeviceID: ReplayState] = [:]
    public private(set) var currentEpoch: UInt64
    /// AES-GCM opens attempted by `receive` and `hear` (a diagnostics counter; tests check that a
    /// heard ring advert is opened once).
    public private(set) var sealOpens = 0

    public init(epoch: UInt64) {
        currentEpoch = epoch
    }

    public var memberCount: Int { secrets.count }
    public var memberIDs: [DeviceID] { Array(secrets.keys) }
    public var tableCount: Int { table.count }

    /// Adds or replaces a member's secret. A new generation resets that member's epoch and
    /// sequence state (its sequence restarts at 0) but keeps its revision.
    public mutating func setMember(_ id: DeviceID, secret: AdvertisingSecret) {
        if secrets[id] == secret { return }
        removeEntries(of: id)
        secrets[id] = secret
        let derived = DerivedKeys(secret: secret)
        keys[id] = derived
        insertEntries(of: id, keys: derived, generation: secret.generation)
    }

    public mutating func removeMember(_ id: DeviceID) {
        removeEntries(of: id)
        secrets[id] = nil
        keys[id] = nil
        replay[id] = nil
    }

    /// Call when the receiver's clock enters a new epoch: the table then covers e−1, e, e+1.
    public mutating func advance(toEpoch epoch: UInt64) {
        guard epoch != currentEpoch else { return }
        currentEpoch = epoch
        table.removeAll(keepingCapacity: true)
        for (id, derived) in keys {
            insertEntries(of: id, keys: derived, generation: secrets[id]?.generation ?? 0)
        }
    }

    /// The keys of a member, for type-hash matching after a sighting.
    public func keys(of member: DeviceID) -> DerivedKeys? { keys[member] }

    /// Processes one advert's 24 manufacturer-data bytes.
    public mutating func receive(_ advert: [UInt8]) throws(WireError) -> Sighting {
        guard try AdvertKind.classify(advert) == .ring else { throw .unknownKind(advert[0] & 0x0F) }
        switch judgeRing(advert) {
        case .success(let sighting): return sighting
        case .failure(let refusal): throw refusal.reason
        }
    }

    /// One lookup and, for a tag of a member, one AES-GCM open per candidate (one unless 48-bit
    /// tags collide), then the replay rules. The caller checked the advert is a 24-byte ring advert.
    mutating func judgeRing(_ advert: [UInt8]) -> Result<Sighting, RingAdvertRefusal> {
        guard let bucket = table[tagKeyOf(advert[1..<7])] else { return .failure(RingAdvertRefusal(taggedMember: nil, reason: .notRingMember)) }
        if let result = openAndAccept(advert, bucket.first) { return result }
        for candidate in bucket.others {
            if let result = openAndAccept(advert, candidate) { return result }
        }
        return .failure(RingAdvertRefusal(taggedMember: bucket.first.member, reason: .authenticationFailed))
    }

    /// nil when the seal does not open under this candidate's keys.
    private mutating func openAndAccept(_ advert: [UInt8], _ candidate: Candidate) -> Result<Sighting, RingAdvertRefusal>? {
        sealOpens += 1
        guard let opened = try? open(advert, candidate) else { return nil }
        do throws(WireError) {
            return .success(try accept(opened.candidate, opened.sequence, opened.body))
        } catch {
            return .failure(RingAdvertRefusal(taggedMember: candidate.member, reason: error))
        }
    }

    private func open(_ advert: [UInt8], _ candidate: Candidate) throws(WireError) -> (candidate: Candidate, sequence: UInt8, body: AdvertBody) {
        let opened = try RingAdvert.open(advert, sealKey: candidate.sealKey, epoch: candidate.epoch, mask: candidate.mask)
        return (candidate, opened.sequence, opened.body)
    }

    private mutating func accept(_ candidate: Candidate, _ sequence: UInt8, _ body: AdvertBody) throws(WireError) -> Sighting {
        let id = candidate.member
        var outcome = Sighting.Outcome.newRevision
        if let last = replay[id] {
            let sameGeneration = last.generation == candidate.generation
            if sameGeneration {
                if candidate.epoch < last.epoch { throw .staleEpoch }
                if candidate.epoch == last.epoch {
                    if sequence < last.sequence { throw .replayedSequence }
                    if sequence == last.sequence && body != last.body { throw .conflictingSequence }
                }
            }
            if Revision.isOlder(body.revision, than: last.body.revision) { throw .staleRevision }
            if body.revision == last.body.revision { outcome = .sameRevision }
        }
        replay[id] = ReplayState(generation: candidate.generation, epoch: candidate.epoch, sequence: sequence, body: body)
        return Sighting(member: id, epoch: candidate.epoch, sequence: sequence, body: body, outcome: outcome)
    }

    private mutating func insertEntries(of id: DeviceID, keys derived: DerivedKeys, generation: UInt32) {
        let low = currentEpoch == 0 ? 0 : currentEpoch - 1
        // An epoch whose day the member's key does not cover (erased, or past the chain) gets no entry.
        for epoch in low...(currentEpoch + 1) where derived.covers(epoch: epoch) {
            let material = derived.epochMaterial(epoch)
            let candidate = Candidate(member: id, generation: generation, epoch: epoch, mask: material.mask, sealKey: derived.sealKey(epoch: epoch))
            if table[material.tagKey] != nil {
                table[material.tagKey]!.others.append(candidate)
            } else {
                table[material.tagKey] = Bucket(first: candidate)
            }
        }
    }

    private mutating func removeEntries(of id: DeviceID) {
        guard let derived = keys[id] else { return }
        let low = currentEpoch == 0 ? 0 : currentEpoch - 1
        for epoch in low...(currentEpoch + 1) where derived.covers(epoch: epoch) {
            let key = derived.epochMaterial(epoch).tagKey
            guard var bucket = table[key] else { continue }
            bucket.others.removeAll { $0.member == id }
            if bucket.first.member == id {
                if bucket.others.isEmpty { table[key] = nil; continue }
                bucket.first = bucket.others.removeFirst()
            }
            table[key] = bucket
        }
    }
}

/// 24-bit serial-number arithmetic for advert revisions (RFC 1982, §4.3).
public enum Revision {
    public static let modulus: UInt32 = 1 << 24

    public static func next(_ revision: UInt32) -> UInt32 { (revision + 1) % modulus }

    /// True when `revision` is older than `reference`: (reference − revision) mod 2²⁴ in 1 ..< 2²³.
    public static func isOlder(_ revision: UInt32, than reference: UInt32) -> Bool {
        let distance = (reference &- revision) & (modulus - 1)
        return distance != 0 && distance < modulus / 2
    }
}
