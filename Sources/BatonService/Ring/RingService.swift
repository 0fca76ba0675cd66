// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
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
        /// Machine id files, first existing one wins (MachineIdentity); tests point them elsewhere.
        public var machineIDPaths: [String]
        /// A directory that lives as long as the boot and that a restored state directory does not
        /// roll back (batond: systemd's RuntimeDirectory, kept across restarts; `$XDG_RUNTIME_DIR/baton`
        /// for a session daemon): the advert sender's boot mark lives there (BootMarkStore, §4.2
        /// "Restarts"). Nil: no mark, every start counts as the first of its boot.
        public var runtimeDirectory: String?
        /// Own secrets are replaced once this many days old (RingKeeper.maxKeyAgeDays; 0: never early).
        public var rekeyDays: UInt64 = 30

        public init(deviceName: String, listenHost: String = "0.0.0.0", companyID: UInt16 = Protocol.defaultCompanyID,
                    privilege: PrivilegePolicy = PrivilegePolicy(), avahiBus: DBusBusKind? = nil,
                    machineIDPaths: [String] = MachineIdentity.defaultPaths, runtimeDirectory: String? = nil, rekeyDays: UInt64 = 30) {
            self.machineIDPaths = machineIDPaths
            self.runtimeDirectory = runtimeDirectory
            self.rekeyDays = rekeyDays
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
    /// The ring itself. Every change is published to `view` as it is made (RingSnapshot.swift); a
    /// change that must be saved first is made on a copy and assigned once saved (§7.3).
    var keeper: RingKeeper { didSet { view.publish(snapshot()) } }
    var peers: [DeviceID: RingStore.PeerInfo]
    var observers: [String: ChangeObserver] = [:]
    /// Where ring members reach this device's transfer listener (set by the transfer; nil: not running).
    var transferReachability: (port: UInt16, localEndpoints: [String])? { didSet { view.publish(snapshot()) } }
    /// The ring as it is now, read without entering this actor (the transfer's membership checks).
    public nonisolated let view: RingView
    /// When a pending RingSync was last retried after a sighting, per member (not persisted).
    var lastSyncRetry: [DeviceID: Int64] = [:]
    /// The last ring change refused because its record could not be saved (GetStatus
    /// "RingChangeRefused"; not persisted: it is about this run's disk).
    var lastRefusedChange: RefusedRingChange?

    /// The radio actor (Radio/): the ring pushes member secrets and its own secret rotation to it.
    public nonisolated let radio: RadioService

    public init(store: RingStore, radio: (any RadioPort)?, clock: any WallClock,
                configuration: Configuration, log: @escaping @Sendable (String) -> Void) throws {
        self.store = store
        self.clock = clock
        self.configuration = configuration
        self.log = log
        let today = Self.keyDay(clock: clock)
        // A ring written plain (before the state key existed) is sealed before anything else: its
        // keys stay the same, only their file changes (docs/security.md "Key storage at rest").
        if try store.sealSecretsIfPlain() {
            log("batond: sealed the ring's keys at rest with the systemd credential key (\(store.secretsAtRest)); the plain file was replaced")
        }
        let loaded = try store.loadRing()
        if let state = loaded {
            keeper = try RingKeeper(state: state)
            keeper.maxKeyAgeDays = configuration.rekeyDays
            // Days passed while batond was stopped: their keys are dropped before anything runs (§3.1).
            // A renewal's RingSyncs are kept in the state and sent once the transfer starts.
            if !keeper.ratchet(toDay: today, random: SystemRandom()).isEmpty { try store.saveRing(keeper.state) }
        } else {
            keeper = try RingKeeper.create(name: configuration.deviceName, today: today, random: SystemRandom())
            keeper.maxKeyAgeDays = configuration.rekeyDays
            try store.saveRing(keeper.state)
        }
        peers = try store.loadPeers()
        view = RingView(Self.snapshot(of: keeper, reachability: nil))
        let start = Self.startBound(clock: clock, store: store, runtimeDirectory: configuration.runtimeDirectory,
                                    loadedRing: loaded != nil, log: log)
        self.radio = try RadioService(port: radio, store: store, clock: clock, companyID: configuration.companyID,
                                      ownSecret: keeper.ownSecret,
                                      machine: MachineIdentity.value(paths: configuration.machineIDPaths, store: store),
                                      countersExpected: loaded != nil,
                                      forgottenSealsUntil: loaded == nil ? nil : start.forgottenSealsUntil,
                                      bootMark: loaded == nil ? nil : start.mark, bootMarks: start.marks,
                                      log: log)
    }

    public var deviceID: DeviceID { keeper.deviceID }

    /// Gives the radio the members' secrets, follows its sightings (last seen, RSSI) and starts it and DNS-SD.
    public func start() async {
        await radio.setMembers(keeper.peers)
        await rekeyIfCloned()
        await radio.onSighting(Self.observerKey) { [weak self] sighting, rssi, _ in
            await self?.memberSeen(sighting.member, rssi: rssi)
            await self?.sighted(sighting.member, byHello: false)
        }
        await radio.start()
    }

    /// What the runtime directory says about this boot's seals (§4.2 "Restarts"): the boot mark, if
    /// one was written in this boot, and until when seals the stored counters may not record could
    /// have been made, for when the mark does not name the stored secret. A state directory is rolled
    /// back (btrfs, Timeshift, a VM disk snapshot) with a reboot, so with no mark (the first start of
    /// a boot, or nothing persisted in it yet) every forgotten seal is older than the boot. A mark
    /// naming another secret (a re-key in this boot, then a restored older state) or one that cannot
    /// be read leaves the start time as the bound: the first seal waits for the next epoch.
    static func startBound(clock: any WallClock, store: RingStore, runtimeDirectory: String?, loadedRing: Bool,
                           log: @Sendable (String) -> Void) -> (forgottenSealsUntil: Int64, mark: SenderBootMark?, marks: BootMarkStore?) {
        let now = clock.unixSeconds()
        var elapsed = timespec()
        let bootTime = clock_gettime(CLOCK_BOOTTIME, &elapsed) == 0 ? now - Int64(elapsed.tv_sec) - 1 : now
        guard let runtimeDirectory else { return (bootTime, nil, nil) }
        let marks: BootMarkStore
        do {
            marks = try BootMarkStore(runtimeDirectory: runtimeDirectory, stateDirectory: store.directoryPath)
        } catch {
            if loadedRing {
                log("batond: cannot open the advert boot mark in \(runtimeDirectory)/advert (\(error)): the ring advert waits for the next 15-minute epoch, so a restored state directory cannot reuse an advert nonce; fix the directory's owner and mode (0700, owned by batond's user)")
            }
            return (now, nil, nil)
        }
        switch marks.read() {
        case .absent:
            return (bootTime, nil, marks)
        case .present(let mark):
            return (now, mark, marks)
        case .unreadable(let reason):
            if loadedRing {
                log("batond: the advert boot mark \(marks.filePath) was unreadable (\(reason)) and was removed: the ring advert waits for the next 15-minute epoch, so a restored state directory cannot reuse an advert nonce")
            }
            return (now, nil, marks)
        }
    }

    public func stop() async {
        await radio.onSighting(Self.observerKey, nil)
        await radio.stop()
    }

    static let observerKey = "ring"

    /// The day whose keys are stored (§3.1): that of epoch e−1, the oldest of a receiver's window.
    static func keyDay(clock: any WallClock) -> UInt64 {
        AdvertisingSecret.day(ofEpoch: Protocol.epoch(unixSeconds: clock.unixSeconds() - Protocol.epochSeconds))
    }

    /// Clock tick from the daemon: the daily ratchet, epoch rotation of the advert and of the matcher window.
    public func tick() async {
        await apply(keeper.ratchet(toDay: Self.keyDay(clock: clock), random: SystemRandom()))
        await radio.tick()
        await rekeyIfCloned()
    }

    /// A fresh own secret, a new roster version, every member told (RingSync): the current secret was exposed.
    func rekey(reason: String) async {
        log("batond: re-keying: \(reason)")
        await apply(keeper.rekey(random: SystemRandom(), today: Self.keyDay(clock: clock)))
    }

    /// The advert sender cannot seal safely any more (its counters were written on another machine
    /// or are missing beside an existing ring, or the clock is far behind its high-water epoch): a
    /// fresh own secret, a new roster version, and every member hears of it, so no nonce is ever
    /// used twice under one key (§4.2).
    func rekeyIfCloned() async {
        guard await radio.needsRekey else { return }
        log("batond: advert counters missing beside the ring, of a later secret generation than the ring (the ring record restored alone from before a re-key), from another machine, or far ahead of the clock: re-keying, so no advert nonce is used twice; nothing to do")
        await apply(keeper.rekey(random: SystemRandom(), today: Self.keyDay(clock: clock)))
    }

    // MARK: Ring changes

    func apply(_ actions: [RingKeeper.Action]) async {
        var syncTo: [DeviceID] = []
        // The radio calls suspend this actor: a new identity (§7.5) taken meanwhile made these
        // actions stale (members, secret and RingSyncs of the ring just left). The reset applies
        // its own; carrying on here would hand the radio the old members back
        // (ResetIdentityAttackTests).
        let identity = keeper.deviceID
        for action in actions {
            guard keeper.deviceID == identity else {
                log("batond: ring changes of the previous identity dropped: this machine took a new identity meanwhile")
                return
            }
            switch action {
            case .persist(let state):
                do { try store.saveRing(state) } catch { log("batond: cannot save the ring: \(error)") }
            case .rotateOwnSecret(let secret):
                await radio.rotateSecret(secret)
            case .ratchetOwnSecret(let secret):
                await radio.ratchetSecret(secret)
            case .membersChanged(let members):
                await radio.setMembers(members)
            case .sync(let id):
                // Sent by the transfer (an observer); members away learn at their next Hello.
                syncTo.append(id)
            }
        }
        guard keeper.deviceID == identity else { return }
        await notifyObservers(syncTo: syncTo)
    }

    func memberSummaries() -> [MemberSummary] {
        keeper.state.roster.members.values.sorted { $0.name < $1.name }.map { member in
            let isSelf = member.deviceID == keeper.deviceID
            let shown = keeper.state.roster.shownIntroducer(of: member.deviceID, me: keeper.deviceID)
            return MemberSummary(name: member.name, deviceID: member.deviceID, isSelf: isSelf, peer: peers[member.deviceID],
                                 introducedBy: shown,
                                 introducerRemoved: shown.map { keeper.state.roster.members[$0] == nil } ?? false)
        }
    }

    /// Resolves a name, a short id (xxxx-xxxx) or a full device id to one member.
    func findMember(_ text: String) -> RosterMember? { snapshot().member(matching: text) }

    /// The one member `text` means, or UnknownDevice; an ambiguous text lists the candidates
    /// with their short ids (which always resolve), so the user can pick one.
    func requireMember(_ text: String) throws(ServiceFailure) -> RosterMember {
        let found = snapshot().members(matching: text)
        if found.count == 1, let member = found.first { return member }
        guard found.count > 1 else { throw .unknownDevice("no single ring member matches") }
        let listed = found.prefix(4).map { "\(echoed($0.name, limit: 24)) (\($0.deviceID.shortForm))" }.joined(separator: ", ")
        let more = found.count > 4 ? " and \(found.count - 4) more" : ""
        throw .unknownDevice("several ring members match: \(listed)\(more); give a short id")
    }

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

    /// The members a removal of `text` (one member) with what it introduced takes out now
    /// (§7.4), so `bt-pair remove` can list them before it asks.
    func introduced(by text: String) throws(ServiceFailure) -> [MemberSummary] {
        let member = try requireMember(text)
        let ids = Set(keeper.introduced(by: member.deviceID))
        return memberSummaries().filter { ids.contains($0.deviceID) && !$0.isSelf }
    }

    /// Removes a member; `withIntroduced`: with one cascading mark, also what it introduced, now
    /// and later (§7.3 "Cascade"). The members that leaves are dropped from the peers too.
    func remove(_ text: String, withIntroduced: Bool = false) async throws(ServiceFailure) {
        let member = try requireMember(text)
        guard member.deviceID != keeper.deviceID else { throw .unknownDevice("no single ring member matches") }
        let before = Set(keeper.state.roster.members.keys)
        var next = keeper
        var actions: [RingKeeper.Action]
        do { actions = try next.removeMember(member.deviceID, withIntroduced: withIntroduced, random: SystemRandom()) } catch {
            throw .limitExceeded("\(member.name) was not removed: this machine has removed as many devices as one member may "
                                 + "(\(Roster.maxRemovalsPerRemover)) or the ring's roster is full; remove it from another member")
        }
        // Saved before anything of it happens: a removal that cannot be written is not made at all.
        do { actions = try saveFirst(actions, state: next.state) } catch {
            refused("the removal of \(echoed(member.name, limit: 24)) (\(member.deviceID.shortForm))", error)
            throw .failed(Self.unsavedSentence("\(echoed(member.name, limit: 24)) was not removed", error))
        }
        keeper = next
        let gone = before.subtracting(keeper.state.roster.members.keys)
        for id in gone { peers[id] = nil }
        try? store.savePeers(peers)
        await apply(actions)
        log(gone.count > 1 ? "batond: removed \(member.deviceID.shortForm) and \(gone.count - 1) member(s) it introduced from the ring"
                           : "batond: removed \(member.deviceID.shortForm) from the ring")
    }
}
