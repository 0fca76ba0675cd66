// SPDX-License-Identifier: GPL-2.0-or-later
import BatonReadiness
import BatonSystem
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

/// A nonblocking socket descriptor with exactly one owner, closed exactly once. `close()` shuts the
/// socket down at once, which wakes every task waiting on it; the descriptor itself is closed as soon
/// as no system call or wait borrows it any more (or when the owner goes), so its number cannot be
/// reused under a borrower, and no error path has to remember to close it.
final class OwnedSocket: Sendable {
    private struct State {
        var closed = false
        /// System calls and waits using the descriptor right now.
        var borrowers = 0
        var released = false
    }

    private let descriptor: Int32
    private let state = Mutex(State())

    /// Takes ownership of `descriptor`.
    init(taking descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        if !state.withLock({ $0.released }) { FileDescriptor(taking: descriptor).close() }
    }

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

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Lends the descriptor to `body`; nil once closed. A close meanwhile only shuts the socket down.
    func withDescriptor<Result>(_ body: (Int32) -> Result) -> Result? {
        guard borrow() else { return nil }
        defer { giveBack() }
        return body(descriptor)
    }

    private func borrow() -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            state.borrowers += 1
            return true
        }
    }

    private func giveBack() {
        let release = state.withLock { state in
            state.borrowers -= 1
            guard state.closed, state.borrowers == 0, !state.released else { return false }
            state.released = true
            return true
        }
        if release { FileDescriptor(taking: descriptor).close() }
    }

    /// Shuts both directions down and closes the descriptor once nobody borrows it. Idempotent.
    func close() {
        let release = state.withLock { state in
            guard !state.closed else { return false }
            state.closed = true
            // Under the lock, so a borrower giving back cannot close the descriptor before this.
            _ = shutdown(descriptor, Int32(SHUT_RDWR))
            state.released = state.borrowers == 0
            return state.released
        }
        if release { FileDescriptor(taking: descriptor).close() }
    }

    /// Closes at once and drops what is still queued to go out: with SO_LINGER 0 the close sends a
    /// TCP reset instead of the rest of the send buffer (on loopback several MiB). Idempotent.
    func abort() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = withDescriptor { setsockopt($0, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size)) }
        close()
    }

    /// Tells the peer nothing more comes (TCP FIN); reading goes on.
    func shutdownWrite() {
        _ = withDescriptor { shutdown($0, Int32(SHUT_WR)) }
    }

    func setOption(_ level: Int32, _ name: Int32, _ value: Int32) {
        var value = value
        _ = withDescriptor { setsockopt($0, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// Suspends until the socket is ready; `timeoutError` at the deadline, `.closed` when cancelled or closed.
    func wait(_ readiness: SocketReadiness, until deadline: DispatchTime, timeoutError: TransportError = .timedOut) async throws(TransportError) {
        guard borrow() else { throw .closed }
        let outcome = await waitForSocket(descriptor, readiness, until: deadline)
        giveBack()
        switch outcome {
        case .ready: return
        case .timedOut: throw timeoutError
        case .cancelled: throw .closed
        }
    }

    /// Connects to `address` by `deadline` (nonblocking connect, then SO_ERROR).
    func connect(to address: some SockaddrProviding, until deadline: DispatchTime) async throws(TransportError) {
        let started = withDescriptor { descriptor in (address.withSockaddr { Glibc.connect(descriptor, $0, $1) }, errno) }
        guard let (status, code) = started else { throw .closed }
        if status == 0 { return }
        guard code == EINPROGRESS else { throw .socket(operation: "connect", errno: code) }
        try await wait(.writable, until: deadline, timeoutError: .connectTimedOut)
        var socketError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = withDescriptor { getsockopt($0, SOL_SOCKET, SO_ERROR, &socketError, &length) }
        guard socketError == 0 else { throw .socket(operation: "connect", errno: socketError) }
    }

    func bind(to address: some SockaddrProviding) throws(TransportError) {
        let status = withDescriptor { descriptor in address.withSockaddr { Glibc.bind(descriptor, $0, $1) } }
        guard status == 0 else { throw .socket(operation: "bind", errno: errno) }
    }

    func listen(backlog: Int32) throws(TransportError) {
        guard withDescriptor({ Glibc.listen($0, backlog) }) == 0 else { throw .socket(operation: "listen", errno: errno) }
    }

    /// A dispatch source that fires when a connection waits to be accepted (BatonReadiness: the socket
    /// is never in libdispatch's epoll set itself). Its cancel handler runs `onCancel` once dispatch
    /// stopped watching; until then the caller keeps this socket open.
    func makeAcceptSource(queue: DispatchQueue, onCancel: @escaping @Sendable () -> Void) throws(TransportError) -> any DispatchSourceRead {
        guard let source = makeReadinessSource(watching: descriptor, for: .readable, queue: queue, onCancel: onCancel) else {
            throw .socket(operation: "epoll_create1", errno: errno)
        }
        return source
    }

    enum AcceptOutcome {
        /// A connection, already nonblocking and close-on-exec, with the peer's address bytes.
        case accepted(OwnedSocket, peerAddress: [UInt8])
        case wouldBlock
        case failed(errno: Int32)
    }

    /// One nonblocking accept(2). `addressCapacity` bounds the peer address kept.
    func acceptNow(addressCapacity: Int = MemoryLayout<sockaddr_storage>.size) -> AcceptOutcome {
        var address = [UInt8](repeating: 0, count: addressCapacity)
        var length = socklen_t(addressCapacity)
        while true {
            let accepted = withDescriptor { descriptor in
                let client = address.withUnsafeMutableBytes {
                    let peer = $0.baseAddress!.assumingMemoryBound(to: sockaddr.self)
                    return retryingInterrupts { Glibc.accept(descriptor, peer, &length) }
                }
                return (client, errno)
            }
            guard let (client, code) = accepted else { return .failed(errno: EBADF) }
            if client >= 0 {
                // accept4 is hidden behind _GNU_SOURCE in Swift's Glibc; the flags are set by hand.
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                let peer = Array(address.prefix(Int(min(length, socklen_t(addressCapacity)))))
                return .accepted(OwnedSocket(taking: client), peerAddress: peer)
            }
            if code == ECONNABORTED { continue }
            return code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(errno: code)
        }
    }

    /// The next connection, waiting until `deadline` (`.timedOut`).
    func accept(until deadline: DispatchTime, addressCapacity: Int = MemoryLayout<sockaddr_storage>.size)
        async throws(TransportError) -> (OwnedSocket, peerAddress: [UInt8]) {
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
            let sent = withDescriptor { descriptor in
                (bytes[offset...].withUnsafeBytes { raw in retryingInterrupts { Glibc.send(descriptor, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL)) } }, errno)
            }
            guard let (written, code) = sent else { throw .closed }
            if written > 0 { offset += written; continue }
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
        while true {
            var code: Int32 = 0
            var count = 0
            var borrowed = false
            // Received straight into the array returned: no zero fill, no copy of a prefix.
            let buffer = [UInt8](unsafeUninitializedCapacity: max(1, maximum)) { buffer, initialized in
                initialized = 0
                _ = withDescriptor { descriptor in
                    borrowed = true
                    count = retryingInterrupts { Glibc.recv(descriptor, buffer.baseAddress, buffer.count, 0) }
                    code = errno
                }
                if count > 0 { initialized = count }
            }
            guard borrowed else { throw .closed }
            if count > 0 { return buffer }
            guard count < 0, Self.isTransient(code) else {
                close()
                throw count == 0 ? .closed : Self.failure("recv", code)
            }
            try await wait(.readable, until: deadline)
        }
    }

    /// Nothing to read or no room to write yet (an interrupted call was already retried).
    static func isTransient(_ code: Int32) -> Bool {
        code == EAGAIN || code == EWOULDBLOCK
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
