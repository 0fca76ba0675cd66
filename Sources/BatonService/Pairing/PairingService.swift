import BatonAPI
import BatonCore
import BatonCrypto
import BatonTransport

/// One pairing session as the outside sees it (PairingSession1's properties).
public struct PairingSessionState: Sendable, Equatable {
    public var role: String
    public var state: String
    public var code = ""
    public var peerName = ""
    public var peerID = ""
    public var error = ""
    public var port: UInt16 = 0
    public var sessionID: [UInt8]
}

struct PairingEntry {
    var path: String
    var ownerUID: UInt32
    var visible: PairingSessionState
    var driver: PairingDriver?
    var listener: PlainFrameListener?
    /// The L2CAP channel an acceptor also waits on (§8.3), when the radio has an adapter.
    var bluetoothListener: L2CAPListener?

    func closeListeners() {
        listener?.close()
        bluetoothListener?.close()
    }
}

/// Pairing sessions (protocol §7) driven over TCP or L2CAP: Accept waits for an initiator (its
/// pairing advert on the radio, its endpoint on DNS-SD), Pair connects to one; both end in the
/// ring (`RingService.joined`) or in a failure name.
public actor PairingService {
    typealias SessionObserver = @Sendable (_ path: String, _ before: PairingSessionState, _ after: PairingSessionState) -> Void

    let ring: RingService
    let discovery: DiscoveryService?
    let clock: any WallClock
    let log: @Sendable (String) -> Void
    var sessions: [String: PairingEntry] = [:]
    var nextSession = 0
    var sessionObserver: SessionObserver?
    var radio: RadioService { ring.radio }
    var listenHost: String { ring.configuration.listenHost }

    public init(ring: RingService, discovery: DiscoveryService?, clock: any WallClock, log: @escaping @Sendable (String) -> Void) {
        self.ring = ring
        self.discovery = discovery
        self.clock = clock
        self.log = log
    }

    func onSessionChange(_ observer: SessionObserver?) { sessionObserver = observer }

    /// Accept: listens on TCP (and L2CAP with a ready adapter), puts the pairing advert on the air
    /// and announces the endpoint over DNS-SD. Returns the session's path.
    func acceptPairing(uid: UInt32, host: String?) async throws(ServiceFailure) -> String {
        let listener: PlainFrameListener
        do { listener = try PlainFrameListener(host: host ?? listenHost, port: 0) } catch {
            throw .failed("cannot listen for pairing: \(error)")
        }
        let sessionID = SystemRandom().bytes(8)
        let bluetoothListener = await openPairingL2CAPListener()
        let path = await startSession(role: .responder, uid: uid, channel: nil, listener: listener, bluetoothListener: bluetoothListener,
                                      sessionID: sessionID)
        await discovery?.publishPairingEndpoint(path: path, sessionID: sessionID, port: listener.port, deviceName: await ring.snapshot().name)
        return path
    }

    /// Pair: connects to an acceptor at "HOST:PORT" or "ble:ADDRESS/PSM" with its session id.
    func pair(uid: UInt32, target: String, sessionID: [UInt8], addressType: LEAddressType?) async throws(ServiceFailure) -> String {
        let channel: any FrameChannel
        if let (address, psm) = RingService.splitBluetoothTarget(target) {
            channel = try await connectPairingL2CAP(peer: address, psm: psm, addressType: addressType)
        } else if let (host, port) = RingService.splitEndpoint(target), addressType == nil {
            do { channel = try await PlainFrameConnector.connect(host: host, port: port, timeout: .seconds(10)) } catch {
                throw .unknownDevice("cannot reach \(target): \(error)")
            }
        } else {
            throw .invalidArguments("target must be HOST:PORT or ble:ADDRESS/PSM")
        }
        return await startSession(role: .initiator, uid: uid, channel: channel, listener: nil, sessionID: sessionID)
    }

    func startSession(role: PairingSession.Role, uid: UInt32, channel: (any FrameChannel)?, listener: PlainFrameListener?,
                      bluetoothListener: L2CAPListener? = nil, sessionID: [UInt8]) async -> String {
        nextSession += 1
        let path = "\(BatonObjectPath.pairingSessionPrefix)/\(nextSession)"
        let visible = PairingSessionState(role: role == .initiator ? "initiator" : "responder",
                                          state: channel == nil ? "waiting" : "connected", port: listener?.port ?? 0, sessionID: sessionID)
        sessions[path] = PairingEntry(path: path, ownerUID: uid, visible: visible, listener: listener, bluetoothListener: bluetoothListener)
        if listener != nil {
            await radio.advertisePairing(sessionID: sessionID, name: await ring.snapshot().name, tcpPublished: await discovery?.isConnected ?? false,
                                         psm: bluetoothListener?.local.psm)
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
                await radio.pairingStoppedWaiting(sessionID: entry.visible.sessionID)
                return
            }
            entry.closeListeners()
            if let bluetooth = channel as? L2CAPFrameChannel { log("batond: pairing initiator connected over L2CAP from \(bluetooth.peer)") }
            update(path) { $0.state = "connected" }
            await radio.pairingStoppedWaiting(sessionID: entry.visible.sessionID)
        }
        guard let channel else { return }
        let session: PairingSession
        do {
            session = try PairingSession(role: role, sessionID: entry.visible.sessionID, ephemeralKey: X25519PrivateKey(),
                                         nonce: SystemRandom().bytes(16), local: await ring.pairingInfoWithEndpoints())
        } catch {
            finishSession(path, error: "protocol")
            return
        }
        let driver = PairingDriver(session: session, channel: channel, clock: clock) { [weak self] code in
            await self?.codeShown(path, code)
        }
        sessions[path]?.driver = driver
        switch await driver.run() {
        case .success(let pairing):
            let id = pairing.peer.deviceID
            await ring.joined(pairing, observedHost: (channel as? PlainFrameChannel)?.peerDescription,
                              bluetoothPeer: (channel as? L2CAPFrameChannel)?.peer)
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

    private func update(_ path: String, _ change: (inout PairingSessionState) -> Void) {
        guard var entry = sessions[path] else { return }
        let before = entry.visible
        change(&entry.visible)
        sessions[path] = entry
        if entry.visible.state != "waiting", let discovery {
            Task { await discovery.pairingSessionLeftWaiting(path) }
        }
        if before != entry.visible { sessionObserver?(path, before, entry.visible) }
    }

    /// A session's state; nil when there is no such session.
    public func session(_ path: String) -> PairingSessionState? { sessions[path]?.visible }

    /// Paths of every session, for the D-Bus glue to withdraw them.
    func sessionPaths() -> [String] { Array(sessions.keys) }

    private func ownedSession(_ path: String, uid: UInt32) throws(ServiceFailure) -> PairingEntry {
        guard let entry = sessions[path] else { throw .unknownObject("no such pairing session") }
        guard uid == entry.ownerUID || uid == 0 else { throw .notPermitted("not your pairing session") }
        return entry
    }

    /// The user's answer to the code, from the session's owner (or root).
    public func confirm(_ path: String, uid: UInt32, accepted: Bool) async throws(ServiceFailure) {
        let entry = try ownedSession(path, uid: uid)
        guard entry.visible.state == "confirming", let driver = entry.driver else { throw .notReady("no code to confirm yet") }
        await driver.confirm(accepted)
    }

    public func cancel(_ path: String, uid: UInt32) async throws(ServiceFailure) {
        let entry = try ownedSession(path, uid: uid)
        entry.closeListeners()
        if let driver = entry.driver { await driver.cancel() } else { finishSession(path, error: "rejected") }
    }

    public func stop() async {
        for entry in sessions.values {
            entry.closeListeners()
            await entry.driver?.cancel()
        }
        sessions = [:]
    }
}
