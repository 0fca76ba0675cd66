import BatonCore
import Dispatch
// CBluetooth includes <sys/socket.h>: depending on build order its clang module owns the socket
// constants (SHUT_RDWR, MSG_NOSIGNAL), so every file using them imports it too.
import CBluetooth
import Glibc
import Synchronization

/// A stream of frames, whatever carries it: pinned TLS (ring members), plain TCP (pairing, whose
/// messages protect themselves, protocol §7) or an L2CAP LE channel (BLE fallback, §8.3).
public protocol FrameChannel: Sendable {
    func send(_ frame: Frame) async throws(TransportError)
    func receive(timeout: Duration?) async throws(TransportError) -> Frame
    func close()
    /// Closes after the peer had the chance to read everything sent (see PlainFrameChannel).
    func closeGracefully(timeout: Duration) async
}

extension SecureChannel: FrameChannel {
    public func closeGracefully(timeout: Duration) async { close() }
}

/// Frames over a plain TCP connection. Used only for pairing: the pairing messages carry their
/// own commit–reveal and AEAD protection, and nothing else may be sent over it.
public final class PlainFrameChannel: FrameChannel {
    private struct State {
        var descriptor: Int32
        var decoder = FrameDecoder()
        var closed = false
    }

    private let state: Mutex<State>
    private let sendLock = AsyncLock()
    private let receiveLock = AsyncLock()
    public let configuration: TransportConfiguration
    /// The peer's numeric address, for logs.
    public let peerDescription: String

    init(descriptor: Int32, peer: String, configuration: TransportConfiguration) {
        state = Mutex(State(descriptor: descriptor))
        peerDescription = peer
        self.configuration = configuration
    }

    deinit { close() }

    public var isClosed: Bool { state.withLock { $0.closed } }

    public func close() {
        let descriptor: Int32? = state.withLock { state in
            guard !state.closed else { return nil }
            state.closed = true
            return state.descriptor
        }
        if let descriptor {
            shutdown(descriptor, Int32(SHUT_RDWR))
            Glibc.close(descriptor)
        }
    }

    /// Half-closes, then reads until the peer closes too (or `timeout`), then closes. A plain close
    /// with unread bytes in the receive buffer sends a TCP reset, which can destroy the last frame
    /// (an error or a refusal) before the peer reads it.
    public func closeGracefully(timeout: Duration) async {
        guard let descriptor = state.withLock({ $0.closed ? nil : $0.descriptor }) else { return }
        shutdown(descriptor, Int32(SHUT_WR))
        let deadline = timeout.deadlineFromNow
        var buffer = [UInt8](repeating: 0, count: 4096)
        drain: while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 { continue }
            if count == 0 { break }
            let code = errno
            guard code == EAGAIN || code == EWOULDBLOCK || code == EINTR else { break }
            switch await waitForSocket(descriptor, .readable, until: deadline) {
            case .ready: continue
            case .timedOut, .cancelled: break drain
            }
        }
        close()
    }

    public func send(_ frame: Frame) async throws(TransportError) {
        let bytes: [UInt8]
        do { bytes = try frame.encoded() } catch { throw .unencodableFrame(error) }
        let deadline = configuration.writeTimeout.deadlineFromNow
        await sendLock.lock()
        defer { sendLock.unlock() }
        var offset = 0
        while offset < bytes.count {
            guard let descriptor = state.withLock({ $0.closed ? nil : $0.descriptor }) else { throw .closed }
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written > 0 { offset += written; continue }
            let code = errno
            guard written < 0, code == EAGAIN || code == EWOULDBLOCK || code == EINTR else {
                close()
                throw .connectionFailed("send: errno \(code)")
            }
            switch await waitForSocket(descriptor, .writable, until: deadline) {
            case .ready: continue
            case .timedOut: throw .timedOut
            case .cancelled: throw .closed
            }
        }
    }

    public func receive(timeout: Duration? = nil) async throws(TransportError) -> Frame {
        let deadline = (timeout ?? configuration.idleTimeout).deadlineFromNow
        await receiveLock.lock()
        defer { receiveLock.unlock() }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let next: Result<Frame?, WireError> = state.withLock { state in
                do throws(WireError) { return .success(try state.decoder.next()) } catch { return .failure(error) }
            }
            switch next {
            case .success(let frame?): return frame
            case .failure(let error):
                close()
                throw .invalidFrame(error)
            case .success(nil): break
            }
            guard let descriptor = state.withLock({ $0.closed ? nil : $0.descriptor }) else { throw .closed }
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                let chunk = Array(buffer[0..<count])
                state.withLock { $0.decoder.append(chunk) }
                continue
            }
            if count == 0 {
                close()
                throw .closed
            }
            let code = errno
            guard code == EAGAIN || code == EWOULDBLOCK || code == EINTR else {
                close()
                throw .connectionFailed("recv: errno \(code)")
            }
            switch await waitForSocket(descriptor, .readable, until: deadline) {
            case .ready: continue
            case .timedOut: throw .timedOut
            case .cancelled: throw .closed
            }
        }
    }
}

