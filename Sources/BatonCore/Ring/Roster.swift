// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// The ring: who is in, who was removed and by whom (§7.3). Every entry is signed by the identity
/// it describes; removal marks are signed by the remover; merging checks both (`merge`).
///
/// Membership is a convergent replicated set: `merge` is commutative, associative and idempotent
/// over the signed entries it accepts, and a valid removal mark by any device that was ever a
/// member (tombstoned ones included) wins, in whatever order rosters arrive (§7.3). A cascading
/// mark also takes out the removed device's introduced subtree; which entries that is follows from
/// the held entries and marks alone (`cascade`), so it converges too.
public struct Roster: Hashable, Sendable {
    public static let maxMembers = 10_000
    /// Tombstones a roster may hold in all.
    public static let maxRemovals = 10_000
    /// Tombstones one remover may have signed (§7.3): one member cannot fill the ring's roster.
    public static let maxRemovalsPerRemover = 1_024
    /// A local change counter (§7.3): raised on every change this device makes or merges, never
    /// taken from a received roster, so no member can pin it. Rosters are compared by `digest`.
    public var version: UInt64
    /// Every member entry held (what `members` travels as, §7.3), those a cascading mark took out
    /// included: they stay so their marks and introductions remain checkable everywhere.
    public private(set) var entries: [DeviceID: RosterMember]
    /// The members: `entries` without the ones in `derivedOut`.
    public private(set) var members: [DeviceID: RosterMember]
    /// Entries out by a cascading mark (§7.3 "Cascade"), each without a tombstone of its own.
    public private(set) var derivedOut: Set<DeviceID>
    public private(set) var removalMarks: [DeviceID: RemovalMark]
    /// Devices with a tombstone.
    public var removed: Set<DeviceID> { Set(removalMarks.keys) }
    /// Removed, or taken out by a cascading mark: not a member, never one again by pairing.
    public func isOut(_ id: DeviceID) -> Bool { removalMarks[id] != nil || derivedOut.contains(id) }

    public init(version: UInt64 = 0, members: [RosterMember] = [], removalMarks: [DeviceID: RemovalMark] = [:]) {
        self.version = version
        var marks = removalMarks
        var byID: [DeviceID: RosterMember] = [:]
        for member in members {
            if let mark = marks[member.deviceID] {
                marks[member.deviceID] = mark.keeping(key: member.identityKey, introductions: member.introductions)
            } else {
                byID[member.deviceID] = member
            }
        }
        self.removalMarks = marks
        self.entries = byID
        self.members = byID
        self.derivedOut = []
        settle()
    }

    /// Recomputes `derivedOut` and `members` from `entries` and `removalMarks`.
    private mutating func settle() {
        derivedOut = Self.cascade(entries: entries, marks: removalMarks).intersection(entries.keys)
        members = derivedOut.isEmpty ? entries : entries.filter { !derivedOut.contains($0.key) }
    }

    /// Adds or updates a member; ignored for a removed device or an older generation.
    @discardableResult
    public mutating func upsert(_ member: RosterMember) -> Bool {
        let id = member.deviceID
        guard removalMarks[id] == nil else { return false }
        if let existing = entries[id], existing.secret.generation >= member.secret.generation { return false }
        entries[id] = member.with(introductions: Introduction.union(member.introductions, entries[id]?.introductions ?? []))
        settle()
        bumpVersion()
        return true
    }

    /// Removes member `id` for good with a tombstone signed by `remover` (§7.4); a cascading one
    /// (`withIntroduced`) also takes out what `id` introduced, now and later (§7.3 "Cascade"). The
    /// tombstone keeps the removed device's identity key and introductions; nothing the removed
    /// device signed is re-signed. Refused (typed) for a device that is not a member, when the
    /// remover has signed `maxRemovalsPerRemover` marks, or when the roster would no longer encode.
    public mutating func removing(_ id: DeviceID, by remover: Ed25519PrivateKey, withIntroduced cascading: Bool = false) throws(WireError) {
        // A cascading mark may also follow a plain one (it is kept instead, §7.3).
        let plain = removalMarks[id].flatMap { mark in mark.cascading ? nil : mark.removedKey.map { ($0, mark.introductions) } }
        guard let (key, introductions) = members[id].map({ ($0.identityKey, $0.introductions) }) ?? (cascading ? plain : nil) else {
            throw .notRingMember
        }
        let removerID = DeviceID(identityKey: remover.publicKey)
        guard removerID != id else { throw .badSignature }
        // The bounds of §7.3, each refused with its own error, as a merge past them is.
        let replaced = removalMarks[id]
        guard replaced != nil || removalMarks.count < Self.maxRemovals else { throw .malformed("roster size") }
        let signed = removalMarks.values.filter({ $0.remover == removerID }).count - (replaced?.remover == removerID ? 1 : 0)
        guard signed < Self.maxRemovalsPerRemover else {
            throw .malformed("roster removals per remover")
        }
        var next = self
        next.removalMarks[id] = try RemovalMark.make(removingKey: key, introductions: introductions, by: remover, cascading: cascading)
        next.entries[id] = nil
        next.settle()
        _ = try next.encoded()
        next.bumpVersion()
        self = next
    }

