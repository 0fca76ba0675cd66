// SPDX-License-Identifier: GPL-2.0-or-later
import BatonReadiness
import Dispatch
// CBluetooth includes <sys/socket.h>: depending on build order its clang module owns the socket
// constants (SHUT_RDWR, MSG_NOSIGNAL), so every file using them imports it too.
import CBluetooth
import Glibc
import Synchronization

/// All socket readiness handlers run here; they only record an outcome and resume a continuation.
let socketEventQueue = DispatchQueue(label: "baton.transport.sockets")

enum SocketReadiness: Sendable { case readable, writable }

enum WaitOutcome: Sendable { case ready, timedOut, cancelled }

/// A socket address as getaddrinfo returns it.
struct SocketAddress: Sendable {
    var storage = sockaddr_storage()
    var length: socklen_t = 0
    var family: Int32 { Int32(storage.ss_family) }

    func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        withUnsafeBytes(of: storage) { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    /// The port of an AF_INET or AF_INET6 address.
    var port: UInt16 {
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET: UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port)
            case AF_INET6: UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)
            default: 0
            }
        }
    }

    /// The local address of a bound socket.
    static func local(of socket: OwnedSocket) -> SocketAddress? {
        var address = SocketAddress()
        address.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = socket.withDescriptor { descriptor in
            withUnsafeMutableBytes(of: &address.storage) { raw in
                getsockname(descriptor, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &address.length)
            }
        }
        return status == 0 ? address : nil
    }

    /// The numeric host of a peer address as accept(2) filled it in, for logs.
    static func describe(peerAddress bytes: [UInt8]) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let status = bytes.withUnsafeBytes { raw in
            getnameinfo(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count), &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
        }
        return status == 0 ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    }

    /// Resolves `host`. Numeric addresses are parsed in place; names go through getaddrinfo on a
    /// private queue so the caller's thread never blocks on DNS. Not the global queue: on Linux it also
    /// runs Swift's cooperative executor, which a blocked thread would starve.
    static func resolve(host: String, port: UInt16, passive: Bool) async throws(TransportError) -> [SocketAddress] {
        if let numeric = try? lookup(host: host, port: port, passive: passive, numericOnly: true) {
            return numeric
        }
        let result: Result<[SocketAddress], TransportError> = await withCheckedContinuation { continuation in
            DispatchQueue(label: "baton.transport.resolver").async {
                do throws(TransportError) {
                    continuation.resume(returning: .success(try lookup(host: host, port: port, passive: passive, numericOnly: false)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    static func lookup(host: String, port: UInt16, passive: Bool, numericOnly: Bool) throws(TransportError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) | (numericOnly ? AI_NUMERICHOST : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw .addressUnavailable("\(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let source = entry.pointee.ai_addr, entry.pointee.ai_addrlen <= socklen_t(MemoryLayout<sockaddr_storage>.size),
               entry.pointee.ai_family == AF_INET || entry.pointee.ai_family == AF_INET6 {
                var address = SocketAddress()
                address.length = entry.pointee.ai_addrlen
                withUnsafeMutableBytes(of: &address.storage) { raw in
                    raw.baseAddress!.copyMemory(from: source, byteCount: Int(entry.pointee.ai_addrlen))
                }
                addresses.append(address)
            }
            cursor = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw .addressUnavailable("\(host): no IPv4 or IPv6 address") }
        return addresses
    }
}

extension OwnedSocket {
    /// A TCP socket with TCP_NODELAY (frames are small and latency matters).
    static func stream(family: Int32) throws(TransportError) -> OwnedSocket {
        let socket = try make(family: family, type: Int32(SOCK_STREAM.rawValue))
        socket.setOption(Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        return socket
    }

    /// A TCP socket listening on a numeric address, and its bound port (the ephemeral one for port 0).
    static func tcpListener(host: String, port: UInt16, backlog: Int32) throws(TransportError) -> (OwnedSocket, port: UInt16) {
        let address = try SocketAddress.lookup(host: host, port: port, passive: true, numericOnly: true)[0]
        let socket = try make(family: address.family, type: Int32(SOCK_STREAM.rawValue))
        socket.setOption(SOL_SOCKET, SO_REUSEADDR, 1)
        if address.family == AF_INET6 { socket.setOption(Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1) }
        try socket.bind(to: address)
        try socket.listen(backlog: backlog)
        guard let local = SocketAddress.local(of: socket) else { throw .socket(operation: "getsockname", errno: errno) }
        return (socket, local.port)
    }

    /// A TCP connection to `host`, trying its addresses in order until `deadline`.
    static func connectTCP(host: String, port: UInt16, until deadline: DispatchTime) async throws(TransportError) -> OwnedSocket {
        var lastError = TransportError.addressUnavailable(host)
        for address in try await SocketAddress.resolve(host: host, port: port, passive: false) {
            do {
                let socket = try stream(family: address.family)
                try await socket.connect(to: address, until: deadline)
                return socket
            } catch {
                lastError = error
                if error == .connectTimedOut { break }
            }
        }
        throw lastError
    }
}

/// Holds a waiter's outcome: the first of readiness, timeout or cancellation wins.
private final class WaitState: Sendable {
    let outcome = Mutex<WaitOutcome?>(nil)

    func settle(_ value: WaitOutcome) {
        outcome.withLock { if $0 == nil { $0 = value } }
    }
}

/// Dispatch sources are thread-safe objects; this wrapper only lets a cancellation handler reach one.
private struct SendableSource: @unchecked Sendable {
    let source: any DispatchSourceProtocol
}

/// Suspends until `descriptor` is readable or writable (or hung up), the deadline passes, or the task
/// is cancelled. Nothing blocks: a readiness source (BatonReadiness: never the socket itself in
/// libdispatch's epoll set, whose hang-up handling races) watches the socket. The continuation is
/// resumed from the source's cancel handler only, which dispatch runs after it stopped watching, so the
/// caller may close the descriptor as soon as this returns. `.cancelled` too when no source could be made.
/// A socket that is ready when the deadline passes is `.ready`, whichever event dispatch delivers first.
func waitForSocket(_ descriptor: Int32, _ readiness: SocketReadiness, until deadline: DispatchTime) async -> WaitOutcome {
    if Task.isCancelled { return .cancelled }
    let state = WaitState()
    let timer = SendableSource(source: DispatchSource.makeTimerSource(queue: socketEventQueue))
    let resumer = WaitResumer()
    guard let source = makeReadinessSource(
        watching: descriptor, for: readiness == .readable ? .readable : .writable, queue: socketEventQueue,
        onCancel: {
            timer.source.cancel()
            resumer.resume(state.outcome.withLock { $0 } ?? .cancelled)
        })
    else {
        timer.source.activate()
        timer.source.cancel()
        return .cancelled
    }
    let handle = SendableSource(source: source)
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<WaitOutcome, Never>) in
            resumer.set(continuation)
            handle.source.setEventHandler {
                state.settle(.ready)
                handle.source.cancel()
            }
            timer.source.setEventHandler {
                // At the deadline the socket is asked directly: a readiness the source did not
                // report (libdispatch on Linux, rarely, under many hang-ups at once) or has queued
                // behind this timer is still readiness, not a timeout.
                state.settle(isSocketReady(descriptor, readiness) ? .ready : .timedOut)
                handle.source.cancel()
            }
            (timer.source as? any DispatchSourceTimer)?.schedule(deadline: deadline)
            timer.source.activate()
            handle.source.activate()
        }
    } onCancel: {
        state.settle(.cancelled)
        handle.source.cancel()
    }
}

/// Whether `descriptor` is ready (or hung up, or in error) now, asked with a poll that does not wait.
func isSocketReady(_ descriptor: Int32, _ readiness: SocketReadiness) -> Bool {
    let wanted = readiness == .readable ? Int16(POLLIN) : Int16(POLLOUT)
    var entry = pollfd(fd: descriptor, events: wanted, revents: 0)
    guard poll(&entry, 1, 0) == 1 else { return false }
    return entry.revents & (wanted | Int16(POLLHUP) | Int16(POLLERR)) != 0
}

/// Hands the outcome to the continuation once both exist. The readiness source takes its cancel handler
/// at creation, before the continuation exists; the handler cannot run before activation (after `set`),
/// but the hand-over does not depend on that order.
private final class WaitResumer: Sendable {
    private struct Slots {
        var continuation: CheckedContinuation<WaitOutcome, Never>?
        var outcome: WaitOutcome?
    }
    private let slots = Mutex(Slots())

    func set(_ continuation: CheckedContinuation<WaitOutcome, Never>) {
        let ready = slots.withLock { slots -> WaitOutcome? in
            slots.continuation = continuation
            return slots.outcome
        }
        if let ready { continuation.resume(returning: ready) }
    }

    func resume(_ outcome: WaitOutcome) {
        let waiting = slots.withLock { slots -> CheckedContinuation<WaitOutcome, Never>? in
            slots.outcome = outcome
            return slots.continuation
        }
        waiting?.resume(returning: outcome)
    }
}

extension Duration {
    /// The dispatch time this far from now; negative durations count as zero.
    var deadlineFromNow: DispatchTime {
        let (seconds, attoseconds) = components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        return .now() + .nanoseconds(Int(clamping: nanoseconds))
    }
}