/// Listens for one pairing peer at a time on plain TCP (`bt-pair accept`).
public final class PlainFrameListener: Sendable {
    public let port: UInt16
    private let descriptor: Int32
    private let configuration: TransportConfiguration
    private let closed = Mutex(false)

    public init(host: String, port: UInt16, configuration: TransportConfiguration = .init()) throws(TransportError) {
        let address = try SocketAddress.lookup(host: host, port: port, passive: true, numericOnly: true)[0]
        let descriptor = try makeStreamSocket(family: address.family)
        setSocketOption(descriptor, SOL_SOCKET, SO_REUSEADDR, 1)
        if address.family == AF_INET6 { setSocketOption(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1) }
        guard address.withSockaddr({ bind(descriptor, $0, $1) }) == 0, listen(descriptor, 4) == 0,
              let local = SocketAddress.local(of: descriptor) else {
            let code = errno
            Glibc.close(descriptor)
            throw .socket(operation: "bind/listen", errno: code)
        }
        self.descriptor = descriptor
        self.port = local.port
        self.configuration = configuration
    }

    deinit { close() }

    public func close() {
        let wasOpen = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        if wasOpen {
            shutdown(descriptor, Int32(SHUT_RDWR))
            Glibc.close(descriptor)
        }
    }

    /// The next connection, or `.timedOut` after `timeout`.
    public func accept(timeout: Duration) async throws(TransportError) -> PlainFrameChannel {
        let deadline = timeout.deadlineFromNow
        while true {
            guard !closed.withLock({ $0 }) else { throw .closed }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutableBytes(of: &storage) {
                Glibc.accept(descriptor, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
            }
            if client >= 0 {
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                setSocketOption(client, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
                return PlainFrameChannel(descriptor: client, peer: Self.describe(storage), configuration: configuration)
            }
            let code = errno
            guard code == EAGAIN || code == EWOULDBLOCK || code == EINTR || code == ECONNABORTED else {
                throw .socket(operation: "accept", errno: code)
            }
            switch await waitForSocket(descriptor, .readable, until: deadline) {
            case .ready: continue
            case .timedOut: throw .timedOut
            case .cancelled: throw .closed
            }
        }
    }

    static func describe(_ storage: sockaddr_storage) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var copy = storage
        let status = withUnsafePointer(to: &copy) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, socklen_t(MemoryLayout<sockaddr_storage>.size), &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
            }
        }
        return status == 0 ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    }
}

/// Connects to a pairing peer over plain TCP (`bt-pair with`).
public enum PlainFrameConnector {
    public static func connect(host: String, port: UInt16, timeout: Duration = .seconds(10),
                               configuration: TransportConfiguration = .init()) async throws(TransportError) -> PlainFrameChannel {
        let deadline = timeout.deadlineFromNow
        var lastError = TransportError.addressUnavailable(host)
        for address in try await SocketAddress.resolve(host: host, port: port, passive: false) {
            do {
                let descriptor = try await TCPConnect.connect(to: address, until: deadline)
                return PlainFrameChannel(descriptor: descriptor, peer: host, configuration: configuration)
            } catch {
                lastError = error
                if error == .connectTimedOut { break }
            }
        }
        throw lastError
    }
}