    /// `removing`, false when refused.
    @discardableResult
    public mutating func remove(_ id: DeviceID, by remover: Ed25519PrivateKey, withIntroduced cascading: Bool = false) -> Bool {
        (try? removing(id, by: remover, withIntroduced: cascading)) != nil
    }

    /// Records `introducer` as a member who paired `id` in (§7.3), beside any introductions it
    /// already has; false when `id` is unknown or already introduced by it.
    @discardableResult
    public mutating func introduce(_ id: DeviceID, by introducer: Ed25519PrivateKey) -> Bool {
        let introducerID = DeviceID(identityKey: introducer.publicKey)
        guard let member = members[id], !member.introductions.contains(where: { $0.introducer == introducerID }),
              let introduction = try? Introduction.make(for: member.identityKey, by: introducer) else { return false }
        entries[id] = member.introduced(by: introduction)
        settle()
        bumpVersion()
        return true
    }

    /// Moves every member's key forward to `day` and drops the earlier value (§3.1). The version
    /// does not change: the day of a stored key is local, members agree on the roster without it.
    @discardableResult
    public mutating func ratchet(toDay day: UInt64) -> Bool {
        var changed = false
        for (id, member) in entries where member.secret.day < day {
            guard let later = member.ratcheted(toDay: day) else { continue }
            entries[id] = later
            if members[id] != nil { members[id] = later }
            changed = true
        }
        return changed
    }

    /// SHA-256 of what members must agree on (§7.3 "Roster digest"): every entry's device id and
    /// self-signature (it covers name, commitment and generation), every tombstone with its flags
    /// (keeps a key: 1, cascading: 2). Entries a cascade took out count: membership follows from
    /// entries and marks, so equal digests mean equal members. Keys of a day,
    /// introductions (attribution: a member never holds the one signed for itself right after
    /// pairing; they spread with every sync), the version and the order of entries do not count.
    public var digest: [UInt8] {
        var input = "baton/v1 roster".utf8Bytes
        input.appendBigEndian(UInt32(entries.count))
        for member in entries.values.sorted(by: { $0.deviceID < $1.deviceID }) {
            input += member.deviceID.bytes + member.signature
        }
        input.appendBigEndian(UInt32(removalMarks.count))
        for (id, mark) in removalMarks.sorted(by: { $0.key < $1.key }) {
            input += id.bytes + mark.remover.bytes + mark.signature + [(mark.removedKey == nil ? 0 : 1) | (mark.cascading ? 2 : 0)]
        }
        return SHA256.hash(input)
    }

    /// The first 8 bytes of `digest` as u64be: what Hello carries (§6.2).
    public var digestPrefix: UInt64 { digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }

    public struct MergeResult: Hashable, Sendable {
        public var changed: Bool
        /// Device ids that became removed by this merge, by a tombstone or a cascade (the caller
        /// rotates its own secret, §7.4).
        public var newlyRemoved: Set<DeviceID>
        /// Entries left out: this device's own entry, members and tombstones nobody vouched for,
        /// marks whose remover or removed device was never a member.
        public var ignored: Set<DeviceID>
    }

