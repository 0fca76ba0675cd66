// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// This device's view of its ring (§7.3, §7.4) as a state machine: pairing results, removals
/// and received rosters come in; what to persist, which secret to advertise with, which
/// members the matcher should know and whom to send RingSync come out.
public struct RingKeeper: Sendable {
    public struct State: Hashable, Sendable {
        public var name: String
        public var identitySeed: [UInt8]
        public var roster: Roster
        /// Members that still need our roster, with the local roster version (a counter of this
        /// device, §7.3) the RingSync must carry (§7.4).
        /// Kept durably so a re-key that failed to reach a member is retried at its next sighting.
        public var pendingSyncs: [DeviceID: UInt64]

        public init(name: String, identitySeed: [UInt8], roster: Roster, pendingSyncs: [DeviceID: UInt64] = [:]) {
            self.name = name
            self.identitySeed = identitySeed
            self.roster = roster
            self.pendingSyncs = pendingSyncs
        }
    }

    public enum Action: Hashable, Sendable {
        /// Write the state durably before acting on anything else.
        case persist(State)
        /// Advertise with this new own secret from now on (AdvertSender.rotateSecret).
        case rotateOwnSecret(AdvertisingSecret)
        /// The own key moved to a new day of the same generation (AdvertSender.ratchet): drop the old one.
        case ratchetOwnSecret(AdvertisingSecret)
        /// The matcher's member set changed (everyone but this device).
        case membersChanged([DeviceID: AdvertisingSecret])
        /// Send our roster to this member (RingSync); report the outcome with `syncDelivered`.
        case sync(DeviceID)
    }

    public private(set) var state: State
    public let identity: Ed25519PrivateKey
    /// The UTC day of the clock's epoch e−1 at the last `ratchet` (§3.1): stored keys are of this
    /// day, and new generations are issued on it.
    public private(set) var today: UInt64
    /// A generation this close to the end of its day chain is replaced (§3.1).
    public static let renewalDays: UInt64 = 30
    /// Own secrets older than this many days are replaced at the next day's ratchet (a re-key,
    /// RingSync to every member), so a leaked backup or key reads adverts for at most this long
    /// rather than the rest of a 1,024-day chain. 0: only the chain's renewal (batond: --rekey-days).
    public var maxKeyAgeDays: UInt64 = 30
    public var deviceID: DeviceID { DeviceID(identityKey: identity.publicKey) }

    public init(state: State) throws(WireError) {
        guard let key = try? Ed25519PrivateKey(seed: state.identitySeed) else { throw .malformed("identity seed") }
        self.state = state
        self.identity = key
        self.today = state.roster.members[DeviceID(identityKey: key.publicKey)]?.secret.day ?? 0
    }

    /// A new device: fresh identity and secret of `generation` (issued on `today`), a ring of one.
    public static func create(name: String, today: UInt64, generation: UInt32 = 1, random: some RandomSource) throws(WireError) -> RingKeeper {
        let seed = random.bytes(32)
        guard let key = try? Ed25519PrivateKey(seed: seed) else { throw .malformed("identity seed") }
        let me = try RosterMember.signed(name: name, identity: key, secret: .generate(generation: generation, day: today, using: random))
        return try RingKeeper(state: State(name: name, identitySeed: seed, roster: Roster(version: 1, members: [me])))
    }

    /// `bt-pair reset-identity` (§7 "A new identity"): the ring, its secrets and this device's
    /// identity are forgotten; a fresh identity starts a ring of one, as after being removed: its
    /// secret is of the generation after the current one (so no state kept for the old generations,
    /// the advert counters included, applies to it), issued on `today`. Nothing is sent: the other
    /// members keep the old id until their owner removes it. Returns what to persist (first) and do.
    public mutating func resetIdentity(today day: UInt64, random: some RandomSource) throws(WireError) -> [Action] {
        let (next, overflow) = ownSecret.generation.addingReportingOverflow(1)
        let generation = !overflow && next <= RosterMember.maxGeneration ? next : 1
        var fresh = try RingKeeper.create(name: state.name, today: day, generation: generation, random: random)
        fresh.maxKeyAgeDays = maxKeyAgeDays
        self = fresh
        return [.persist(state), .rotateOwnSecret(ownSecret), .membersChanged([:])]
    }

    public var ownSecret: AdvertisingSecret {
        // The own entry exists from creation on and is re-added whenever it could be lost.
        state.roster.members[deviceID]?.secret ?? (try! AdvertisingSecret(bytes: [UInt8](repeating: 0, count: 32), generation: 0))
    }

    /// Everyone the matcher should recognise: all members but this device.
    public var peers: [DeviceID: AdvertisingSecret] {
        var out: [DeviceID: AdvertisingSecret] = [:]
        for (id, member) in state.roster.members where id != deviceID { out[id] = member.secret }
        return out
    }

    public func pairingInfo() -> LocalPairingInfo {
        LocalPairingInfo(name: state.name, identityKey: identity, roster: state.roster)
    }

