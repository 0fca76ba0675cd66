// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonCrypto
import BatonTransport
#if canImport(Glibc)
import Glibc
#endif

/// How many pairing sessions a daemon keeps, and for how long.
public struct PairingLimits: Sendable {
    /// Sessions not yet paired or failed (waiting Accepts, connecting Pairs, codes on screen):
    /// one more is refused with LimitExceeded, so callers cannot pile up listeners.
    public var maxUnfinishedSessions: Int
    /// A finished session's object stays this long so its owner can read the final State and Error.
    public var finishedGrace: Duration
    /// Finished sessions kept at most; the oldest goes early when more finish within the grace.
    public var maxFinishedSessions: Int
    /// How long a session shows the peer's members for the user's Commit; no answer refuses them.
    public var reviewTimeout: Duration

    public init(maxUnfinishedSessions: Int = 4, finishedGrace: Duration = .seconds(60), maxFinishedSessions: Int = 16,
                reviewTimeout: Duration = .seconds(120)) {
        self.reviewTimeout = reviewTimeout
        self.maxUnfinishedSessions = max(1, maxUnfinishedSessions)
        self.finishedGrace = finishedGrace
        self.maxFinishedSessions = max(0, maxFinishedSessions)
    }
}

/// What the D-Bus glue hears about sessions: a change of what PairingSession1 shows, or the end of
/// a session's life (its object goes).
enum PairingSessionEvent: Sendable {
    case changed(path: String, before: PairingProgress, after: PairingProgress)
    case removed(path: String)
}

struct PairingEntry {
    var path: String
    var ownerUID: UInt32
    var progress: PairingProgress
    var driver: PairingDriver?
    var listener: PlainFrameListener?
    /// The L2CAP channel an acceptor also waits on (§8.3), when the radio has an adapter.
    var bluetoothListener: L2CAPListener?
    /// Order of finishing, for dropping the oldest finished session first.
    var finishedOrder: Int?
    /// An acceptor keeps listening during its session: any second initiator aborts it (`contested`).
    var contestWatch: Task<Void, Never>?

    func closeListeners() {
        contestWatch?.cancel()
        listener?.close()
        bluetoothListener?.close()
    }
}

