import BatonCrypto

/// This device's view of its ring (§7.3, §7.4) as a state machine: pairing results, removals
/// and received rosters come in; what to persist, which secret to advertise with, which
/// members the matcher should know and whom to send RingSync come out.
public struct RingKeeper: Sendable {
    public struct State: Hashable, Sendable {
        public var name: String
        public var identitySeed: [UInt8]
        public var roster: Roster

        public init(name: String, identitySeed: [UInt8], roster: Roster) {
            self.name = name
            self.identitySeed = identitySeed
            self.roster = roster
        }
    }

    public enum Action: Hashable, Sendable {
        /// Write the state durably before acting on anything else.
        case persist(State)
        /// Advertise with this new own secret from now on (AdvertSender.rotateSecret).
        case rotateOwnSecret(AdvertisingSecret)
        /// The matcher's member set changed (everyone but this device).
        case membersChanged([DeviceID: AdvertisingSecret])
        /// Send our roster to this member (RingSync).
        case sync(DeviceID)
    }

    public private(set) var state: State
    public let identity: Ed25519PrivateKey
    public var deviceID: DeviceID { DeviceID(identityKey: identity.publicKey) }

    public init(state: State) throws(WireError) {
        guard let key = try? Ed25519PrivateKey(seed: state.identitySeed) else { throw .malformed("identity seed") }
        self.state = state
        self.identity = key
    }

    /// A new device: fresh identity and secret, a ring of one.
    public static func create(name: String, random: some RandomSource) throws(WireError) -> RingKeeper {
        let seed = random.bytes(32)
        guard let key = try? Ed25519PrivateKey(seed: seed) else { throw .malformed("identity seed") }
        let me = try RosterMember(name: name, identityKey: key.publicKey, secret: .generate(generation: 1, using: random))
        return try RingKeeper(state: State(name: name, identitySeed: seed, roster: Roster(version: 1, members: [me])))
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
        LocalPairingInfo(name: state.name, identityKey: identity, secret: ownSecret, roster: state.roster)
    }

    /// Pairing succeeded: the two rings merge, and every other member hears of it.
    public mutating func paired(_ result: PairingResult, random: some RandomSource) -> [Action] {
        var roster = state.roster
        roster.merge(result.peerRoster)
        roster.upsert(result.peer)
        return apply(roster, from: result.peer.deviceID, random: random)
    }

    /// `bt-pair remove`: tombstone, drop keys, rotate own secret, tell the rest.
    public mutating func remove(_ id: DeviceID, random: some RandomSource) -> [Action] {
        guard id != deviceID else { return [] }
        var roster = state.roster
        guard roster.remove(id) else { return [] }
        return apply(roster, from: nil, random: random, forceRotation: true)
    }

    /// A member's RingSync arrived (inside pinned TLS).
    public mutating func received(_ roster: Roster, from sender: DeviceID, random: some RandomSource) -> [Action] {
        var merged = state.roster
        let result = merged.merge(roster)
        guard result.changed else {
            guard merged.version != state.roster.version else { return [] }
            state.roster = merged
            return [.persist(state)]
        }
        return apply(merged, from: sender, random: random, forceRotation: !result.newlyRemoved.isEmpty)
    }

    private mutating func apply(_ roster: Roster, from sender: DeviceID?, random: some RandomSource, forceRotation: Bool = false) -> [Action] {
        let before = peers
        state.roster = roster
        var actions: [Action] = []
        if state.roster.removed.contains(deviceID) {
            // We were removed: start over alone with a fresh secret and a fresh ring.
            let fresh = AdvertisingSecret.generate(generation: ownSecret.generation &+ 1, using: random)
            let me = try! RosterMember(name: state.name, identityKey: identity.publicKey, secret: fresh)
            state.roster = Roster(version: 1, members: [me])
            return [.persist(state), .rotateOwnSecret(fresh), .membersChanged([:])]
        }
        if forceRotation {
            let fresh = AdvertisingSecret.generate(generation: ownSecret.generation &+ 1, using: random)
            let me = try! RosterMember(name: state.name, identityKey: identity.publicKey, secret: fresh)
            state.roster.upsert(me)
            actions.append(.rotateOwnSecret(fresh))
        }
        actions.insert(.persist(state), at: 0)
        if peers != before { actions.append(.membersChanged(peers)) }
        for id in peers.keys.sorted() where id != sender { actions.append(.sync(id)) }
        return actions
    }
}
