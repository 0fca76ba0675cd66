import BatonCore
import BatonCrypto
import Dispatch
// CBluetooth includes <sys/socket.h>: depending on build order its clang module owns the socket
// constants (SHUT_RDWR, MSG_NOSIGNAL), so every file using them imports it too.
import CBluetooth
import Glibc
import Synchronization

/// Accepts channels from ring members on one TCP address. Each connection must complete the TLS
/// handshake within `handshakeTimeout`, and at most `maxConnections` are kept at once (handshaking,
/// waiting in `accept()`, or open), so unauthenticated peers cannot exhaust the daemon.
public final class TLSListener: Sendable {
    private struct State {
        var ready: [SecureChannel] = []
        var waiters: [UInt64: CheckedContinuation<Result<SecureChannel, TransportError>, Never>] = [:]
        var nextWaiterID: UInt64 = 0
        var liveConnections = 0
        var closed = false
    }

    /// The bound port (the ephemeral one when 0 was asked for).
    public let port: UInt16
    public let configuration: TransportConfiguration
    private let context: TLSContext
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
        onHandshakeFailure: @escaping @Sendable (TransportError) -> Void = { _ in }
    ) throws(TransportError) {
        let (socket, port) = try OwnedSocket.tcpListener(host: host, port: port, backlog: 64)
        self.context = try TLSContext(identity: identity, role: .server)
        self.port = port
        self.configuration = configuration
        self.pins = pins
        self.onHandshakeFailure = onHandshakeFailure
        self.acceptSource = SendableReadSource(socket.makeReadSource(queue: socketEventQueue))
        acceptSource.source.setEventHandler { [weak self] in self?.acceptPending(socket) }
        // The handler holds the socket until dispatch stopped watching it; then it may be closed.
        acceptSource.source.setCancelHandler { socket.close() }
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

    /// Connections currently counted against `maxConnections`.
    public var liveConnections: Int { state.withLock { $0.liveConnections } }

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
            let admitted = state.withLock { state in
                guard !state.closed, state.liveConnections < configuration.maxConnections else { return false }
                state.liveConnections += 1
                return true
            }
            // One not admitted is closed as `connection` goes.
            guard admitted else { continue }
            connection.setOption(Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            Task { await self.establish(connection) }
        }
    }

    private func establish(_ socket: OwnedSocket) async {
        do {
            let channel = try await context.secure(
                socket, pins: pins, until: configuration.handshakeTimeout.deadlineFromNow, configuration: configuration,
                onClose: { [weak self] in self?.state.withLock { $0.liveConnections -= 1 } })
            deliver(channel)
        } catch {
            onHandshakeFailure(error)
        }
    }

    private func deliver(_ channel: SecureChannel) {
        let waiter: CheckedContinuation<Result<SecureChannel, TransportError>, Never>?? = state.withLock { state in
            if state.closed { return .some(nil) }
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
