// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Dispatch
// CBluetooth includes <sys/socket.h>: depending on build order its clang module owns the socket
// constants (SHUT_RDWR, MSG_NOSIGNAL), so every file using them imports it too.
import CBluetooth
import Glibc
import Synchronization

/// Accepts channels from ring members on one TCP address. Each connection must complete the TLS
/// handshake within `handshakeTimeout`. Two budgets (§8.1), so that strangers cannot lock members out:
/// - at most `maxConnections` connections in the handshake (unauthenticated). One arriving when all
///   are taken closes the oldest of them if that one has waited `evictionAge`, else it is itself
///   closed: idle connections held open cannot keep a member's fresh handshake out.
/// - at most `maxMemberConnections` authenticated channels (waiting in `accept()` or open); a
///   connection whose identity proof passes (§8.1) beyond it is closed.
public final class TLSListener: Sendable {
    private struct Handshaking {
        let socket: OwnedSocket
        let since: ContinuousClock.Instant
    }

    private struct State {
        var ready: [SecureChannel] = []
        var waiters: [UInt64: CheckedContinuation<Result<SecureChannel, TransportError>, Never>] = [:]
        var nextWaiterID: UInt64 = 0
        /// Connections in the handshake by arrival number (the smallest is the oldest).
        var handshaking: [UInt64: Handshaking] = [:]
        var authenticated: Set<UInt64> = []
        var nextConnectionID: UInt64 = 0
        var closed = false
    }

    /// How long a handshaking connection is safe from being closed for a newcomer: a member's
    /// handshake takes milliseconds, so only a flood of new connections could evict it.
    public static let evictionAge = TransportConfiguration().evictionAge

    /// The bound port (the ephemeral one when 0 was asked for).
    public let port: UInt16
    public let configuration: TransportConfiguration
    /// Authenticated channels kept at once (ring members), apart from `configuration.maxConnections`.
    public let maxMemberConnections: Int
    private let context: LazyTLSContext
    private let pins: PinProvider
    private let onHandshakeFailure: @Sendable (TransportError) -> Void
    private let state = Mutex(State())
    private let acceptSource: SendableReadSource

    /// Binds and starts listening on a numeric address ("127.0.0.1", "::1", "0.0.0.0", "::").
    /// `onHandshakeFailure` hears every refused connection (for logs).
    public init(
        identity: Ed25519PrivateKey,
        pins: @escaping PinProvider,
        host: String,
        port: UInt16,
        configuration: TransportConfiguration = .init(),
        maxMemberConnections: Int = 32,
        onHandshakeFailure: @escaping @Sendable (TransportError) -> Void = { _ in }
    ) throws(TransportError) {
        let (socket, port) = try OwnedSocket.tcpListener(host: host, port: port, backlog: 64)
        self.context = LazyTLSContext(identity: identity, role: .server)
        self.port = port
        self.configuration = configuration
        self.maxMemberConnections = max(1, maxMemberConnections)
        self.pins = pins
        self.onHandshakeFailure = onHandshakeFailure
        // The cancel handler holds the socket until dispatch stopped watching it; then it may be closed.
        self.acceptSource = SendableReadSource(try socket.makeAcceptSource(queue: socketEventQueue, onCancel: { socket.close() }))
        acceptSource.source.setEventHandler { [weak self] in self?.acceptPending(socket) }
        acceptSource.source.activate()
    }

    deinit {
        acceptSource.source.cancel()
    }