    /// Merges a received roster (§7.3). `me` never takes its own secret or generation from it;
    /// `anchor` is the device the roster came from when it is not a member yet (the pairing peer).
    /// A member signature or removal mark that does not verify refuses the whole roster
    /// (`badSignature`); an introduction that does not verify is dropped; entries that cannot be
    /// vouched for are left out and listed in `ignored`. A result that breaks a bound or does not
    /// encode within the RingSync limit is refused whole (`malformed`, `payloadTooLarge`) and
    /// nothing changes.
    public mutating func merge(_ other: Roster, me: DeviceID, anchor: DeviceID? = nil) throws(WireError) -> MergeResult {
        var ignored: Set<DeviceID> = []
        // Ever-members with their identity keys: this side's members and keyed tombstones, the
        // pairing peer, then, repeatedly, every received member or tombstone introduced by one.
        var vouched: [DeviceID: [UInt8]] = [:]
        for (id, member) in entries { vouched[id] = member.identityKey }
        for (id, mark) in removalMarks { if let key = mark.removedKey { vouched[id] = key } }
        if let anchor, anchor != me, vouched[anchor] == nil, let entry = other.entries[anchor] { vouched[anchor] = entry.identityKey }
        var pending: [DeviceID: (key: [UInt8], introductions: [Introduction])] = [:]
        for (id, member) in other.entries where vouched[id] == nil { pending[id] = (member.identityKey, member.introductions) }
        for (id, mark) in other.removalMarks where vouched[id] == nil {
            guard let key = mark.removedKey else { continue }
            pending[id] = (key, Introduction.union(pending[id]?.introductions ?? [], mark.introductions))
        }
        // Walk from the vouched devices along introductions: linear in the roster size. An
        // introduction by a device that was removed since still counts (the result must not depend
        // on the order marks and entries arrive in); what a removed device sends itself is only
        // its marks (RingKeeper.receive).
        var introducedBy: [DeviceID: [DeviceID]] = [:]
        for (id, entry) in pending { for introduction in entry.introductions { introducedBy[introduction.introducer, default: []].append(id) } }
        var frontier = Array(vouched.keys)
        while let introducer = frontier.popLast() {
            guard let introducerKey = vouched[introducer] else { continue }
            for id in introducedBy.removeValue(forKey: introducer) ?? [] {
                guard vouched[id] == nil, let entry = pending[id],
                      let introduction = entry.introductions.first(where: { $0.introducer == introducer }),
                      introduction.isValid(for: entry.key, introducerKey: introducerKey) else { continue }
                vouched[id] = entry.key
                pending[id] = nil
                frontier.append(id)
            }
        }
        ignored.formUnion(pending.keys)
        if other.entries[me] != nil { ignored.insert(me) }

        // Every received introduction is checked, for known members too; one that fails is dropped.
        func verified(_ introductions: [Introduction], of id: DeviceID, held: [Introduction]) -> [Introduction] {
            guard let key = vouched[id] else { return [] }
            return introductions.filter { introduction in
                if held.contains(introduction) { return true }
                guard let introducerKey = vouched[introduction.introducer] else { return false }
                return introduction.isValid(for: key, introducerKey: introducerKey)
            }
        }

        // Entries: vouched received entries join or update; removal is applied below.
        var result = entries
        for (id, member) in other.entries where vouched[id] != nil {
            let held = result[id]?.introductions ?? removalMarks[id]?.introductions ?? []
            let introductions = verified(member.introductions, of: id, held: held)
            if let mine = result[id] {
                let kept = id == me ? mine : Self.preferred(mine, member)
                result[id] = kept.with(introductions: Introduction.union(mine.introductions, introductions))
            } else {
                result[id] = member.with(introductions: introductions)
            }
        }

        // Tombstones: a valid mark by an ever-member for an ever-member wins; one kept per device.
        var marks = removalMarks
        var newlyRemoved: Set<DeviceID> = []
        for (id, mark) in other.removalMarks {
            guard mark.remover != id, vouched[id] != nil || removalMarks[id] != nil, let removerKey = vouched[mark.remover] else {
                ignored.insert(id)
                continue
            }
            let local = removalMarks[id]
            let sameRemoval = local?.remover == mark.remover && local?.signature == mark.signature && local?.cascading == mark.cascading
            if !sameRemoval { guard mark.isValid(removing: id, removerKey: removerKey) else { throw .badSignature } }
            let introductions = verified(mark.introductions, of: id, held: local?.introductions ?? [])
            // A cascading mark comes with the removed device's key (its id is the key's hash).
            let bare = try RemovalMark(remover: mark.remover, signature: mark.signature,
                                       removedKey: mark.cascading ? mark.removedKey : nil, cascading: mark.cascading)
            var kept: RemovalMark
            if let local {
                kept = sameRemoval || local.precedes(bare) ? local : bare.keeping(key: local.removedKey, introductions: local.introductions)
            } else {
                kept = bare
                newlyRemoved.insert(id)
            }
            marks[id] = kept.keeping(key: vouched[id], introductions: introductions)
        }
        for (id, mark) in marks {
            guard let member = result.removeValue(forKey: id) else { continue }
            marks[id] = mark.keeping(key: member.identityKey, introductions: member.introductions)
        }

        // Bounds (§7.3): a result that breaks one is refused as a whole.
        var perRemover: [DeviceID: Int] = [:]
        for mark in marks.values { perRemover[mark.remover, default: 0] += 1 }
        guard perRemover.values.allSatisfy({ $0 <= Self.maxRemovalsPerRemover }) else { throw .malformed("roster removals per remover") }
        guard result.count <= Self.maxMembers, marks.count <= Self.maxRemovals else { throw .malformed("roster size") }
        var next = Roster(version: version, members: Array(result.values), removalMarks: marks)
        // Cascade (§7.3): entries newly taken out count as removed too (the caller re-keys).
        newlyRemoved.formUnion(next.derivedOut.subtracting(derivedOut).subtracting(removalMarks.keys))
        _ = try next.encoded()
        let changed = next.digest != digest
        if changed { next.bumpVersion() }
        self = next
        return MergeResult(changed: changed, newlyRemoved: newlyRemoved, ignored: ignored)
    }

