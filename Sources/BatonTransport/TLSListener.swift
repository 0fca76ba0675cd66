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
        let address = try SocketAddress.lookup(host: host, port: port, passive: true, numericOnly: true)[0]
        let descriptor = try makeStreamSocket(family: address.family)
        setSocketOption(descriptor, SOL_SOCKET, SO_REUSEADDR, 1)
        if address.family == AF_INET6 { setSocketOption(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1) }
        guard address.withSockaddr({ bind(descriptor, $0, $1) }) == 0, listen(descriptor, 64) == 0,
              let local = SocketAddress.local(of: descriptor)
        else {
            let code = errno
            Glibc.close(descriptor)
            throw .socket(operation: "bind/listen", errno: code)
        }
        do {
            self.context = try TLSContext(identity: identity, role: .server)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        self.port = local.port
        self.configuration = configuration
        self.pins = pins
        self.onHandshakeFailure = onHandshakeFailure
        self.acceptSource = SendableReadSource(DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: socketEventQueue))
        acceptSource.source.setEventHandler { [weak self] in self?.acceptPending(descriptor) }
        acceptSource.source.setCancelHandler { Glibc.close(descriptor) }
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

    private func acceptPending(_ listening: Int32) {
        while true {
            // accept4 is not in the Glibc module; the flags are set right after instead.
            let descriptor = Glibc.accept(listening, nil, nil)
            if descriptor < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                if code != EAGAIN && code != EWOULDBLOCK {
                    // Out of descriptors (EMFILE, ENFILE, ENOBUFS): the connection stays queued and the
                    // source would fire again at once, so pause accepting briefly instead of spinning.
                    // The closure holds the source itself: a suspended source must be resumed before release.
                    acceptSource.source.suspend()
                    socketEventQueue.asyncAfter(deadline: .now() + .milliseconds(100)) { [acceptSource] in
                        acceptSource.source.resume()
                    }
                }
                return
            }
            let admitted = state.withLock { state in
                guard !state.closed, state.liveConnections < configuration.maxConnections else { return false }
                state.liveConnections += 1
                return true
            }
            guard admitted else {
                Glibc.close(descriptor)
                continue
            }
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            setSocketOption(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            Task { await self.establish(descriptor) }
        }
    }

    private func establish(_ descriptor: Int32) async {
        let connection: TLSConnection
        do {
            connection = try TLSConnection(context: context, descriptor: descriptor, pins: pins, onClose: { [weak self] in
                self?.state.withLock { $0.liveConnections -= 1 }
            })
        } catch {
            onHandshakeFailure(error)
            return
        }
        let key: [UInt8]
        do {
            key = try await connection.handshake(until: configuration.handshakeTimeout.deadlineFromNow)
        } catch {
            connection.close()
            onHandshakeFailure(error)
            return
        }
        deliver(SecureChannel(connection: connection, peerIdentityKey: key, configuration: configuration))
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
