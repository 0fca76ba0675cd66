// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonTransport
import Synchronization

/// The authenticated transfer between ring members (protocol §6, §8, §9): a TLS listener whose
/// pins are the ring members, serving Hello, FetchActivity and FetchActivityOfVersions,
/// ActivityContinued, FetchDocument's stream and RingSync from what it asks the activities
/// (`TransferActivities`, below); the client side (TransferService+Client.swift) fetches
/// activities, pulls their documents, reports continuations and sends RingSync; Bluetooth LE
/// (listener and connect) is in TransferService+Bluetooth.swift.
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
    /// FetchActivity answers remembered for ActivityContinued (each until its first report) and for
    /// FetchDocument naming a payload's revision (§6.5).
    static let servedLimit = 64

    struct Served {
        var peer: DeviceID
        var reference: ActivityReference
        var activity: ActivityID
        /// The digest of the snapshot attached when the payload was sent (nil: none): the only one
        /// a FetchDocument naming the payload's revision is served (§6.5).
        var snapshot: [UInt8]?
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
    var bluetoothListener: L2CAPListener?
    var bluetoothAcceptTask: Task<Void, Never>?
    nonisolated let requestIDs = RequestIDSource()
    /// The clipboard whose copy FetchClipboardOffer and FetchClipboardData are answered from (§6.7).
    public nonisolated let clipboardSource = ClipboardSourceSlot()
    let log: @Sendable (String) -> Void
    private var dispatcher: FrameDispatcher?
    private var acceptTask: Task<Void, Never>?
    private var open: [DeviceID: [ObjectIdentifier: SecureChannel]] = [:]
    /// RingSyncs being answered, per peer (their reply must go out even when the merge removed the peer).
    private var ringSyncsAnswering: [DeviceID: Int] = [:]
    /// Answered fetches (TransferService+Documents.swift: `remember`).
    var served: [Served] = []
    /// The ring as last published (pins, names, roster version for Hello).
    var snapshot: RingSnapshot
    /// Channels accepted since the start (TCP and L2CAP): one per TLS handshake that passed.
    private(set) var acceptedChannels = 0
    /// ActivityPayload frames built as answers since the start (tests: a refused version sends none).
    private(set) var activityPayloadsSent = 0
    /// FetchActivityOfVersions answered versionUnsupported since the start (tests and diagnostics).
    private(set) var versionsRefused = 0
    /// Batches of document and clipboard file streams begun since the start, each after its
    /// membership check (`mayStreamBatch`; tests: none begins after a removal).
    private(set) var streamBatchesBegun = 0

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
        dispatcher = FrameDispatcher(streamedTypes: [.fetchDocument, .fetchClipboardOffer, .fetchClipboardData, .fetchClipboardFile], streamer: { [weak self] request, channel in
            guard let self else { throw ErrorFrame(code: .internalError, message: "stopping") }
            if request.type == .fetchDocument {
                try await self.streamDocument(request, on: channel)
            } else {
                try await self.streamClipboard(request, on: channel)
            }
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
            // Aborted: what their connections still queue (a document stream's last MiB) is dropped, not sent (§6.5).
            for channel in channels.values { channel.abort() }
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

    func serve(_ channel: SecureChannel) async {
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
        // The saved ring decides too: a removal (or a new identity here) is in the ring's view as soon
        // as it is saved, while `snapshot` waits until the radio took the re-key (§6.2: a removed
        // device gets Hello and RingSync only).
        guard request.type == .hello || request.type == .ringSync || isMemberNow(peer) else {
            throw ErrorFrame(code: .notPermitted, message: "not a ring member")
        }
        do {
            switch request.type {
            case .hello:
                let hello = try HelloMessage(payload: request.payload)
                guard hello.deviceID == peer else { throw ErrorFrame(code: .malformed, message: "Hello names another device") }
                // The member is here: a RingSync it missed (a re-key while it was away) goes out now.
                if ring.view.current.pendingSyncs[peer] != nil { Task { await ring.sighted(peer, byHello: true) } }
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
        // The member may have been removed while the app saved: nothing is served after that is saved.
        guard isMemberNow(peer) else { throw ErrorFrame(code: .notPermitted, message: "not a ring member") }
        // The app may set another Version in its WillSave answer.
        if let versions, !versions.accepts(fresh.version) { throw refuseVersion() }
        var record = fresh
        record.revision = publication.revision
        let answered = ActivityReference(typeHash: reference.typeHash, revision: publication.revision)
        let snapshot = await activities.documentForTransfer(uid: publication.uid)?.info.digest
        remember(Served(peer: peer, reference: answered, activity: id, snapshot: snapshot))
        let reply = Frame(type: .activityPayload, requestID: requestID, payload: try record.encoded())
        activityPayloadsSent += 1
        return reply
    }

    /// The message is for logs: it names no version (payload data, §6.3).
    private func refuseVersion() -> ErrorFrame {
        versionsRefused += 1
        return ErrorFrame(code: .versionUnsupported, message: "the activity's version is not one asked for")
    }

    /// Before each batch of a document or clipboard file stream (§6.5): whether `peer` is still a
    /// member; the batches it lets through are counted.
    func mayStreamBatch(to peer: DeviceID) -> Bool {
        guard isMemberNow(peer) else { return false }
        streamBatchesBegun += 1
        return true
    }

    /// Whether `peer` is a member of the ring as last saved, this machine still the identity the
    /// transfer proves (RingView: read without entering RingService).
    func isMemberNow(_ peer: DeviceID) -> Bool { ring.view.isMember(peer, asIdentity: snapshot.deviceID) }

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

/// What the transfer needs from the activities: the record a FetchActivity returns and the
/// WasContinued notice, documents and edit sessions. `Activities` conforms; the transfer knows
/// no more of it. No requirement has a default (fakes: Tests/Support/BatonServiceFakes).
public protocol TransferActivities: Sendable {
    /// The user's current activity as it leaves the machine (WillSave first when asked for);
    /// nil when there is none. The id comes back in `notifyWasContinued`.
    func recordForTransfer(uid: UInt32) async -> (ActivityID, ActivityRecord)?
    func notifyWasContinued(_ id: ActivityID, device: String) async
    /// The snapshot attached to the user's published activity, if any (§6.5).
    func documentForTransfer(uid: UInt32) async -> AttachedDocument?
    /// The id of the user's current activity (no WillSave), nil when none.
    func currentActivityForTransfer(uid: UInt32) async -> ActivityID?
    /// Edit sessions (§6.6), when documents are enabled.
    func editSessionsForTransfer() async -> EditSessions?
    /// Asks the app of `uid`'s current activity to save (WillSave) and returns the digest of its
    /// document `documentID` as committed, or nil when it is not saved (edited since, not attached).
    func savedDocument(documentID: String, uid: UInt32) async -> [UInt8]?
}

/// The identity keys of the current ring members (not this device, not removed), read by the TLS
/// listener and connector at every handshake (protocol §8.1).
final class PinBox: Sendable {
    private let pins = Mutex(PinSet.empty)
    var current: PinSet { pins.withLock { $0 } }
    func set(_ keys: [[UInt8]]) { pins.withLock { $0 = PinSet(keys) } }
}
