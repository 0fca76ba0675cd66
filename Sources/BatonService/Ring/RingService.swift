#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonCrypto
import BatonDBus
import BatonTransport

/// Who may pair and remove: root, the daemon's own user (session-bus daemons) and members of
/// group `baton`. Listing needs no privilege.
public struct PrivilegePolicy: Sendable {
    public var group: String
    public init(group: String = "baton") { self.group = group }

    public func allows(uid: UInt32) -> Bool {
        if uid == 0 || uid == geteuid() { return true }
        guard let entry = getpwuid(uid), let groupEntry = getgrnam(group) else { return false }
        let wanted = groupEntry.pointee.gr_gid
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        guard getgrouplist(entry.pointee.pw_name, entry.pointee.pw_gid, &groups, &count) >= 0 else { return false }
        return groups.prefix(Int(count)).contains(wanted)
    }
}

/// The ring side of the daemon: this device's identity and ring (RingKeeper, persisted in
/// RingStore), pairing sessions driven over TCP, and the advert that carries the current activity.
public actor RingService: ActivityPublisher {
    public struct Configuration: Sendable {
        public var deviceName: String
        /// Where pairing listeners bind ("0.0.0.0" on a real system, "127.0.0.1" in tests).
        public var listenHost: String
        public var companyID: UInt16
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

    struct PairingEntry {
        var path: String
        var ownerUID: UInt32
        var role: String
        var state: String
        var code: String = ""
        var peerName: String = ""
        var peerID: String = ""
        var error: String = ""
        var port: UInt16 = 0
        var sessionID: [UInt8]
        var driver: PairingDriver?
        var listener: PlainFrameListener?
        /// The L2CAP channel an acceptor also waits on (§8.3), when the radio has an adapter.
        var bluetoothListener: L2CAPListener?

        func closeListeners() {
            listener?.close()
            bluetoothListener?.close()
        }
    }

    let connection: DBusConnection
    let store: RingStore
    let radio: (any RadioPort)?
    let clock: any WallClock
    let configuration: Configuration
    let log: @Sendable (String) -> Void
    var keeper: RingKeeper
    var peers: [DeviceID: RingStore.PeerInfo]
    private(set) var sender: AdvertSender
    /// The ring advert is connectable while the transfer service listens on L2CAP and has no IP
    /// endpoint for other machines (§8.3): a peer's kernel only connects to an advertising device.
    var ringAdvertConnectable = false
    var matcher: AdvertMatcher
    var sessions: [String: PairingEntry] = [:]
    private var nextSession = 0
    /// The activity each user last published; the advert carries the newest one.
    private var published: [UInt32: ActivityRecord] = [:]
    private(set) var advertisedUID: UInt32?
    var book = RadioBook()
    var radioTask: Task<Void, Never>?
    var suggestions: [DeviceID: Suggestion] = [:]
    /// Pairing adverts heard on the radio, by session id (hex).
    var pairingAdverts: [String: HeardPairingAdvert] = [:]
    /// The revision per member that was continued or dismissed here.
    var settledRevisions: [DeviceID: UInt32] = [:]
    var nextSuggestion = 0
    /// The authenticated transfer (TransferService.start attaches it).
    var transfer: TransferService?
    /// DNS-SD through Avahi (RingService+Discovery).
    var discovery = DiscoveryBook()

    public init(connection: DBusConnection, store: RingStore, radio: (any RadioPort)?, clock: any WallClock,
                configuration: Configuration, log: @escaping @Sendable (String) -> Void) throws {
        self.connection = connection
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

    public func start() async throws {
        book.table = AdvertiserTable(batonCompanyID: configuration.companyID)
        try await connection.export(ringInterfaces(), at: BatonObjectPath.ring)
        await startRadio()
        await startDiscovery()
    }

    public func stop() async {
        for entry in sessions.values {
            entry.closeListeners()
            await entry.driver?.cancel()
            try? connection.unexport(path: entry.path)
        }
        sessions = [:]
        await stopDiscovery()
        radioTask?.cancel()
        withdrawAllSuggestions()
        await perform(sender.stop())
        try? connection.unexport(path: BatonObjectPath.ring)
    }

    // MARK: ActivityPublisher

    public func publish(_ record: ActivityRecord, uid: UInt32) async throws(RadioError) {
        // Kept even without a radio: the radio is only discovery, the record is what a fetch returns.
        published[uid] = record
        advertisedUID = uid
        try await advertiseContent(AdvertContent(activityType: record.activityType, hasWebpageURL: record.webpageURL != nil), changed: true)
    }

    public func withdraw(uid: UInt32) async {
        published[uid] = nil
        guard advertisedUID == uid else { return }
        advertisedUID = nil
        try? await advertiseContent(.presence)
    }

    /// The record behind the current advert, for FetchActivity.
    public func currentRecord() -> ActivityRecord? { advertisedUID.flatMap { published[$0] } }

    func advertiseContent(_ content: AdvertContent, changed: Bool = false) async throws(RadioError) {
        let now = clock.unixSeconds()
        var actions = sender.update(content, nowSeconds: now, changed: changed)
        guard let radio else {
            // The radio only does discovery: the content and its revision still count for FetchActivity.
            if let counters = actions.lazy.compactMap({ if case .persist(let c) = $0 { c } else { nil } }).last {
                try? store.saveCounters(counters)
            }
            throw .unavailable("no radio")
        }
        if sender.currentAdvert == nil { actions = sender.start(nowSeconds: now) }
        try await perform(actions, radio: radio)
    }

    private func perform(_ actions: [AdvertSender.Action]) async {
        guard let radio else { return }
        try? await perform(actions, radio: radio)
    }

    private func perform(_ actions: [AdvertSender.Action], radio: any RadioPort) async throws(RadioError) {
        for action in actions {
            switch action {
            case .persist(let counters):
                // Counters reach the disk before the advert they cover reaches the radio (§4.2).
                do { try store.saveCounters(counters) } catch { throw .failed("cannot persist advert counters") }
            case .advertise(let bytes):
                try await radio.advertise(companyID: configuration.companyID, data: bytes, connectable: ringAdvertConnectable)
            case .stop:
                await radio.stopAdvertising()
            }
        }
    }

    /// Clock tick from the daemon: epoch rotation of the advert and of the matcher window.
    public func tick() async {
        let now = clock.unixSeconds()
        matcher.advance(toEpoch: Protocol.epoch(unixSeconds: now))
        var actions = sender.tick(nowSeconds: now)
        // While the pairing advert is on the air the new ring advert waits for restoreRingAdvert;
        // its counters are still persisted now.
        if !ownWaitingSessionIDs().isEmpty { actions = actions.filter { if case .persist = $0 { true } else { false } } }
        await perform(actions)
        await discoveryTick()
    }

    // MARK: Ring changes

    func apply(_ actions: [RingKeeper.Action]) async {
        for action in actions {
            switch action {
            case .persist(let state):
                do { try store.saveRing(state) } catch { log("batond: cannot save the ring: \(error)") }
            case .rotateOwnSecret(let secret):
                await perform(sender.rotateSecret(secret, nowSeconds: clock.unixSeconds()))
            case .membersChanged(let members):
                for id in matcher.memberIDs where members[id] == nil {
                    matcher.removeMember(id)
                    withdrawSuggestion(of: id)
                }
                for (id, secret) in members { matcher.setMember(id, secret: secret) }
            case .sync:
                // Sent by the transfer (transferRingChanged); members away learn at their next Hello.
                break
            }
        }
        await transferRingChanged(actions)
        await refreshRingAnnouncement()
    }

    func memberList() -> [DBusValue] {
        keeper.state.roster.members.values.sorted { $0.name < $1.name }.map { member in
            let id = member.deviceID
            var entry: [String: DBusValue] = [
                "Name": .string(member.name), "DeviceId": .string(id.description), "ShortId": .string(id.shortForm),
                "Self": .boolean(id == keeper.deviceID),
            ]
            if let info = peers[id] {
                entry["PairedSince"] = .int64(info.pairedSince)
                if let seen = info.lastSeen { entry["LastSeen"] = .int64(seen) }
                if let rssi = info.lastRSSI { entry["LastRSSI"] = .int16(Int16(clamping: rssi)) }
                entry["Endpoints"] = .stringArray(info.endpoints)
            }
            return .propertyDictionary(entry)
        }
    }

    /// Resolves a name, a short id (xxxx-xxxx) or a full device id to one member.
    func findMember(_ text: String) -> RosterMember? {
        let wanted = text.lowercased()
        let matches = keeper.state.roster.members.values.filter { member in
            let id = member.deviceID
            return id.description == wanted || id.shortForm == wanted || member.name == text
        }
        return matches.count == 1 ? matches.first : nil
    }

    // MARK: Pairing sessions

    func requirePrivilege(_ sender: String) async throws -> UInt32 {
        let uid = try await connection.connectionUnixUser(sender)
        guard configuration.privilege.allows(uid: uid) else {
            throw DBusError(name: BatonErrorName.notPermitted, message: "pairing needs root or group \(configuration.privilege.group)")
        }
        return uid
    }

    func startSession(role: PairingSession.Role, uid: UInt32, channel: (any FrameChannel)?, listener: PlainFrameListener?,
                      bluetoothListener: L2CAPListener? = nil, sessionID: [UInt8]) async throws -> String {
        nextSession += 1
        let path = "\(BatonObjectPath.pairingSessionPrefix)/\(nextSession)"
        var entry = PairingEntry(path: path, ownerUID: uid, role: role == .initiator ? "initiator" : "responder",
                                 state: channel == nil ? "waiting" : "connected", sessionID: sessionID)
        entry.listener = listener
        entry.bluetoothListener = bluetoothListener
        entry.port = listener?.port ?? 0
        sessions[path] = entry
        try await connection.export([sessionInterface(path)], at: path)
        if listener != nil {
            await advertisePairing(sessionID: sessionID, tcpPublished: discovery.connection != nil, psm: bluetoothListener?.local.psm)
        }
        Task { await self.runSession(path: path, role: role, channel: channel) }
        return path
    }

    private func runSession(path: String, role: PairingSession.Role, channel: (any FrameChannel)?) async {
        guard let entry = sessions[path] else { return }
        var channel = channel
        if channel == nil, let listener = entry.listener {
            do {
                channel = try await Self.acceptFirst(tcp: listener, bluetooth: entry.bluetoothListener,
                                                     timeout: .seconds(PairingSession.timeoutSeconds))
            } catch {
                finishSession(path, error: error == .timedOut ? "timed-out" : "transport")
                entry.closeListeners()
                await restoreRingAdvert()
                return
            }
            entry.closeListeners()
            if let bluetooth = channel as? L2CAPFrameChannel { log("batond: pairing initiator connected over L2CAP from \(bluetooth.peer)") }
            update(path) { $0.state = "connected" }
            await restoreRingAdvert()
        }
        guard let channel else { return }
        let session: PairingSession
        do {
            session = try PairingSession(role: role, sessionID: entry.sessionID, ephemeralKey: X25519PrivateKey(),
                                         nonce: SystemRandom().bytes(16), local: pairingInfoWithEndpoints())
        } catch {
            finishSession(path, error: "protocol")
            return
        }
        let driver = PairingDriver(session: session, channel: channel, clock: clock) { [weak self] code in
            await self?.codeShown(path, code)
        }
        update(path) { $0.driver = driver }
        let result = await driver.run()
        switch result {
        case .success(let pairing):
            var actions = keeper.paired(pairing, random: SystemRandom())
            let id = pairing.peer.deviceID
            if peers[id] == nil { peers[id] = RingStore.PeerInfo(pairedSince: clock.unixSeconds()) }
            do { try store.savePeers(peers) } catch { log("batond: cannot save peers: \(error)") }
            recordPairingEndpoints(id, announced: pairing.peerEndpoints, observedHost: (channel as? PlainFrameChannel)?.peerDescription,
                                   bluetoothPeer: (channel as? L2CAPFrameChannel)?.peer)
            actions.removeAll { if case .sync(let to) = $0 { return to == id }; return false }
            await apply(actions)
            await advertisePresenceIfRinged()
            update(path) {
                $0.state = "paired"
                $0.peerName = pairing.peer.name
                $0.peerID = id.description
            }
            log("batond: paired with \(id.shortForm)")
        case .failure(let failure):
            let name: String = switch failure {
            case .rejected: "rejected"
            case .timedOut: "timed-out"
            case .verificationFailed: "verification-failed"
            case .transport: "transport"
            case .protocolError: "protocol"
            }
            finishSession(path, error: name)
            log("batond: pairing failed: \(name)")
        }
    }

    private func codeShown(_ path: String, _ code: String) {
        update(path) {
            $0.code = code
            $0.state = "confirming"
        }
    }

    private func finishSession(_ path: String, error: String) {
        update(path) {
            $0.state = "failed"
            $0.error = error
        }
    }

    private func update(_ path: String, _ change: (inout PairingEntry) -> Void) {
        guard var entry = sessions[path] else { return }
        let before = sessionProperties(entry)
        change(&entry)
        sessions[path] = entry
        if entry.state != "waiting", discovery.pairingPublishers[path] != nil {
            Task { await self.pairingSessionLeftWaiting(path) }
        }
        let after = sessionProperties(entry)
        let changed = after.filter { before[$0.key] != $0.value }
        if !changed.isEmpty {
            try? connection.emitPropertiesChanged(path: path, interface: BatonInterface.pairingSession, changed: changed)
        }
    }

    func sessionProperties(_ entry: PairingEntry) -> [String: DBusValue] {
        [
            "State": .string(entry.state), "Role": .string(entry.role), "Code": .string(entry.code),
            "PeerName": .string(entry.peerName), "PeerId": .string(entry.peerID), "Error": .string(entry.error),
            "Port": .uint16(entry.port), "SessionId": .string(entry.sessionID.hexString),
        ]
    }

    func sessionEntry(_ path: String, caller: String) async throws -> PairingEntry {
        guard let entry = sessions[path] else { throw DBusError(name: BatonErrorName.unknownObject, message: "no such pairing session") }
        let uid = try await connection.connectionUnixUser(caller)
        guard uid == entry.ownerUID || uid == 0 else { throw DBusError(name: BatonErrorName.notPermitted, message: "not your pairing session") }
        return entry
    }

    func confirm(_ path: String, caller: String, accepted: Bool) async throws {
        let entry = try await sessionEntry(path, caller: caller)
        guard entry.state == "confirming", let driver = entry.driver else {
            throw DBusError(name: BatonErrorName.notReady, message: "no code to confirm yet")
        }
        await driver.confirm(accepted)
    }

    func cancel(_ path: String, caller: String) async throws {
        let entry = try await sessionEntry(path, caller: caller)
        entry.closeListeners()
        if let driver = entry.driver { await driver.cancel() } else { finishSession(path, error: "rejected") }
    }

    func remove(_ text: String) async throws {
        guard let member = findMember(text), member.deviceID != keeper.deviceID else {
            throw DBusError(name: BatonErrorName.unknownDevice, message: "no single ring member matches")
        }
        let actions = keeper.remove(member.deviceID, random: SystemRandom())
        peers[member.deviceID] = nil
        try? store.savePeers(peers)
        await apply(actions)
        log("batond: removed \(member.deviceID.shortForm) from the ring")
    }

    // MARK: D-Bus

    func ringInterfaces() -> [DBusInterface] {
        let ring = DBusInterface(BatonInterface.ring, methods: radioInterfaceMethods() + [
            DBusMethod("ListMembers", out: [DBusArgument("members", "aa{sv}")]) { [weak self] _ in
                guard let self else { return [] }
                return [.array(elementSignature: "a{sv}", await self.memberList())]
            },
        ] + transferMethods(), properties: [
            DBusProperty("DeviceId", signature: "s") { [weak self] in .string(await self?.keeper.deviceID.description ?? "") },
            DBusProperty("ShortId", signature: "s") { [weak self] in .string(await self?.keeper.deviceID.shortForm ?? "") },
            DBusProperty("Name", signature: "s") { [weak self] in .string(await self?.keeper.state.name ?? "") },
        ])
        let pairing = DBusInterface(BatonInterface.pairing, methods: [
            DBusMethod("Accept", in: [DBusArgument("options", "a{sv}")], out: [DBusArgument("session", "o")]) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.requirePrivilege(call.sender)
                let options = call.arguments.first?.asDictionary ?? [:]
                guard Set(options.keys).isSubset(of: ["Host"]) else {
                    throw DBusError(name: BatonErrorName.invalidArguments, message: "unknown option")
                }
                let host = try options["Host"].map { value throws -> String in
                    guard let text = value.stringValue else { throw DBusError(name: BatonErrorName.invalidArguments, message: "Host must be a string") }
                    return text
                } ?? self.configuration.listenHost
                let listener: PlainFrameListener
                do { listener = try PlainFrameListener(host: host, port: 0) } catch {
                    throw DBusError(name: BatonErrorName.failed, message: "cannot listen for pairing: \(error)")
                }
                let sessionID = SystemRandom().bytes(8)
                let bluetoothListener = await self.openPairingL2CAPListener()
                let path = try await self.startSession(role: .responder, uid: uid, channel: nil, listener: listener,
                                                       bluetoothListener: bluetoothListener, sessionID: sessionID)
                await self.publishPairingEndpoint(path: path, sessionID: sessionID, port: listener.port)
                return [.objectPath(path)]
            },
            DBusMethod("Pair", in: [DBusArgument("target", "s"), DBusArgument("options", "a{sv}")], out: [DBusArgument("session", "o")]) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.requirePrivilege(call.sender)
                guard let target = call.arguments.first?.stringValue else {
                    throw DBusError(name: BatonErrorName.invalidArguments, message: "target must be HOST:PORT or ble:ADDRESS/PSM")
                }
                let options = call.arguments.last?.asDictionary ?? [:]
                guard Set(options.keys).isSubset(of: ["SessionId", "AddressType"]) else {
                    throw DBusError(name: BatonErrorName.invalidArguments, message: "unknown option")
                }
                // The acceptor's session id (its pairing advert, its DNS-SD TXT record, or `bt-pair accept`'s output).
                guard let text = options["SessionId"]?.stringValue, let sessionID = [UInt8](hex: text), sessionID.count == 8 else {
                    throw DBusError(name: BatonErrorName.invalidArguments, message: "SessionId must be 16 hex digits")
                }
                let channel: any FrameChannel
                if let (address, psm) = Self.splitBluetoothTarget(target) {
                    let addressType = try options["AddressType"].map { value throws -> LEAddressType in
                        switch value.stringValue {
                        case "public": return .public
                        case "random": return .random
                        default: throw DBusError(name: BatonErrorName.invalidArguments, message: "AddressType must be public or random")
                        }
                    }
                    channel = try await self.connectPairingL2CAP(peer: address, psm: psm, addressType: addressType)
                } else if let (host, port) = Self.splitEndpoint(target), options["AddressType"] == nil {
                    do { channel = try await PlainFrameConnector.connect(host: host, port: port, timeout: .seconds(10)) } catch {
                        throw DBusError(name: BatonErrorName.unknownDevice, message: "cannot reach \(target): \(error)")
                    }
                } else {
                    throw DBusError(name: BatonErrorName.invalidArguments, message: "target must be HOST:PORT or ble:ADDRESS/PSM")
                }
                let path = try await self.startSession(role: .initiator, uid: uid, channel: channel, listener: nil, sessionID: sessionID)
                return [.objectPath(path)]
            },
            DBusMethod("Remove", in: [DBusArgument("device", "s")]) { [weak self] call in
                guard let self else { return [] }
                _ = try await self.requirePrivilege(call.sender)
                try await self.remove(call.arguments.first?.stringValue ?? "")
                return []
            },
            discoverMethod(),
        ])
        return [ring, pairing]
    }

    func sessionInterface(_ path: String) -> DBusInterface {
        func property(_ name: String, _ signature: String) -> DBusProperty {
            DBusProperty(name, signature: signature) { [weak self] in
                guard let self, let entry = await self.sessions[path] else { throw DBusError(name: BatonErrorName.unknownObject, message: "gone") }
                return await self.sessionProperties(entry)[name] ?? .string("")
            }
        }
        return DBusInterface(BatonInterface.pairingSession, methods: [
            DBusMethod("Confirm", in: [DBusArgument("accepted", "b")]) { [weak self] call in
                try await self?.confirm(path, caller: call.sender, accepted: call.arguments.first?.boolValue ?? false)
                return []
            },
            DBusMethod("Cancel") { [weak self] call in
                try await self?.cancel(path, caller: call.sender)
                return []
            },
        ], properties: [
            property("State", "s"), property("Role", "s"), property("Code", "s"), property("PeerName", "s"),
            property("PeerId", "s"), property("Error", "s"), property("Port", "q"), property("SessionId", "s"),
        ])
    }

    /// "ble:AA:BB:CC:DD:EE:FF/PSM", the PSM in decimal or 0x-prefixed hex, within the dynamic range.
    static func splitBluetoothTarget(_ text: String) -> (BluetoothAddress, UInt16)? {
        guard text.hasPrefix("ble:"), let slash = text.lastIndex(of: "/") else { return nil }
        let addressText = text[text.index(text.startIndex, offsetBy: 4)..<slash]
        let psmText = text[text.index(after: slash)...]
        let psm = psmText.lowercased().hasPrefix("0x") ? UInt16(psmText.dropFirst(2), radix: 16) : UInt16(psmText)
        guard let psm, L2CAPSocketAddress.dynamicPSMs.contains(psm), let address = try? BluetoothAddress(String(addressText)) else { return nil }
        return (address, psm)
    }

    static func splitEndpoint(_ text: String) -> (String, UInt16)? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]), port > 0 else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }
}
