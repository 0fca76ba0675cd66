import BatonCore
import BatonCrypto
import BatonDBus
import BatonTransport

/// The ring: this device's identity and ring (RingKeeper, persisted in RingStore), the members'
/// endpoint hints, and (in Radio/, Pairing/, Discovery/) the radio, pairing sessions and DNS-SD
/// that still share this actor's state. It knows nothing of D-Bus objects, the transfer or the
/// continuation: those observe it (`observe`, `onSighting`) and call its typed methods.
public actor RingService: ActivityPublisher {
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
    public typealias SightingObserver = @Sendable (Sighting, _ near: Bool) async -> Void
    typealias SessionObserver = @Sendable (_ path: String, _ before: PairingSessionState, _ after: PairingSessionState) -> Void

    let store: RingStore
    let radio: (any RadioPort)?
    let clock: any WallClock
    public nonisolated let configuration: Configuration
    let log: @Sendable (String) -> Void
    var keeper: RingKeeper
    var peers: [DeviceID: RingStore.PeerInfo]
    var observers: [String: ChangeObserver] = [:]
    var sightingObserver: SightingObserver?
    var sessionObserver: SessionObserver?
    /// Where ring members reach this device's transfer listener (set by the transfer; nil: not running).
    var transferReachability: (port: UInt16, localEndpoints: [String])?

    // Radio (Radio/): what is on the air and what is heard.
    var sender: AdvertSender
    /// The ring advert is connectable while the transfer listens on L2CAP and has no IP
    /// endpoint for other machines (§8.3): a peer's kernel only connects to an advertising device.
    var ringAdvertConnectable = false
    var matcher: AdvertMatcher
    /// The activity each user last published; the advert carries the newest one.
    var published: [UInt32: ActivityRecord] = [:]
    var advertisedUID: UInt32?
    var book = RadioBook()
    var radioTask: Task<Void, Never>?
    /// Pairing adverts heard on the radio, by session id (hex).
    var pairingAdverts: [String: HeardPairingAdvert] = [:]

    // Pairing (Pairing/).
    var sessions: [String: PairingEntry] = [:]
    var nextSession = 0

    // DNS-SD through Avahi (Discovery/).
    var discovery = DiscoveryBook()

    public init(store: RingStore, radio: (any RadioPort)?, clock: any WallClock,
                configuration: Configuration, log: @escaping @Sendable (String) -> Void) throws {
        self.store = store
        self.radio = radio
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
        sender = AdvertSender(secret: keeper.ownSecret, restored: try store.loadCounters())
        matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: clock.unixSeconds()))
        for (id, secret) in keeper.peers { matcher.setMember(id, secret: secret) }
    }

    public var deviceID: DeviceID { keeper.deviceID }

    public func start() async {
        book.table = AdvertiserTable(batonCompanyID: configuration.companyID)
        await startRadio()
        await startDiscovery()
    }

    public func stop() async {
        await stopSessions()
        await stopDiscovery()
        radioTask?.cancel()
        await perform(sender.stop())
    }

    /// Clock tick from the daemon: epoch rotation of the advert and of the matcher window.
    public func tick() async {
        await broadcastTick()
        await discoveryTick()
    }

    // MARK: Observers

    public func snapshot() -> RingSnapshot {
        RingSnapshot(deviceID: keeper.deviceID, name: keeper.state.name, identity: keeper.identity, roster: keeper.state.roster)
    }

    /// Calls `observer` now and after every ring change, until `stopObserving(key)`.
    public func observe(_ key: String, _ observer: @escaping ChangeObserver) async {
        observers[key] = observer
        await observer(RingChange(snapshot: snapshot(), syncTo: []))
    }

    public func stopObserving(_ key: String) { observers[key] = nil }

    /// Accepted ring adverts (a sighting of a member) go to `observer`.
    public func onSighting(_ observer: SightingObserver?) { sightingObserver = observer }

    func onSessionChange(_ observer: SessionObserver?) { sessionObserver = observer }

    /// The transfer tells where members reach it (announced at pairing and over DNS-SD); nil when it stops.
    public func setTransferReachability(port: UInt16?, localEndpoints: [String]) async {
        transferReachability = port.map { ($0, localEndpoints) }
        await refreshRingAnnouncement()
    }

    // MARK: Ring changes

    func apply(_ actions: [RingKeeper.Action]) async {
        var syncTo: [DeviceID] = []
        for action in actions {
            switch action {
            case .persist(let state):
                do { try store.saveRing(state) } catch { log("batond: cannot save the ring: \(error)") }
            case .rotateOwnSecret(let secret):
                await perform(sender.rotateSecret(secret, nowSeconds: clock.unixSeconds()))
            case .membersChanged(let members):
                for id in matcher.memberIDs where members[id] == nil { matcher.removeMember(id) }
                for (id, secret) in members { matcher.setMember(id, secret: secret) }
            case .sync(let id):
                // Sent by the transfer (an observer); members away learn at their next Hello.
                syncTo.append(id)
            }
        }
        let change = RingChange(snapshot: snapshot(), syncTo: syncTo)
        for observer in observers.values { await observer(change) }
        await refreshRingAnnouncement()
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

    /// The keys the matcher holds for a member's current secret (type hashes, §3).
    public func advertKeys(of member: DeviceID) -> DerivedKeys? { matcher.keys(of: member) }

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