    /// Whether `id` may join by pairing: not this device, not a removed device (§7.4). Checked
    /// before this device's roster is sent (PairingSession does it with the same roster).
    public func checkPairingPeer(_ id: DeviceID) throws(WireError) {
        guard id != deviceID else { throw .badSignature }
        guard !state.roster.isOut(id) else { throw .peerRemoved }
    }

    /// Pairing succeeded: the two rings merge, we vouch for the peer, and every other member hears of it.
    public mutating func pair(_ result: PairingResult, random: some RandomSource) throws(WireError) -> [Action] {
        let peerID = result.peer.deviceID
        try checkPairingPeer(peerID)
        var roster = state.roster
        let merged = try roster.merge(result.peerRoster, me: deviceID, anchor: peerID)
        if roster.members[peerID] == nil { roster.upsert(result.peer) }
        roster.introduce(peerID, by: identity)
        // The introduction adds to what the merge checked: a peer roster sent just under the
        // RingSync limit must not leave a ring that can no longer be synced or saved (§7.3 bounds);
        // refused whole here, before anything changes, not as an unsaved record.
        _ = try roster.encoded()
        // The peer holds what it sent and our entry from the pairing exchange; but when its roster
        // removes devices we did not know removed, we re-key (§7.4), and the new secret must reach
        // the peer too: without a RingSync it kept our pairing-time secret and heard our adverts as
        // another ring's (lab: RingRemovalRaceLabTests, a laptop paired again into a ring with tombstones).
        let rekeys = !merged.newlyRemoved.isEmpty
        return apply(roster, from: rekeys ? nil : peerID, random: random, forceRotation: rekeys)
    }

    /// `pair`, ignoring a refused peer (nothing changes then).
    public mutating func paired(_ result: PairingResult, random: some RandomSource) -> [Action] {
        (try? pair(result, random: random)) ?? []
    }

    /// `bt-pair remove`: signed tombstone, drop keys, rotate own secret, tell the rest. With
    /// `withIntroduced` the one mark is cascading: what `id` introduced, now and later, is out too
    /// (§7.3 "Cascade"). Refused (typed, nothing changes) for this device, a device that is not a
    /// member, a remover at its bound of marks, or a roster that would no longer encode (§7.3).
    public mutating func removeMember(_ id: DeviceID, withIntroduced: Bool = false, random: some RandomSource) throws(WireError) -> [Action] {
        guard id != deviceID else { throw .badSignature }
        var roster = state.roster
        try roster.removing(id, by: identity, withIntroduced: withIntroduced)
        state.pendingSyncs[id] = nil
        return apply(roster, from: nil, random: random, forceRotation: true)
    }

    /// `removeMember`, nothing when refused.
    public mutating func remove(_ id: DeviceID, withIntroduced: Bool = false, random: some RandomSource) -> [Action] {
        (try? removeMember(id, withIntroduced: withIntroduced, random: random)) ?? []
    }

    /// Members `bt-pair remove` offers to remove with `id` (§7.4): what a cascading mark on `id`
    /// signed here takes out now (id → y1 → y2 ..., each member whose every introducer is in it or removed).
    public func introduced(by id: DeviceID) -> [DeviceID] {
        state.roster.introducedSubtree(of: id, me: deviceID)
    }

    /// A member's RingSync arrived (inside pinned TLS). Throws, changing nothing, when a signature
    /// in it is bad, when it lacks its sender's own entry, or when the merge result breaks a bound (§7.3).
    public mutating func receive(_ roster: Roster, from sender: DeviceID, random: some RandomSource) throws(WireError) -> [Action] {
        // A roster lists its sender (§7.3); one without that entry is refused.
        // A removal notice (no members, only marks: the reply of a member to a device it removed,
        // §6.2) is the one exception.
        guard roster.entries[sender] != nil || roster.entries.isEmpty else { throw .malformed("roster sender entry") }
        var merged = state.roster
        // A device removed here may still deliver its marks (they count, §7.3), nothing else.
        // So may a device a cascade took out here.
        let taken = state.roster.isOut(sender) ? Roster(version: 0, members: [], removalMarks: roster.removalMarks) : roster
        let result = try merged.merge(taken, me: deviceID)
        // Our own entry as the sender holds it, of our generation or a later one but not ours: our
        // state was rolled back (a restored state directory) and the ring holds a secret we lost,
        // which it keeps over ours (§7.3 step 3). Issue the generation after both (§7.4).
        if let theirs = taken.entries[deviceID], let mine = state.roster.entries[deviceID],
           theirs.secret.generation >= mine.secret.generation, theirs.signature != mine.signature,
           theirs.secret.generation < RosterMember.maxGeneration {
            return apply(merged, from: nil, random: random, forceRotation: true, after: theirs.secret.generation)
        }
        guard result.changed else {
            // Keys may still have moved back to an earlier day of their chain (§3.1), never before ours.
            merged.ratchet(toDay: today)
            guard merged != state.roster else { return [] }
            let before = peers
            state.roster = merged
            return peers == before ? [.persist(state)] : [.persist(state), .membersChanged(peers)]
        }
        return apply(merged, from: sender, random: random, forceRotation: !result.newlyRemoved.isEmpty)
    }

