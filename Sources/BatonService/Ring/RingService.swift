import BatonCore
import BatonCrypto
import BatonDBus
import BatonTransport

/// The ring: this device's identity and ring (RingKeeper, persisted in RingStore) and the members'
/// endpoint hints. It drives the radio actor (member secrets, own secret) and knows nothing of
/// D-Bus, pairing sessions, DNS-SD, the transfer or the continuation: those observe it (`observe`,
/// a `RingSnapshot` per change) and call its typed methods.
public actor RingService {
    public struct Configuration: Sendable {
        public var deviceName: String
        /// Where pairing listeners bind ("0.0.0.0" on a real system, "127.0.0.1" in tests).
        public var listenHost: String
        public var companyID: UInt16
        /// Read by the D-Bus glue (Bus/), which checks callers before it calls the ring.
        public var privilege: PrivilegePolicy
        /// The bus where avahi-daemon lives (the system bus on a real system); nil: no DNS-SD.
        public var avahiBus: DBusBusKind?

        public init(deviceName: String, listenHost: String = "0.0.0.0", companyID: UInt16 = Protocol.defaultCompanyID,
                    privilege: PrivilegePolicy = PrivilegePolicy(), avahiBus: DBusBusKind? = nil) {
            self.deviceName = deviceName
            self.listenHost = listenHost
            self.companyID = companyID
            self.privilege = privilege
            self.avahiBus = avahiBus
        }
    }

    public typealias ChangeObserver = @Sendable (RingChange) async -> Void

    let store: RingStore
    let clock: any WallClock
    public nonisolated let configuration: Configuration
    let log: @Sendable (String) -> Void
    var keeper: RingKeeper
    var peers: [DeviceID: RingStore.PeerInfo]
    var observers: [String: ChangeObserver] = [:]
    /// Where ring members reach this device's transfer listener (set by the transfer; nil: not running).
    var transferReachability: (port: UInt16, localEndpoints: [String])?

    /// The radio actor (Radio/): the ring pushes member secrets and its own secret rotation to it.
    public nonisolated let radio: RadioService

    public init(store: RingStore, radio: (any RadioPort)?, clock: any WallClock,
                configuration: Configuration, log: @escaping @Sendable (String) -> Void) throws {
        self.store = store
        self.clock = clock
        self.configuration = configuration
        self.log = log
        if let state = try store.loadRing() {
            keeper = try RingKeeper(state: state)
        } else {
            keeper = try RingKeeper.create(name: configuration.deviceName, random: SystemRandom())
            try store.saveRing(keeper.state)
        }
        peers = try store.loadPeers()
        self.radio = try RadioService(port: radio, store: store, clock: clock, companyID: configuration.companyID,
                                      ownSecret: keeper.ownSecret, log: log)
    }

    public var deviceID: DeviceID { keeper.deviceID }

    /// Gives the radio the members' secrets, follows its sightings (last seen, RSSI) and starts it and DNS-SD.
    public func start() async {
        await radio.setMembers(keeper.peers)
        await radio.onSighting(Self.observerKey) { [weak self] sighting, rssi, _ in await self?.memberSeen(sighting.member, rssi: rssi) }
        await radio.start()
    }

    public func stop() async {
        await radio.onSighting(Self.observerKey, nil)
        await radio.stop()
    }

    static let observerKey = "ring"

    /// Clock tick from the daemon: epoch rotation of the advert and of the matcher window.
    public func tick() async {
        await radio.tick()
    }

    // MARK: Observers

    public func snapshot() -> RingSnapshot {
        RingSnapshot(deviceID: keeper.deviceID, name: keeper.state.name, identity: keeper.identity, roster: keeper.state.roster,
                     ownSecret: keeper.ownSecret, transferPort: transferReachability?.port,
                     localEndpoints: transferReachability?.localEndpoints ?? [])
    }

    /// Calls `observer` now and after every ring change, until `stopObserving(key)`.
    public func observe(_ key: String, _ observer: @escaping ChangeObserver) async {
        observers[key] = observer
        await observer(RingChange(snapshot: snapshot(), syncTo: []))
    }

    public func stopObserving(_ key: String) { observers[key] = nil }

    /// The transfer tells where members reach it (announced at pairing and over DNS-SD); nil when it stops.
    public func setTransferReachability(port: UInt16?, localEndpoints: [String]) async {
        transferReachability = port.map { ($0, localEndpoints) }
        await notifyObservers(syncTo: [])
    }

    private func notifyObservers(syncTo: [DeviceID]) async {
        let change = RingChange(snapshot: snapshot(), syncTo: syncTo)
        for observer in observers.values { await observer(change) }
    }

    // MARK: Ring changes

    func apply(_ actions: [RingKeeper.Action]) async {
        var syncTo: [DeviceID] = []
        for action in actions {
            switch action {
            case .persist(let state):
                do { try store.saveRing(state) } catch { log("batond: cannot save the ring: \(error)") }
            case .rotateOwnSecret(let secret):
                await radio.rotateSecret(secret)
            case .membersChanged(let members):
                await radio.setMembers(members)
            case .sync(let id):
                // Sent by the transfer (an observer); members away learn at their next Hello.
                syncTo.append(id)
            }
        }
        await notifyObservers(syncTo: syncTo)
    }

    /// A member's RingSync (inside pinned TLS): merged, persisted and acted on; returns our roster after it.
    public func receivedRoster(_ roster: Roster, from sender: DeviceID) async -> Roster {
        let before = Set(keeper.state.roster.members.keys)
        let actions = keeper.received(roster, from: sender, random: SystemRandom())
        let gone = before.subtracting(keeper.state.roster.members.keys)
        if !gone.isEmpty {
            for id in gone { peers[id] = nil }
            try? store.savePeers(peers)
            log("batond: RingSync from \(sender.shortForm) removed \(gone.count) member(s)")
        }
        await apply(actions)
        return keeper.state.roster
    }

    func memberSummaries() -> [MemberSummary] {
        keeper.state.roster.members.values.sorted { $0.name < $1.name }.map { member in
            MemberSummary(name: member.name, deviceID: member.deviceID, isSelf: member.deviceID == keeper.deviceID,
                          peer: peers[member.deviceID])
        }
    }

    /// Resolves a name, a short id (xxxx-xxxx) or a full device id to one member.
    func findMember(_ text: String) -> RosterMember? { snapshot().member(matching: text) }

    /// A member's ring advert was accepted: its last-seen time and RSSI, written at most once a
    /// minute (sightings repeat every ~100 ms).
    func memberSeen(_ member: DeviceID, rssi: Int?) {
        guard var info = peers[member] else { return }
        let now = clock.unixSeconds()
        let due = info.lastSeen.map { now - $0 >= 60 } ?? true
        info.lastSeen = now
        if let rssi, RSSIStatistics.isKnown(rssi) { info.lastRSSI = rssi }
        peers[member] = info
        if due { try? store.savePeers(peers) }
    }

    func remove(_ text: String) async throws(ServiceFailure) {
        guard let member = findMember(text), member.deviceID != keeper.deviceID else {
            throw .unknownDevice("no single ring member matches")
        }
        let actions = keeper.remove(member.deviceID, random: SystemRandom())
        peers[member.deviceID] = nil
        try? store.savePeers(peers)
        await apply(actions)
        log("batond: removed \(member.deviceID.shortForm) from the ring")
    }
}

extension RingService {
    /// A pairing succeeded: the rings merge (every other member hears of it by RingSync), the peer's
    /// endpoints become hints, and the radio starts advertising (the ring is no longer one, §4.2).
    func joined(_ pairing: PairingResult, observedHost: String?, bluetoothPeer: L2CAPSocketAddress?) async {
        var actions = keeper.paired(pairing, random: SystemRandom())
        let id = pairing.peer.deviceID
        if peers[id] == nil { peers[id] = RingStore.PeerInfo(pairedSince: clock.unixSeconds()) }
        do { try store.savePeers(peers) } catch { log("batond: cannot save peers: \(error)") }
        recordPairingEndpoints(id, announced: pairing.peerEndpoints, observedHost: observedHost, bluetoothPeer: bluetoothPeer)
        // The new member got our roster in the pairing itself.
        actions.removeAll { if case .sync(let to) = $0 { return to == id }; return false }
        await apply(actions)
    }
}