    /// Which of two entries of one member is kept (§7.3): the higher generation; with equal
    /// generations the lower self-signature bytes; the key of the earlier day when both entries
    /// carry the same commitment (whoever relays it, it leads to the signed commitment, §3.1).
    static func preferred(_ a: RosterMember, _ b: RosterMember) -> RosterMember {
        if a.secret.generation != b.secret.generation { return a.secret.generation > b.secret.generation ? a : b }
        var kept = a.signature == b.signature || a.signature.lexicographicallyPrecedes(b.signature) ? a : b
        let other = kept == a ? b : a
        if other.secret.chain?.commitment == kept.secret.chain?.commitment, other.secret.day < kept.secret.day {
            kept = (try? RosterMember(name: kept.name, identityKey: kept.identityKey, secret: other.secret,
                                      signature: kept.signature, introductions: kept.introductions)) ?? kept
        }
        return kept
    }

    /// What a member answers a RingSync with when the other side is not (or no longer) a member
    /// (§6.2 "Ring sync"): no members, only the tombstone of `id`, or for a device a cascade took
    /// out, the cascading marks; nil when `id` is neither removed nor taken out here.
    public func removalNotice(for id: DeviceID) -> Roster? {
        if let mark = removalMarks[id] { return Roster(version: 0, members: [], removalMarks: [id: mark]) }
        guard derivedOut.contains(id) else { return nil }
        return Roster(version: 0, members: [], removalMarks: removalMarks.filter { $0.value.cascading })
    }

    /// The member ListMembers names as the one that introduced `id` (dbus-api Ring1.ListMembers
    /// IntroducedBy): nil for `me` and for a member `me` introduced (paired) itself, whoever else
    /// signed an introduction of it; otherwise the introducer of lowest id that is still a member,
    /// else the one of lowest id (removed since). Any member may sign an introduction of a member it
    /// knows (§7.3), so a rogue member can add itself beside the real introducer, but it can neither
    /// hide that this device paired the member nor make a present introducer read as removed.
    public func shownIntroducer(of id: DeviceID, me: DeviceID) -> DeviceID? {
        guard id != me, let introductions = entries[id]?.introductions,
              !introductions.contains(where: { $0.introducer == me }) else { return nil }
        let introducers = introductions.map(\.introducer).sorted()
        return introducers.first { members[$0] != nil } ?? introducers.first
    }

    /// The local counter saturates at 2⁶³ − 1 (it travels as a non-negative integer).
    private mutating func bumpVersion() {
        if version < UInt64(Int64.max) { version += 1 }
    }

    /// Members a cascading removal of `root` signed by `me` would take out with it (§7.4,
    /// `bt-pair remove`): the cascade of §7.3 run as if `root` had such a mark, less what is out
    /// already. That is the subtree root → y1 → y2 ...: members reached from `root` through
    /// introductions within the set, all of whose introducers are `root`, in the set or removed
    /// (plants that introduce themselves or each other in a cycle stay in it, a member with an
    /// introducer outside it does not); never `me`. Ascending by device id, `root` not included.
    public func introducedSubtree(of root: DeviceID, me: DeviceID) -> [DeviceID] {
        // A member, or a device with a plain tombstone (a cascading mark may still follow it).
        guard let (key, introductions) = members[root].map({ ($0.identityKey, $0.introductions) })
            ?? removalMarks[root].flatMap({ mark in mark.removedKey.map { ($0, mark.introductions) } }) else { return [] }
        var marks = removalMarks
        var held = entries
        held[root] = nil
        // Not signed: only the flag, the remover and the key and introductions the cascade reads.
        marks[root] = try? RemovalMark(remover: me, signature: [UInt8](repeating: 0, count: Ed25519.signatureByteCount),
                                       removedKey: key, introductions: introductions, cascading: true)
        return Self.cascade(entries: held, marks: marks).filter { members[$0] != nil && $0 != me }.sorted()
    }
}
