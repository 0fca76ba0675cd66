// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonTransport

/// The authenticated transfer between ring members (protocol §6, §8, §9): a TLS listener whose
/// pins are the ring members, serving Hello, FetchActivity and FetchActivityOfVersions,
/// ActivityContinued and RingSync; and the client side that fetches activities, reports
/// continuations and sends RingSync.
public actor TransferService {
    public struct Configuration: Sendable {
        /// Numeric address of the TLS listener.
        public var listenHost: String
        /// 0 picks a free port.
        public var port: UInt16
        /// Per endpoint: TCP connect and TLS handshake together.
        public var connectTimeout: Duration
        /// Per request; covers the source app's WillSave.
        public var requestTimeout: Duration
        /// Connections tried for one request when they break mid-way (the request id stays the same).
        public var maxAttempts: Int
        /// Also listen on L2CAP (PSM 0xBA on the adapter's address) and dial "ble:" hints (§8.3).
        public var bluetooth: Bool
        /// Per "ble:" hint: LE connection, L2CAP channel and TLS handshake together.
        public var bluetoothConnectTimeout: Duration

        public init(listenHost: String = "0.0.0.0", port: UInt16 = 0, connectTimeout: Duration = .seconds(3),
                    requestTimeout: Duration = .seconds(15), maxAttempts: Int = 2, bluetooth: Bool = true,
                    bluetoothConnectTimeout: Duration = .seconds(15)) {
            self.bluetooth = bluetooth
            self.bluetoothConnectTimeout = bluetoothConnectTimeout
            self.listenHost = listenHost
            self.port = port
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.maxAttempts = max(1, maxAttempts)
        }
    }

    /// The largest frame payload we accept (RingSync's limit), announced in Hello.
    static let maxFramePayload = UInt32(FrameType.ringSync.maxPayload)
    /// Authenticated channels kept at once (over TCP and over L2CAP, each), apart from the handshake limit.
    static let maxMemberChannels = 32
    /// FetchActivity answers remembered for ActivityContinued (each until its first report).
    static let servedLimit = 64

    struct Served {
        var peer: DeviceID
        var reference: ActivityReference
        var activity: ActivityID
    }

    public nonisolated let configuration: Configuration
    public nonisolated let port: UInt16
    nonisolated let ring: RingService
    /// The ring's radio: what is on the air (FetchActivity), the adapter (L2CAP).
    nonisolated var radio: RadioService { ring.radio }
    nonisolated let activities: any TransferActivities
    nonisolated let pins: PinBox
    private nonisolated let listener: TLSListener
    nonisolated let connector: TLSConnector
    nonisolated let secureL2CAP: SecureL2CAP
    private var bluetoothListener: L2CAPListener?
    private var bluetoothAcceptTask: Task<Void, Never>?
    nonisolated let requestIDs = RequestIDSource()
    let log: @Sendable (String) -> Void
    private var dispatcher: FrameDispatcher?
    private var acceptTask: Task<Void, Never>?
    private var open: [DeviceID: [ObjectIdentifier: SecureChannel]] = [:]
    /// RingSyncs being answered, per peer (their reply must go out even when the merge removed the peer).
    private var ringSyncsAnswering: [DeviceID: Int] = [:]
    private var served: [Served] = []
    /// The ring as last published (pins, names, roster version for Hello).
    var snapshot: RingSnapshot
    /// Channels accepted since the start (TCP and L2CAP): one per TLS handshake that passed.
    private(set) var acceptedChannels = 0
    /// ActivityPayload frames built as answers since the start (tests: a refused version sends none).
    private(set) var activityPayloadsSent = 0
    /// FetchActivityOfVersions answered versionUnsupported since the start (tests and diagnostics).
    private(set) var versionsRefused = 0

    /// Starts listening and attaches itself to `ring` (pins, syncs, the Continue method).
    public static func start(ring: RingService, activities: any TransferActivities, configuration: Configuration,
                             log: @escaping @Sendable (String) -> Void) async throws -> TransferService {
        let snapshot = await ring.snapshot()
        let identity = snapshot.identity
        let pins = PinBox()
        let listener = try TLSListener(identity: identity, pins: { pins.current }, host: configuration.listenHost, port: configuration.port,
                                       maxMemberConnections: maxMemberChannels, onHandshakeFailure: { error in log("batond: transfer handshake refused: \(Self.describe(error))") })
        let connector = try TLSConnector(identity: identity, pins: { pins.current })
        let secureL2CAP = try SecureL2CAP(identity: identity, pins: { pins.current })
        let service = TransferService(ring: ring, activities: activities, configuration: configuration, pins: pins, snapshot: snapshot,
                                      listener: listener, connector: connector, secureL2CAP: secureL2CAP, log: log)
        await service.run()
        if configuration.bluetooth { await service.listenOnBluetooth() }
        await ring.observe(Self.observerKey) { [weak service] change in await service?.ringChanged(change) }
        await ring.setTransferReachability(port: service.port, localEndpoints: service.localEndpoints)
        return service
    }

    static let observerKey = "transfer"

    private init(ring: RingService, activities: any TransferActivities, configuration: Configuration, pins: PinBox, snapshot: RingSnapshot,
                 listener: TLSListener, connector: TLSConnector, secureL2CAP: SecureL2CAP, log: @escaping @Sendable (String) -> Void) {
        self.secureL2CAP = secureL2CAP
        self.ring = ring
        self.activities = activities
        self.configuration = configuration
        self.pins = pins
        self.snapshot = snapshot
        self.listener = listener
        self.connector = connector
        self.port = listener.port
        self.log = log
    }

    private func run() {
        dispatcher = FrameDispatcher(streamedTypes: [.fetchDocument], streamer: { [weak self] request, channel in
            guard let self else { throw ErrorFrame(code: .internalError, message: "stopping") }
            try await self.streamDocument(request, on: channel)
        }) { [weak self] request, peer in
            guard let self else { throw ErrorFrame(code: .internalError, message: "stopping") }
            return try await self.handle(request, from: peer)
        }
        acceptTask = Task { [weak self, listener] in
            while !Task.isCancelled {
                guard let channel = try? await listener.accept() else { return }
                Task { await self?.serve(channel) }
            }
        }
    }

    /// The L2CAP listener of the BLE fallback (§8.3), when an adapter is ready and the PSM is free.
    /// Without an IP endpoint for other machines (a loopback or no listener) the ring advert turns
    /// connectable, since a peer can only connect to an advertising device; that advert then carries
    /// the adapter's own address instead of a throw-away one, which is the price of being reachable.
    private func listenOnBluetooth() async {
        guard let (address, type) = await radio.bluetoothAdapter() else { return }
        let listener: L2CAPListener
        do {
            listener = try L2CAPListener(adapterAddress: address, addressType: type, psm: RingService.transferPSM)
        } catch {
            log("batond: no L2CAP transfer listener: \(Self.describe(error))")
            return
        }
        bluetoothListener = listener
        log("batond: transfers also on \(RingService.bluetoothTransferEndpoint(address, type))")
        // As the TCP listener (§8.1, §8.3): at most this many channels in the handshake, and members'
        // channels on a budget of their own, so strangers holding channels cannot lock members out.
        let handshakes = ChannelBudget(limit: secureL2CAP.configuration.maxConnections)
        let members = ChannelBudget(limit: Self.maxMemberChannels)
        bluetoothAcceptTask = Task { [weak self, listener, secureL2CAP, log] in
            while !Task.isCancelled {
                let raw: L2CAPFrameChannel
                do { raw = try await listener.accept(timeout: .seconds(3600)) } catch TransportError.timedOut { continue } catch { return }
                guard handshakes.take() else {
                    raw.close()
                    continue
                }
                Task {
                    let channel: SecureChannel
                    do throws(TransportError) {
                        channel = try await secureL2CAP.accept(raw)
                        handshakes.give()
                    } catch {
                        handshakes.give()
                        log("batond: transfer handshake over L2CAP refused: \(Self.describe(error))")
                        return
                    }
                    guard members.take() else {
                        channel.close()
                        return
                    }
                    defer { members.give() }
                    log("batond: transfer channel over L2CAP from \(raw.peer)")
                    await self?.serve(channel)
                }
            }
        }
        let reachableOverIP = localEndpoints.contains { endpoint in
            guard let (host, _) = RingService.splitEndpoint(endpoint) else { return false }
            return !(host.hasPrefix("127.") || host == "::1")
        }
        if !reachableOverIP { await radio.setRingAdvertConnectable(true) }
    }

    /// Stops listening and closes every open channel.
    public func stop() async {
        acceptTask?.cancel()
        listener.close()
        bluetoothAcceptTask?.cancel()
        bluetoothListener?.close()
        await radio.setRingAdvertConnectable(false)
        for channel in open.values.flatMap(\.values) { channel.close() }
        open = [:]
        await ring.stopObserving(Self.observerKey)
        await ring.setTransferReachability(port: nil, localEndpoints: [])
    }

    /// "host:port" strings under which members can reach this listener (announced at pairing).
    public nonisolated var localEndpoints: [String] {
        LocalAddresses.endpoints(listenHost: configuration.listenHost, port: port)
    }

    // MARK: Ring changes

    /// The ring changed: new pins, channels of departed members closed, RingSync to `syncTo`.
    func ringChanged(_ change: RingChange) {
        if change.snapshot.deviceID != snapshot.deviceID {
            // This machine took a new identity (`bt-pair reset-identity`): from the next connection
            // on, TCP and L2CAP, both sides prove it; no restart needed. Channels of the old ring
            // close below (no member is left), and what was served to them is forgotten.
            listener.use(identity: change.snapshot.identity)
            connector.use(identity: change.snapshot.identity)
            secureL2CAP.use(identity: change.snapshot.identity)
            log("batond: the transfer now proves the new identity \(change.snapshot.deviceID.shortForm)")
        }
        let memberKeys = change.snapshot.memberKeys
        // Members that left (removed, or all of them after a new identity here): their remembered
        // replies and served answers go, also when no channel of theirs is open now.
        for peer in snapshot.memberKeys.keys where memberKeys[peer] == nil { dispatcher?.forget(peer: peer) }
        snapshot = change.snapshot
        served.removeAll { memberKeys[$0.peer] == nil }
        let syncTo = change.syncTo
        // Removed devices stay pinned for Hello and RingSync only (handle): their marks must reach
        // this device, and they learn they were removed (§6.2 "Ring sync", §7.3).
        pins.set(Array(memberKeys.values) + Array(change.snapshot.removedKeys.values))
        for (peer, channels) in open where memberKeys[peer] == nil {
            // A RingSync of this peer is being answered and its merge removed the peer (this device
            // started over, §7.4): the reply, the removal notice of §6.2, must still reach it, so
            // its channels close right after their next reply instead of now.
            if ringSyncsAnswering[peer, default: 0] > 0 {
                dispatcher?.endAfterReply(Array(channels.values))
                log("batond: the channels of \(peer.shortForm), no longer in the ring, close after the RingSync reply")
                continue
            }
            for channel in channels.values { channel.close() }
            open[peer] = nil
            dispatcher?.forget(peer: peer)
            log("batond: closed the channels of \(peer.shortForm), no longer in the ring")
        }
        for member in syncTo {
            Task {
                do { try await self.syncRing(to: member) } catch {
                    // Still pending (durable): retried at the member's next sighting or Hello.
                    self.log("batond: RingSync to \(member.shortForm) failed: \(error)")
                }
            }
        }
    }

    // MARK: Server

    private func serve(_ channel: SecureChannel) async {
        guard let dispatcher else { channel.close(); return }
        let peer = channel.peerDeviceID
        let key = ObjectIdentifier(channel)
        guard pins.current.contains(channel.peerIdentityKey) else { channel.close(); return }
        acceptedChannels += 1
        open[peer, default: [:]][key] = channel
        _ = await dispatcher.serve(channel)
        open[peer]?[key] = nil
        if open[peer]?.isEmpty == true { open[peer] = nil }
    }

    /// Channels open from `peer` (for tests and diagnostics).
    func openChannelCount(from peer: DeviceID) -> Int { open[peer]?.count ?? 0 }

    private func handle(_ request: Frame, from peer: DeviceID) async throws -> Frame {
        guard snapshot.isMember(peer) || (snapshot.wasMember(peer) && (request.type == .hello || request.type == .ringSync)) else {
            throw ErrorFrame(code: .notPermitted, message: "not a ring member")
        }
        do {
            switch request.type {
            case .hello:
                let hello = try HelloMessage(payload: request.payload)
                guard hello.deviceID == peer else { throw ErrorFrame(code: .malformed, message: "Hello names another device") }
                // The member is here: a RingSync it missed (a re-key while it was away) goes out now.
                Task { await ring.sighted(peer, byHello: true) }
                return Frame(type: .hello, requestID: request.requestID, payload: ownHello().payload)
            case .fetchActivity:
                return try await fetchRequested(ActivityReference(payload: request.payload), by: peer, requestID: request.requestID)
            case .fetchActivityOfVersions:
                let asked = try FetchActivityOfVersions(payload: request.payload)
                return try await fetchRequested(asked.activity, versions: asked, by: peer, requestID: request.requestID)
            case .activityContinued:
                // Each answered fetch entitles its peer to one report (§9): the entry is used up here,
                // and a repeat of this request id is answered from the dispatcher's reply cache.
                let reference = try ActivityReference(payload: request.payload)
                guard reference.revision != ActivityReference.anyRevision,
                      let index = served.lastIndex(where: { $0.peer == peer && $0.reference == reference }) else {
                    throw ErrorFrame(code: .unknownActivity, message: "no such transfer")
                }
                let entry = served.remove(at: index)
                await activities.notifyWasContinued(entry.activity, device: snapshot.memberName(peer))
                return Frame(type: .ack, requestID: request.requestID, payload: [])
            case .claimEditSession:
                return await claimRequested(request, from: peer)
            case .ringSync:
                ringSyncsAnswering[peer, default: 0] += 1
                defer {
                    ringSyncsAnswering[peer, default: 1] -= 1
                    if ringSyncsAnswering[peer] == 0 { ringSyncsAnswering[peer] = nil }
                }
                do {
                    let roster = try Roster(decoding: request.payload)
                    let reply = try await ring.receivedRoster(roster, from: peer)
                    return Frame(type: .ringSync, requestID: request.requestID, payload: try reply.encoded())
                } catch {
                    throw ErrorFrame(refusedRoster: error)
                }
            default:
                throw ErrorFrame(code: .malformed, message: "not a request")
            }
        } catch let error as WireError {
            throw ErrorFrame(error)
        }
    }

    /// FetchActivity, and FetchActivityOfVersions when `versions` is given (§6.2, §9 step 3): an
    /// activity of a version outside its ranges is refused before the app is asked to save (no
    /// WillSave), and again when the save changed the version; a refused fetch is not recorded
    /// for ActivityContinued and sends no payload.
    private func fetchRequested(_ reference: ActivityReference, versions: FetchActivityOfVersions? = nil, by peer: DeviceID,
                                requestID: UInt32) async throws -> Frame {
        guard let publication = await radio.currentPublication(), publication.typeHash == reference.typeHash,
              reference.revision == ActivityReference.anyRevision || reference.revision == publication.revision else {
            throw ErrorFrame(code: .unknownActivity, message: "no such current activity")
        }
        if let versions, !versions.accepts(publication.record.version) { throw refuseVersion() }
        // WillSave runs here when the app asked for it; a failing source leaves the last saved state.
        guard let (id, fresh) = await activities.recordForTransfer(uid: publication.uid),
              fresh.activityType == publication.record.activityType else {
            throw ErrorFrame(code: .unknownActivity, message: "the activity ended")
        }
        // The app may set another Version in its WillSave answer.
        if let versions, !versions.accepts(fresh.version) { throw refuseVersion() }
        var record = fresh
        record.revision = publication.revision
        let answered = ActivityReference(typeHash: reference.typeHash, revision: publication.revision)
        served.append(Served(peer: peer, reference: answered, activity: id))
        if served.count > Self.servedLimit { served.removeFirst(served.count - Self.servedLimit) }
        let reply = Frame(type: .activityPayload, requestID: requestID, payload: try record.encoded())
        activityPayloadsSent += 1
        return reply
    }

    /// The message is for logs: it names no version (payload data, §6.3).
    private func refuseVersion() -> ErrorFrame {
        versionsRefused += 1
        return ErrorFrame(code: .versionUnsupported, message: "the activity's version is not one asked for")
    }

    func ownHello() -> HelloMessage {
        HelloMessage(deviceID: snapshot.deviceID, rosterDigest: snapshot.rosterDigest, maxFramePayload: Self.maxFramePayload)
    }

    /// A refusal's cause without key bytes, for logs.
    nonisolated static func describe(_ error: TransportError) -> String {
        switch error {
        case .peerNotRecognised: "peer not recognised"
        case .remote(let frame): "remote error \(frame.code)"
        default: "\(error)"
        }
    }
}