    /// The next authenticated channel. Throws `.closed` once the listener is closed.
    public func accept() async throws(TransportError) -> SecureChannel {
        let waiterID = state.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<SecureChannel, TransportError>, Never>) in
                let immediate: Result<SecureChannel, TransportError>? = state.withLock { state in
                    if !state.ready.isEmpty { return .success(state.ready.removeFirst()) }
                    if state.closed { return .failure(.closed) }
                    state.waiters[waiterID] = continuation
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: waiterID) }?.resume(returning: .failure(.closed))
        }
        return try result.get()
    }

    /// Stops accepting, fails pending `accept()` calls and closes channels nobody accepted yet.
    /// Channels already handed out stay open.
    public func close() {
        let (waiters, unaccepted) = state.withLock { state in
            state.closed = true
            defer {
                state.waiters = [:]
                state.ready = []
            }
            return (Array(state.waiters.values), state.ready)
        }
        acceptSource.source.cancel()
        for waiter in waiters { waiter.resume(returning: .failure(.closed)) }
        for channel in unaccepted { channel.close() }
    }

    /// Connections currently held: in the handshake, or authenticated and not yet closed.
    public var liveConnections: Int { state.withLock { $0.handshaking.count + $0.authenticated.count } }

    /// Connections in the handshake, counted against `configuration.maxConnections`.
    public var handshakingConnections: Int { state.withLock { $0.handshaking.count } }

    private func acceptPending(_ listening: OwnedSocket) {
        while true {
            let connection: OwnedSocket
            switch listening.acceptNow() {
            case .accepted(let socket, _): connection = socket
            case .wouldBlock: return
            case .failed:
                // Out of descriptors (EMFILE, ENFILE, ENOBUFS): the connection stays queued and the
                // source would fire again at once, so pause accepting briefly instead of spinning.
                // The closure holds the source itself: a suspended source must be resumed before release.
                acceptSource.source.suspend()
                socketEventQueue.asyncAfter(deadline: .now() + .milliseconds(100)) { [acceptSource] in
                    acceptSource.source.resume()
                }
                return
            }
            let now = ContinuousClock.now
            let admission: (id: UInt64, evicted: OwnedSocket?)? = state.withLock { state in
                guard !state.closed else { return nil }
                var evicted: OwnedSocket?
                if state.handshaking.count >= configuration.maxConnections {
                    guard let oldest = state.handshaking.keys.min(), let entry = state.handshaking[oldest],
                          now - entry.since >= configuration.evictionAge else { return nil }
                    state.handshaking[oldest] = nil
                    evicted = entry.socket
                }
                let id = state.nextConnectionID
                state.nextConnectionID += 1
                state.handshaking[id] = Handshaking(socket: connection, since: now)
                return (id, evicted)
            }
            // One not admitted is closed as `connection` goes; an evicted one's handshake fails as `.closed`.
            guard let admission else { continue }
            admission.evicted?.close()
            connection.setOption(Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            Task { await self.establish(connection, id: admission.id) }
        }
    }

    /// From the next connection on, this listener proves `identity` (the machine got a new one,
    /// `bt-pair reset-identity`); channels already open keep the old one until they close.
    public func use(identity: Ed25519PrivateKey) { context.use(identity: identity) }

    /// The identity the next connection proves (tests).
    public var identityKey: [UInt8] { context.identity.publicKey }

    /// Whether its TLS context exists yet (made at the first connection).
    var contextIsMade: Bool { context.isMade }

    private func establish(_ socket: OwnedSocket, id: UInt64) async {
        do {
            let channel = try await context.context().secure(
                socket, pins: pins, until: configuration.handshakeTimeout.deadlineFromNow, configuration: configuration,
                onClose: { [weak self] in self?.connectionClosed(id) })
            deliver(channel, id: id)
        } catch {
            onHandshakeFailure(error)
        }
    }

    private func connectionClosed(_ id: UInt64) {
        state.withLock { state in
            if state.handshaking.removeValue(forKey: id) == nil { state.authenticated.remove(id) }
        }
    }

    /// Moves a channel whose client proved a member's identity from the unauthenticated budget to the members' one.
    private func deliver(_ channel: SecureChannel, id: UInt64) {
        let waiter: CheckedContinuation<Result<SecureChannel, TransportError>, Never>?? = state.withLock { state in
            // Evicted or the listener closed meanwhile; or the members' budget is spent.
            guard !state.closed, state.handshaking.removeValue(forKey: id) != nil,
                  state.authenticated.count < maxMemberConnections else { return .some(nil) }
            state.authenticated.insert(id)
            if let first = state.waiters.keys.min() { return .some(state.waiters.removeValue(forKey: first)) }
            state.ready.append(channel)
            return nil
        }
        switch waiter {
        case .some(.some(let continuation)): continuation.resume(returning: .success(channel))
        case .some(.none): channel.close()
        case .none: break
        }
    }
}

/// Dispatch sources are thread-safe; this wrapper lets a Sendable class hold one.
struct SendableReadSource: @unchecked Sendable {
    let source: any DispatchSourceRead
    init(_ source: any DispatchSourceRead) { self.source = source }
}
