import Dispatch
// CBluetooth includes <sys/socket.h>: depending on build order its clang module owns the socket
// constants (SHUT_RDWR, MSG_NOSIGNAL), so every file using them imports it too.
import CBluetooth
import Glibc
import Synchronization

/// Anything that can lend a `sockaddr` to a system call (IP and L2CAP addresses).
protocol SockaddrProviding: Sendable {
    func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result
}

extension SocketAddress: SockaddrProviding {}
extension L2CAPSocketAddress: SockaddrProviding {}

/// A nonblocking socket descriptor with exactly one owner. `close()` shuts the socket down at once,
/// which wakes every task waiting on it; the descriptor itself is closed exactly once, when the owner
/// goes. A waiting task holds the owner, so the descriptor number cannot be reused under it, and no
/// error path has to remember to close it.
final class OwnedSocket: Sendable {
    private let descriptor: Int32
    private let closed = Mutex(false)

    /// Takes ownership of `descriptor`.
    init(taking descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit { Glibc.close(descriptor) }

    /// A new nonblocking, close-on-exec socket.
    static func make(family: Int32, type: Int32, protocol: Int32 = 0) throws(TransportError) -> OwnedSocket {
        let flags = Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let descriptor = socket(family, type | flags, `protocol`)
        guard descriptor >= 0 else {
            let code = errno
            if family == AF_BLUETOOTH, code == EAFNOSUPPORT || code == EPROTONOSUPPORT { throw .bluetoothUnavailable(errno: code) }
            throw .socket(operation: "socket", errno: code)
        }
        return OwnedSocket(taking: descriptor)
    }

    var isClosed: Bool { closed.withLock { $0 } }

    /// The descriptor for one system call; nil once closed.
    var open: Int32? { closed.withLock { $0 ? nil : descriptor } }

    /// Shuts both directions down. Idempotent.
    func close() {
        let wasOpen = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        if wasOpen { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }
    }

    /// Tells the peer nothing more comes (TCP FIN); reading goes on.
    func shutdownWrite() {
        if let open { _ = shutdown(open, Int32(SHUT_WR)) }
    }

    func setOption(_ level: Int32, _ name: Int32, _ value: Int32) {
        var value = value
        _ = setsockopt(descriptor, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Suspends until the socket is ready; `timeoutError` at the deadline, `.closed` when cancelled or closed.
    func wait(_ readiness: SocketReadiness, until deadline: DispatchTime, timeoutError: TransportError = .timedOut) async throws(TransportError) {
        guard let descriptor = open else { throw .closed }
        switch await waitForSocket(descriptor, readiness, until: deadline) {
        case .ready: return
        case .timedOut: throw timeoutError
        case .cancelled: throw .closed
        }
    }

    /// Connects to `address` by `deadline` (nonblocking connect, then SO_ERROR).
    func connect(to address: some SockaddrProviding, until deadline: DispatchTime) async throws(TransportError) {
        if address.withSockaddr({ Glibc.connect(descriptor, $0, $1) }) == 0 { return }
        let code = errno
        guard code == EINPROGRESS else { throw .socket(operation: "connect", errno: code) }
        try await wait(.writable, until: deadline, timeoutError: .connectTimedOut)
        var socketError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &socketError, &length)
        guard socketError == 0 else { throw .socket(operation: "connect", errno: socketError) }
    }

    /// Binds to `address` and listens.
    func listen(at address: some SockaddrProviding, backlog: Int32) throws(TransportError) {
        guard address.withSockaddr({ bind(descriptor, $0, $1) }) == 0, Glibc.listen(descriptor, backlog) == 0 else {
            throw .socket(operation: "bind/listen", errno: errno)
        }
    }

    enum AcceptOutcome {
        /// A connection, already nonblocking and close-on-exec, with the peer's address bytes.
        case accepted(OwnedSocket, peerAddress: [UInt8])
        case wouldBlock
        case failed(errno: Int32)
    }

    /// One nonblocking accept(2). `addressCapacity` bounds the peer address kept.
    func acceptNow(addressCapacity: Int = MemoryLayout<sockaddr_storage>.size) -> AcceptOutcome {
        guard let descriptor = open else { return .failed(errno: EBADF) }
        var address = [UInt8](repeating: 0, count: addressCapacity)
        var length = socklen_t(addressCapacity)
        while true {
            let client = address.withUnsafeMutableBytes {
                Glibc.accept(descriptor, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
            }
            if client >= 0 {
                // accept4 is hidden behind _GNU_SOURCE in Swift's Glibc; the flags are set by hand.
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                return .accepted(OwnedSocket(taking: client), peerAddress: Array(address.prefix(Int(min(length, socklen_t(addressCapacity))))))
            }
            let code = errno
            if code == EINTR || code == ECONNABORTED { continue }
            return code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(errno: code)
        }
    }

    /// The next connection, waiting until `deadline` (`.timedOut`).
    func accept(until deadline: DispatchTime, addressCapacity: Int = MemoryLayout<sockaddr_storage>.size) async throws(TransportError) -> (OwnedSocket, peerAddress: [UInt8]) {
        while true {
            switch acceptNow(addressCapacity: addressCapacity) {
            case .accepted(let socket, let peer): return (socket, peer)
            case .failed(let code): throw isClosed ? .closed : .socket(operation: "accept", errno: code)
            case .wouldBlock: try await wait(.readable, until: deadline)
            }
        }
    }

    /// Sends all of `bytes` (on a SEQPACKET socket: as one SDU), waiting for room until `deadline`.
    /// A failure other than the deadline closes the socket.
    func sendAll(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError) {
        var offset = 0
        while offset < bytes.count {
            guard let descriptor = open else { throw .closed }
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written > 0 { offset += written; continue }
            let code = errno
            guard written < 0, Self.isTransient(code) else {
                close()
                throw written < 0 ? Self.failure("send", code) : .connectionFailed("send: no progress")
            }
            try await wait(.writable, until: deadline)
        }
    }

    /// Between 1 and `maximum` bytes from a stream socket; `.closed` once the peer closed (which also
    /// closes this side).
    func receiveSome(upTo maximum: Int, until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: maximum)
        while true {
            guard let descriptor = open else { throw .closed }
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 { return Array(buffer[0..<count]) }
            let code = errno
            guard count < 0, Self.isTransient(code) else {
                close()
                throw count == 0 ? .closed : Self.failure("recv", code)
            }
            try await wait(.readable, until: deadline)
        }
    }

    static func isTransient(_ code: Int32) -> Bool {
        code == EAGAIN || code == EWOULDBLOCK || code == EINTR
    }

    /// A failed send or receive: a peer that went away is an ordinary end of the channel.
    static func failure(_ operation: String, _ code: Int32) -> TransportError {
        switch code {
        case ECONNRESET, ENOTCONN, EPIPE, ESHUTDOWN: .closed
        default: .connectionFailed("\(operation): errno \(code)")
        }
    }
}

/// The plain socket is a byte carrier for TLS (and for the pairing frames).
extension OwnedSocket: ByteTransport {
    func send(_ bytes: [UInt8], until deadline: DispatchTime) async throws(TransportError) {
        try await sendAll(bytes, until: deadline)
    }

    func receive(upTo maximum: Int, until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        try await receiveSome(upTo: maximum, until: deadline)
    }
}