/// Pairing sessions (protocol §7) driven over TCP or L2CAP: Accept waits for an initiator (its
/// pairing advert on the radio, its endpoint on DNS-SD), Pair connects to one; both end in the
/// ring (`RingService.joined`) or in a failure reason. At most `limits.maxUnfinishedSessions` run at
/// once; a finished session is dropped after `limits.finishedGrace`.
public actor PairingService {
    typealias SessionObserver = @Sendable (PairingSessionEvent) -> Void

    let ring: RingService
    let discovery: DiscoveryService?
    let clock: any WallClock
    let log: @Sendable (String) -> Void
    let limits: PairingLimits
    var sessions: [String: PairingEntry] = [:]
    var nextSession = 0
    /// Slots taken by Accept and Pair calls still setting up (listening, connecting): counted
    /// against the limit before their first suspension, so concurrent calls cannot overshoot it.
    var startingSessions = 0
    var finishedCount = 0
    var sessionObserver: SessionObserver?
    /// Sessions showing the peer's members, waiting for Commit (true) or a refusal (false).
    var reviews: [String: CheckedContinuation<ReviewAnswer, Never>] = [:]
    var radio: RadioService { ring.radio }
    /// A `resetIdentity` is running: no session may start meanwhile.
    var resettingIdentity = false
    var listenHost: String { ring.configuration.listenHost }

    public init(ring: RingService, discovery: DiscoveryService?, clock: any WallClock, limits: PairingLimits = PairingLimits(),
                log: @escaping @Sendable (String) -> Void) {
        self.ring = ring
        self.discovery = discovery
        self.clock = clock
        self.limits = limits
        self.log = log
    }

    func onSessionChange(_ observer: SessionObserver?) { sessionObserver = observer }

    /// Accept: listens on TCP (and L2CAP with a ready adapter), puts the pairing advert on the air
    /// and announces the endpoint over DNS-SD. Returns the session's path. `host` must be a numeric
    /// IPv4 or IPv6 address (nil: the daemon's listen address).
    package func acceptPairing(uid: UInt32, host: String?) async throws(ServiceFailure) -> String {
        if let host, !Self.isNumericAddress(host) { throw .invalidArguments("Host must be a numeric IPv4 or IPv6 address") }
        try reserveSlot()
        let listener: PlainFrameListener
        do { listener = try PlainFrameListener(host: host ?? listenHost, port: 0) } catch {
            startingSessions -= 1
            throw .failed("cannot listen for pairing on that address: \(Self.describeListen(error))")
        }
        let sessionID = SystemRandom().bytes(8)
        let bluetoothListener = await openPairingL2CAPListener()
        let path = await startSession(role: .responder, uid: uid, channel: nil, listener: listener, bluetoothListener: bluetoothListener,
                                      sessionID: sessionID)
        await discovery?.publishPairingEndpoint(path: path, sessionID: sessionID, port: listener.port, deviceName: await ring.snapshot().name)
        return path
    }

    /// Pair: connects to an acceptor at "HOST:PORT" or "ble:ADDRESS/PSM" with its session id.
    package func pair(uid: UInt32, target: String, sessionID: [UInt8], addressType: LEAddressType?) async throws(ServiceFailure) -> String {
        try reserveSlot()
        let channel: any FrameChannel
        do { channel = try await openPairingChannel(to: target, addressType: addressType, sessionID: sessionID) } catch {
            startingSessions -= 1
            throw error
        }
        return await startSession(role: .initiator, uid: uid, channel: channel, listener: nil, sessionID: sessionID)
    }

    private func openPairingChannel(to target: String, addressType: LEAddressType?, sessionID: [UInt8]) async throws(ServiceFailure) -> any FrameChannel {
        if let (address, psm) = RingService.splitBluetoothTarget(target) {
            return try await connectPairingL2CAP(peer: address, psm: psm, addressType: addressType, sessionID: sessionID)
        }
        guard let (host, port) = RingService.splitEndpoint(target), addressType == nil else {
            throw .invalidArguments("target must be HOST:PORT or ble:ADDRESS/PSM")
        }
        do { return try await PlainFrameConnector.connect(host: host, port: port, timeout: .seconds(10)) } catch {
            throw .unknownDevice("cannot reach \(echoed(target)): \(Self.describeDial(error))")
        }
    }

    /// `bt-pair reset-identity` (§7 "A new identity"): refused while a pairing session is open (it
    /// would join the ring being left, under the identity being dropped) or starting; no session may
    /// start until the ring took the new identity. Returns the new device id and the previous one.
    func resetIdentity() async throws(ServiceFailure) -> (deviceID: DeviceID, previous: DeviceID) {
        let open = sessions.values.filter { !$0.progress.phase.isFinished }.count + startingSessions
        guard open == 0, !resettingIdentity else {
            throw .notReady("a pairing session is open on this machine; cancel it or let it end (bt-pair shows it), then reset the identity")
        }
        resettingIdentity = true
        defer { resettingIdentity = false }
        return try await ring.resetIdentity()
    }

    /// Takes one of the unfinished-session slots; `startSession` takes it over (or the caller gives it back).
    private func reserveSlot() throws(ServiceFailure) {
        guard !resettingIdentity else { throw .notReady("this machine is taking a new identity; pair once that is done") }
        let unfinished = sessions.values.filter { !$0.progress.phase.isFinished }.count + startingSessions
        guard unfinished < limits.maxUnfinishedSessions else {
            throw .limitExceeded("at most \(limits.maxUnfinishedSessions) pairing sessions at once; cancel one or let it end")
        }
        startingSessions += 1
    }

    /// Registers a session whose slot `reserveSlot` reserved, and runs it.
    private func startSession(role: PairingSession.Role, uid: UInt32, channel: (any FrameChannel)?, listener: PlainFrameListener?,
                              bluetoothListener: L2CAPListener? = nil, sessionID: [UInt8]) async -> String {
        nextSession += 1
        let path = "\(BatonObjectPath.pairingSessionPrefix)/\(nextSession)"
        let progress = PairingProgress(role: role, sessionID: sessionID, listeningPort: channel == nil ? listener?.port ?? 0 : nil)
        sessions[path] = PairingEntry(path: path, ownerUID: uid, progress: progress, listener: listener, bluetoothListener: bluetoothListener)
        // The session now counts itself: the slot reserved for it is given back.
        startingSessions -= 1
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
                // The listeners stay open for the session's life: a second initiator is an attack.
                channel = try await Self.acceptFirst(tcp: listener, bluetooth: entry.bluetoothListener,
                                                     timeout: .seconds(PairingSession.timeoutSeconds), keepListening: true)
            } catch {
                update(path) { $0.failed(error == .timedOut ? .timedOut : .transport) }
                entry.closeListeners()
                await radio.pairingStoppedWaiting(sessionID: entry.progress.sessionID)
                return
            }
            if let bluetooth = channel as? L2CAPFrameChannel { log("batond: pairing initiator connected over L2CAP from \(bluetooth.peer)") }
            // The pairing advert, the DNS-SD record and the listeners stay until this side's user
            // typed the initiator's code (`PairingProgress.wantsInitiators`): the first to connect
            // may be an attacker, and the real initiator must still find this machine and contest.
            // Cancelled while the initiator arrived: the session stays as cancelled.
            guard update(path, { $0.connected() }) else {
                channel?.close()
                entry.closeListeners()
                return
            }
            watchForSecondInitiator(path, tcp: listener, bluetooth: entry.bluetoothListener)
        }
        guard let channel else { return }
        let session: PairingSession
        do {
            session = try PairingSession(role: role, sessionID: entry.progress.sessionID, ephemeralKey: X25519PrivateKey(),
                                         nonce: SystemRandom().bytes(16), local: await ring.pairingInfoWithEndpoints())
        } catch {
            update(path) { $0.failed(.protocolError) }
            channel.close()
            return
        }
        let driver = PairingDriver(session: session, channel: channel, clock: clock, onCodes: { [weak self] code, second in
            await self?.codeShown(path, code, second)
        })
        // Cancelled (or stopped, or contested) while the session was being set up: nothing runs.
        guard sessions[path]?.progress.phase.isFinished == false else {
            channel.close()
            return
        }
        sessions[path]?.driver = driver
        switch await driver.run() {
        case .success(let pairing):
            await review(path, pairing, channel: channel)
        case .failure(let failure):
            update(path) { $0.failed(failure.reason) }
            log("batond: pairing failed: \(failure.reason.rawValue)")
            // Nothing secret crossed (the identity message carries none, §7.2); re-keying anyway is a
            // precaution: the removed machine is in use nearby, and the attempt needs our user's accept.
            if failure == .peerRemoved { await ring.rekey(reason: "a removed machine tried to pair") }
        }
    }

    private func codeShown(_ path: String, _ code: String, _ second: String) {
        update(path) { $0.codeShown(code, second: second) }
    }

    /// Applies a transition; the observer hears of a change, and a session that just finished is
    /// dropped after the grace. Returns false when the phase did not change.
    @discardableResult
    func update(_ path: String, _ change: (inout PairingProgress) -> Bool) -> Bool {
        guard var entry = sessions[path] else { return false }
        let before = entry.progress
        guard change(&entry.progress) else { return false }
        if entry.progress.phase.isFinished {
            finishedCount += 1
            entry.finishedOrder = finishedCount
            entry.closeListeners()
        }
        sessions[path] = entry
        // An acceptor that no longer wants initiators (its user typed the initiator's code, or the
        // session ended) closes its listeners and withdraws its pairing advert and DNS-SD record.
        if before.wantsInitiators, !entry.progress.wantsInitiators {
            entry.closeListeners()
            let radio = radio, discovery = discovery, sessionID = entry.progress.sessionID
            Task {
                await radio.pairingStoppedWaiting(sessionID: sessionID)
                await discovery?.pairingSessionLeftWaiting(path)
            }
        }
        sessionObserver?(.changed(path: path, before: before, after: entry.progress))
        if entry.progress.phase.isFinished { scheduleRemoval(of: path) }
        return true
    }

    private func scheduleRemoval(of path: String) {
        let grace = limits.finishedGrace
        Task { [weak self] in
            try? await Task.sleep(for: grace)
            await self?.remove(path)
        }
        let finished = sessions.values.compactMap { entry in entry.finishedOrder.map { ($0, entry.path) } }.sorted { $0.0 < $1.0 }
        for (_, oldest) in finished.dropLast(limits.maxFinishedSessions) { remove(oldest) }
    }

    private func remove(_ path: String) {
        guard sessions.removeValue(forKey: path) != nil else { return }
        sessionObserver?(.removed(path: path))
    }

    /// A session's progress; nil when there is no such session (never was, or ended and dropped).
    public func session(_ path: String) -> PairingProgress? { sessions[path]?.progress }

    /// Paths of every session, for the D-Bus glue to withdraw them.
    func sessionPaths() -> [String] { Array(sessions.keys) }

    /// The refusal of another account's session, with what to do.
    static let notYourSession = "not your pairing session: only the account that started it (or root) may use it; "
        + "start your own with `bt-pair accept` or `bt-pair with`"

    func ownedSession(_ path: String, uid: UInt32) throws(ServiceFailure) -> PairingEntry {
        guard let entry = sessions[path] else { throw .unknownObject("no such pairing session") }
        guard uid == entry.ownerUID || uid == 0 else { throw .notPermitted(Self.notYourSession) }
        return entry
    }

    /// The user's answer to the code, from the session's owner (or root): only a refusal. Each side
    /// accepts by typing the code the other screen shows (`confirmCode`), so one careless click cannot pair.
    public func confirm(_ path: String, uid: UInt32, accepted: Bool) async throws(ServiceFailure) {
        let entry = try ownedSession(path, uid: uid)
        guard case .confirming = entry.progress.phase, let driver = entry.driver else { throw .notReady("no code to confirm yet") }
        if accepted {
            throw .invalidArguments(entry.progress.role == .initiator
                ? "the initiator confirms by typing the code shown on the other machine (ConfirmCode)"
                : "the acceptor confirms by typing the code the other machine shows once its user typed this one (ConfirmCode)")
        }
        await driver.confirm(false)
    }

    public func cancel(_ path: String, uid: UInt32) async throws(ServiceFailure) {
        let entry = try ownedSession(path, uid: uid)
        entry.closeListeners()
        if reviews[path] != nil {
            answerReview(path, .refused)
        } else if let driver = entry.driver {
            await driver.cancel()
        } else {
            update(path) { $0.failed(.rejected) }
        }
    }

    public func stop() async {
        for path in Array(reviews.keys) { answerReview(path, .refused) }
        for entry in sessions.values {
            entry.closeListeners()
            await entry.driver?.cancel()
        }
        sessions = [:]
    }

    /// A numeric IPv4 or IPv6 address (no name, no brackets, no zone), as a listener binds it.
    static func isNumericAddress(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= Int(INET6_ADDRSTRLEN) else { return false }
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, text, &buffer) == 1 || inet_pton(AF_INET6, text, &buffer) == 1
    }
}

extension PairingFailure {
    /// PairingSession1.Error for this failure.
    var reason: PairingFailureReason {
        switch self {
        case .rejected: .rejected
        case .timedOut: .timedOut
        case .verificationFailed: .verificationFailed
        case .transport: .transport
        case .protocolError: .protocolError
        case .peerRemoved: .peerRemoved
        case .contested: .contested
        }
    }
}
