import BatonCore
import BatonCrypto
import BatonTransport
import Synchronization

/// The identity keys of the current ring members (not this device, not removed), read by the TLS
/// listener and connector at every handshake (protocol §8.1).
final class PinBox: Sendable {
    private let pins = Mutex(PinSet.empty)
    var current: PinSet { pins.withLock { $0 } }
    func set(_ keys: [[UInt8]]) { pins.withLock { $0 = PinSet(keys) } }
}

/// Why a request to another ring member failed.
public enum TransferError: Error, Sendable, Equatable {
    /// The device is not (or no longer) a ring member.
    case notAMember
    /// No endpoint is known for the member.
    case noEndpoints
    /// No endpoint answered as that member, or every connection broke; the last cause.
    case unreachable(String)
    /// The member answered with an Error frame.
    case remote(ErrorFrame)
    /// The member's answer broke the protocol.
    case protocolError(String)
}

/// The authenticated transfer between ring members (protocol §6, §8, §9): a TLS listener whose
/// pins are the ring members, serving Hello, FetchActivity, ActivityContinued and RingSync; and
/// the client side that fetches activities, reports continuations and sends RingSync.
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
    /// FetchActivity answers remembered for ActivityContinued.
    static let servedLimit = 64

    struct Served {
        var peer: DeviceID
        var reference: ActivityReference
        var activity: ActivityID
    }

    public nonisolated let configuration: Configuration
    public nonisolated let port: UInt16
    nonisolated let ring: RingService
    nonisolated let activities: ActivityService
    nonisolated let pins: PinBox
    private nonisolated let listener: TLSListener
    private nonisolated let connector: TLSConnector
    private nonisolated let secureL2CAP: SecureL2CAP
    private var bluetoothListener: L2CAPListener?
    private var bluetoothAcceptTask: Task<Void, Never>?
    private nonisolated let requestIDs = RequestIDSource()
    private let log: @Sendable (String) -> Void
    private var dispatcher: FrameDispatcher?
    private var acceptTask: Task<Void, Never>?
    private var open: [DeviceID: [ObjectIdentifier: SecureChannel]] = [:]
    private var served: [Served] = []

    /// Starts listening and attaches itself to `ring` (pins, syncs, the Continue method).
    public static func start(ring: RingService, activities: ActivityService, configuration: Configuration,
                             log: @escaping @Sendable (String) -> Void) async throws -> TransferService {
        let identity = await ring.keeper.identity
        let pins = PinBox()
        let listener = try TLSListener(identity: identity, pins: { pins.current }, host: configuration.listenHost, port: configuration.port,
                                       onHandshakeFailure: { error in log("batond: transfer handshake refused: \(Self.describe(error))") })
        let connector = try TLSConnector(identity: identity, pins: { pins.current })
        let secureL2CAP = try SecureL2CAP(identity: identity, pins: { pins.current })
        let service = TransferService(ring: ring, activities: activities, configuration: configuration, pins: pins,
                                      listener: listener, connector: connector, secureL2CAP: secureL2CAP, log: log)
        await service.run()
        if configuration.bluetooth { await service.listenOnBluetooth() }
        await ring.attach(service)
        return service
    }

    private init(ring: RingService, activities: ActivityService, configuration: Configuration, pins: PinBox,
                 listener: TLSListener, connector: TLSConnector, secureL2CAP: SecureL2CAP, log: @escaping @Sendable (String) -> Void) {
        self.secureL2CAP = secureL2CAP
        self.ring = ring
        self.activities = activities
        self.configuration = configuration
        self.pins = pins
        self.listener = listener
        self.connector = connector
        self.port = listener.port
        self.log = log
    }

    private func run() {
        dispatcher = FrameDispatcher { [weak self] request, peer in
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
        guard let (address, type) = await ring.bluetoothAdapter() else { return }
        let listener: L2CAPListener
        do {
            listener = try L2CAPListener(adapterAddress: address, addressType: type, psm: RingService.transferPSM)
        } catch {
            log("batond: no L2CAP transfer listener: \(Self.describe(error))")
            return
        }
        bluetoothListener = listener
        log("batond: transfers also on \(RingService.bluetoothTransferEndpoint(address, type))")
        // Unauthenticated peers may hold at most this many channels at once (as the TCP listener's limit).
        let budget = ChannelBudget(limit: secureL2CAP.configuration.maxConnections)
        bluetoothAcceptTask = Task { [weak self, listener, secureL2CAP, log] in
            while !Task.isCancelled {
                let raw: L2CAPFrameChannel
                do { raw = try await listener.accept(timeout: .seconds(3600)) } catch TransportError.timedOut { continue } catch { return }
                guard budget.take() else {
                    raw.close()
                    continue
                }
                Task {
                    defer { budget.give() }
                    do throws(TransportError) {
                        let channel = try await secureL2CAP.accept(raw)
                        log("batond: transfer channel over L2CAP from \(raw.peer)")
                        await self?.serve(channel)
                    } catch {
                        log("batond: transfer handshake over L2CAP refused: \(Self.describe(error))")
                    }
                }
            }
        }
        let reachableOverIP = localEndpoints.contains { endpoint in
            guard let (host, _) = RingService.splitEndpoint(endpoint) else { return false }
            return !(host.hasPrefix("127.") || host == "::1")
        }
        if !reachableOverIP { await ring.setRingAdvertConnectable(true) }
    }

    /// Stops listening and closes every open channel.
    public func stop() async {
        acceptTask?.cancel()
        listener.close()
        bluetoothAcceptTask?.cancel()
        bluetoothListener?.close()
        await ring.setRingAdvertConnectable(false)
        for channel in open.values.flatMap(\.values) { channel.close() }
        open = [:]
        await ring.detach(self)
    }

    /// "host:port" strings under which members can reach this listener (announced at pairing).
    public nonisolated var localEndpoints: [String] {
        LocalAddresses.endpoints(listenHost: configuration.listenHost, port: port)
    }

    // MARK: Ring changes

    /// The ring changed: new pins, channels of departed members closed, RingSync to `syncTo`.
    func ringChanged(memberKeys: [DeviceID: [UInt8]], syncTo: [DeviceID]) {
        pins.set(Array(memberKeys.values))
        for (peer, channels) in open where memberKeys[peer] == nil {
            for channel in channels.values { channel.close() }
            open[peer] = nil
            dispatcher?.forget(peer: peer)
            log("batond: closed the channels of \(peer.shortForm), no longer in the ring")
        }
        for member in syncTo {
            Task {
                do { try await self.syncRing(to: member) } catch {
                    // It learns at its next contact with any member (Hello).
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
        open[peer, default: [:]][key] = channel
        _ = await dispatcher.serve(channel)
        open[peer]?[key] = nil
        if open[peer]?.isEmpty == true { open[peer] = nil }
    }

    /// Channels open from `peer` (for tests and diagnostics).
    func openChannelCount(from peer: DeviceID) -> Int { open[peer]?.count ?? 0 }

    private func handle(_ request: Frame, from peer: DeviceID) async throws -> Frame {
        guard await ring.isMember(peer) else { throw ErrorFrame(code: .notPermitted, message: "not a ring member") }
        do {
            switch request.type {
            case .hello:
                let hello = try HelloMessage(payload: request.payload)
                guard hello.deviceID == peer else { throw ErrorFrame(code: .malformed, message: "Hello names another device") }
                return Frame(type: .hello, requestID: request.requestID, payload: await ownHello().payload)
            case .fetchActivity:
                return try await fetchRequested(ActivityReference(payload: request.payload), by: peer, requestID: request.requestID)
            case .activityContinued:
                let reference = try ActivityReference(payload: request.payload)
                guard let entry = served.last(where: { $0.peer == peer && $0.reference == reference }) else {
                    throw ErrorFrame(code: .unknownActivity, message: "no such transfer")
                }
                await activities.notifyWasContinued(entry.activity, device: await ring.memberName(peer))
                return Frame(type: .ack, requestID: request.requestID, payload: [])
            case .ringSync:
                let roster = try Roster(decoding: request.payload)
                let merged = await ring.receivedRoster(roster, from: peer)
                return Frame(type: .ringSync, requestID: request.requestID, payload: try merged.encoded())
            default:
                throw ErrorFrame(code: .malformed, message: "not a request")
            }
        } catch let error as WireError {
            throw ErrorFrame(error)
        }
    }

    private func fetchRequested(_ reference: ActivityReference, by peer: DeviceID, requestID: UInt32) async throws -> Frame {
        guard let publication = await ring.currentPublication(), publication.typeHash == reference.typeHash,
              reference.revision == ActivityReference.anyRevision || reference.revision == publication.revision else {
            throw ErrorFrame(code: .unknownActivity, message: "no such current activity")
        }
        // WillSave runs here when the app asked for it; a failing source leaves the last saved state.
        guard let (id, fresh) = await activities.recordForTransfer(uid: publication.uid),
              fresh.activityType == publication.record.activityType else {
            throw ErrorFrame(code: .unknownActivity, message: "the activity ended")
        }
        var record = fresh
        record.revision = publication.revision
        let answered = ActivityReference(typeHash: reference.typeHash, revision: publication.revision)
        served.append(Served(peer: peer, reference: answered, activity: id))
        if served.count > Self.servedLimit { served.removeFirst(served.count - Self.servedLimit) }
        return Frame(type: .activityPayload, requestID: requestID, payload: try record.encoded())
    }

    private func ownHello() async -> HelloMessage {
        HelloMessage(deviceID: await ring.deviceID, rosterVersion: await ring.rosterVersion, maxFramePayload: Self.maxFramePayload)
    }

    // MARK: Client

    /// The current activity of `member` with this type hash (computed with the member's secret) and
    /// advert revision (`ActivityReference.anyRevision` for whatever is current).
    public func fetch(member: DeviceID, typeHash: TypeHash, revision: UInt32) async throws(TransferError) -> ActivityRecord {
        let request = Frame(type: .fetchActivity, requestID: requestIDs.make(),
                            payload: ActivityReference(typeHash: typeHash, revision: revision).payload)
        guard let reply = try await perform(request, member: member, forceSync: false) else { throw .protocolError("no reply") }
        guard reply.type == .activityPayload else { throw .protocolError("unexpected \(reply.type)") }
        do { return try ActivityRecord(decoding: reply.payload) } catch { throw .protocolError("payload: \(error)") }
    }

    /// Tells `member` its activity was continued here. Pass `requestID` to repeat an earlier report.
    public func sendContinued(member: DeviceID, typeHash: TypeHash, revision: UInt32, requestID: UInt32? = nil) async throws(TransferError) {
        let request = Frame(type: .activityContinued, requestID: requestID ?? requestIDs.make(),
                            payload: ActivityReference(typeHash: typeHash, revision: revision).payload)
        guard let reply = try await perform(request, member: member, forceSync: false), reply.type == .ack else {
            throw .protocolError("no Ack")
        }
    }

    /// Exchanges rosters with `member` (after pairing, after a removal).
    public func syncRing(to member: DeviceID) async throws(TransferError) {
        _ = try await perform(nil, member: member, forceSync: true)
    }

    /// A fresh request id (tests repeat one to check the exactly-once rule).
    public nonisolated func makeRequestID() -> UInt32 { requestIDs.make() }

    /// Connects to the member's endpoints in order (newest first), says Hello, syncs rosters when the
    /// versions differ (or `forceSync`), then sends `request`. A connection that breaks after it was
    /// established is retried on a new one with the same request id (§6.2).
    private func perform(_ request: Frame?, member: DeviceID, forceSync: Bool) async throws(TransferError) -> Frame? {
        guard await ring.isMember(member) else { throw .notAMember }
        var lastError = TransferError.noEndpoints
        for _ in 0..<configuration.maxAttempts {
            let endpoints = await ring.endpoints(of: member)
            guard !endpoints.isEmpty else { throw .noEndpoints }
            var broken = false
            // A broken connection moves on to the next endpoint with the same request; another round
            // follows only when one broke (the member was there, so trying again may succeed).
            for endpoint in endpoints {
                let channel: SecureChannel
                do {
                    if let (address, type, psm) = RingService.splitBluetoothEndpoint(endpoint) {
                        guard configuration.bluetooth else { continue }
                        channel = try await connectOverBluetooth(address: address, type: type, psm: psm)
                    } else {
                        guard let (host, port) = RingService.splitEndpoint(endpoint) else { continue }
                        channel = try await connector.connect(host: host, port: port, timeout: configuration.connectTimeout)
                    }
                } catch {
                    lastError = .unreachable(Self.describe(error))
                    continue
                }
                defer { channel.close() }
                guard channel.peerDeviceID == member else {
                    lastError = .unreachable("another ring member answers at that endpoint")
                    continue
                }
                do {
                    let reply = try await converse(FrameExchange(channel: channel), member: member, request: request, forceSync: forceSync)
                    await ring.endpointWorked(member, endpoint)
                    return reply
                } catch .remote(let error) {
                    throw .remote(error)
                } catch .invalidFrame(let error) {
                    throw .protocolError("\(error)")
                } catch {
                    lastError = .unreachable(Self.describe(error))
                    broken = true
                }
            }
            if !broken { break }
        }
        throw lastError
    }

    private func connectOverBluetooth(address: BluetoothAddress, type: LEAddressType, psm: UInt16) async throws(TransportError) -> SecureChannel {
        guard let (own, ownType) = await ring.bluetoothAdapter() else { throw .addressUnavailable("no Bluetooth adapter is ready") }
        await ring.pauseScanningForConnect()
        let result: Result<SecureChannel, TransportError>
        do {
            result = .success(try await secureL2CAP.connect(adapterAddress: own, adapterAddressType: ownType, peerAddress: address,
                                                           peerAddressType: type, psm: psm, timeout: configuration.bluetoothConnectTimeout))
        } catch {
            result = .failure(error)
        }
        await ring.resumeScanningAfterConnect()
        return try result.get()
    }

    private func converse(_ exchange: FrameExchange, member: DeviceID, request: Frame?, forceSync: Bool) async throws(TransportError) -> Frame? {
        let ours = await ownHello()
        let reply = try await exchange.request(Frame(type: .hello, requestID: requestIDs.make(), payload: ours.payload),
                                               timeout: configuration.requestTimeout)
        guard reply.type == .hello, let theirs = try? HelloMessage(payload: reply.payload), theirs.deviceID == member else {
            throw .invalidFrame(.unexpectedMessage("Hello"))
        }
        if forceSync || theirs.rosterVersion != ours.rosterVersion {
            // A second round when merging their answer changed ours again (a removal new to us made us
            // rotate our secret): they must learn the new secret too.
            for _ in 0..<2 {
                let roster: [UInt8]
                do { roster = try await ring.rosterForSync().encoded() } catch { throw .unencodableFrame(error) }
                let answer = try await exchange.request(Frame(type: .ringSync, requestID: requestIDs.make(), payload: roster),
                                                        timeout: configuration.requestTimeout)
                guard answer.type == .ringSync, let merged = try? Roster(decoding: answer.payload) else {
                    throw .invalidFrame(.unexpectedMessage("RingSync"))
                }
                if await ring.receivedRoster(merged, from: member).version == merged.version { break }
            }
        }
        guard let request else { return nil }
        return try await exchange.request(request, timeout: configuration.requestTimeout)
    }

    /// A refusal's cause without key bytes, for logs.
    nonisolated static func describe(_ error: TransportError) -> String {
        switch error {
        case .peerNotPinned: "peer not pinned"
        case .remote(let frame): "remote error \(frame.code)"
        default: "\(error)"
        }
    }
}

/// Counts the L2CAP transfer channels open at once, bounded by `limit`.
final class ChannelBudget: Sendable {
    private let inUse = Mutex(0)
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Takes one slot; false when all are in use.
    func take() -> Bool {
        inUse.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    func give() { inUse.withLock { $0 = max(0, $0 - 1) } }
}