    /// `receive`, ignoring a refused roster (nothing changes then).
    public mutating func received(_ roster: Roster, from sender: DeviceID, random: some RandomSource) -> [Action] {
        (try? receive(roster, from: sender, random: random)) ?? []
    }

    /// A RingSync to `id` was answered; `version` is the roster version it carried.
    public mutating func syncDelivered(to id: DeviceID, version: UInt64) -> [Action] {
        guard let needed = state.pendingSyncs[id], version >= needed else { return [] }
        state.pendingSyncs[id] = nil
        return [.persist(state)]
    }

    /// The clock's epoch e−1 entered `day` (§3.1): every stored key, our own included, moves to
    /// that day and the earlier values are no longer kept; keys of e and e+1 are derived from it.
    /// Near the end of its chain our own generation is replaced (everyone hears of it).
    public mutating func ratchet(toDay day: UInt64, random: some RandomSource) -> [Action] {
        guard day > today else { return [] }
        today = day
        var roster = state.roster
        // Piggybacks on the day's ratchet: no wakeup of its own.
        let aged = ownSecret.chain.map { maxKeyAgeDays > 0 && $0.endDay - AdvertisingSecret.chainDays + maxKeyAgeDays <= day } ?? false
        guard roster.ratchet(toDay: day) || aged else { return [] }
        if aged || ownSecret.chain.map({ $0.endDay <= day + Self.renewalDays }) == true {
            state.roster = roster
            return apply(roster, from: nil, random: random, forceRotation: true)
        }
        state.roster = roster
        return [.persist(state), .ratchetOwnSecret(ownSecret), .membersChanged(peers)]
    }

    /// A member was heard (accepted advert, Hello): retry a sync it still needs.
    public func sighted(_ id: DeviceID) -> [Action] {
        state.pendingSyncs[id] != nil && state.roster.members[id] != nil ? [.sync(id)] : []
    }

    /// The state directory was copied from another machine (SenderCounters.machine differs), or the
    /// clock is far behind: a fresh own secret, so the two copies never seal under the same key, and
    /// everyone hears of it. `today` (the clock's key day) is when the new generation is issued: it
    /// may be before the last ratchet when the clock went back, and the new key must cover the clock.
    public mutating func rekey(random: some RandomSource, today day: UInt64? = nil) -> [Action] {
        if let day { today = day }
        return apply(state.roster, from: nil, random: random, forceRotation: true)
    }

    private func nextOwnSecret(random: some RandomSource, after generation: UInt32? = nil) -> AdvertisingSecret? {
        let (next, overflow) = (generation ?? ownSecret.generation).addingReportingOverflow(1)
        guard !overflow, next <= RosterMember.maxGeneration else { return nil }
        return .generate(generation: next, day: today, using: random)
    }

    private mutating func apply(_ roster: Roster, from sender: DeviceID?, random: some RandomSource, forceRotation: Bool = false,
                                after lost: UInt32? = nil) -> [Action] {
        let before = peers
        // Read before the roster is replaced: a roster that removed us no longer holds our entry.
        let ownGeneration = ownSecret.generation
        state.roster = roster
        // Keys received of an earlier day are moved to ours at once: we keep no earlier day (§3.1).
        state.roster.ratchet(toDay: today)
        var actions: [Action] = []
        if state.roster.isOut(deviceID) {
            // We were removed (or a cascade took us out): start over alone with a fresh secret (the generation after ours, so
            // no receiver's state for our old generations can apply to it) and a fresh ring.
            let fresh = nextOwnSecret(random: random, after: ownGeneration) ?? .generate(generation: 1, day: today, using: random)
            let me = try! RosterMember.signed(name: state.name, identity: identity, secret: fresh)
            state.roster = Roster(version: 1, members: [me])
            state.pendingSyncs = [:]
            return [.persist(state), .rotateOwnSecret(fresh), .membersChanged([:])]
        }
        if forceRotation, let fresh = nextOwnSecret(random: random, after: max(ownGeneration, lost ?? 0)),
           let me = try? RosterMember.signed(name: state.name, identity: identity, secret: fresh,
                                             introductions: state.roster.members[deviceID]?.introductions ?? []) {
            state.roster.upsert(me)
            actions.append(.rotateOwnSecret(fresh))
        }
        for id in state.pendingSyncs.keys where state.roster.members[id] == nil { state.pendingSyncs[id] = nil }
        let targets = peers.keys.sorted().filter { $0 != sender }
        for id in targets { state.pendingSyncs[id] = state.roster.version }
        actions.insert(.persist(state), at: 0)
        if peers != before { actions.append(.membersChanged(peers)) }
        for id in targets { actions.append(.sync(id)) }
        return actions
    }
}
