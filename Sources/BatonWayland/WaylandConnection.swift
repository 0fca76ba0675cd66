// SPDX-License-Identifier: GPL-2.0-or-later
import BatonSystem
internal import CBusSocket
import Glibc

/// One client connection to the compositor's socket: bytes and descriptors both ways, messages
/// split and checked (`WaylandInbox`), object ids handed out and reused once the compositor
/// confirmed their deletion. `@unchecked Sendable`: not thread-safe, its owner uses it from one
/// queue only (the readiness source's cancel handler, which closes it, runs on that queue too).
final class WaylandConnection: @unchecked Sendable {
    let socket: Int32
    private var inbox = WaylandInbox()
    /// Descriptors received and not yet taken by the event they travel with.
    private var received: [Int32] = []
    /// Requests not yet written (the socket was full), and the descriptors that go with them; the
    /// descriptors are this connection's until sent, then closed here.
    private var outgoing: [UInt8] = []
    private var outgoingDescriptors: [Int32] = []
    private var nextID: UInt32 = 2  // 1 is wl_display
    private var freeIDs: [UInt32] = []
    private(set) var isClosed = false

    /// Descriptors received ahead of their events, at most (a compositor's events take one each).
    static let maximumPendingDescriptors = 64
    /// Requests waiting for room in the socket, at most: a compositor that stops reading for this
    /// long is treated as gone.
    static let maximumOutgoingBytes = 1 << 20
    /// The kernel's and libwayland's bound on descriptors in one sendmsg (libwayland sends 28).
    private static let descriptorsPerSend = 28

    private init(socket: Int32) { self.socket = socket }

    /// Connects to the socket `WAYLAND_DISPLAY` names: an absolute path, or a name in
    /// `XDG_RUNTIME_DIR`. `WAYLAND_SOCKET` (a descriptor handed over by the parent) is not used.
    static func connect(environment: [String: String]) throws(WaylandUnavailable) -> WaylandConnection {
        guard let display = environment["WAYLAND_DISPLAY"], !display.isEmpty else { throw WaylandUnavailable(.noDisplay) }
        let path: String
        if display.hasPrefix("/") {
            path = display
        } else {
            guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else {
                throw WaylandUnavailable(.cannotConnect("XDG_RUNTIME_DIR is not set, so the socket of WAYLAND_DISPLAY=\(display) cannot be found"))
            }
            path = runtime + "/" + display
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw WaylandUnavailable(.cannotConnect("the Wayland socket path \(path) is too long"))
        }
        withUnsafeMutableBytes(of: &address.sun_path) { room in
            for (index, byte) in pathBytes.enumerated() { room[index] = byte }
        }
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw WaylandUnavailable(.cannotConnect("cannot create a socket (\(String(cString: strerror(errno))))")) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            closeDescriptor(descriptor)
            throw WaylandUnavailable(.cannotConnect("cannot connect to the Wayland compositor at \(path) (\(reason)); is it running?"))
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        return WaylandConnection(socket: descriptor)
    }

    // MARK: - Ids

    /// A fresh id for a new object of this client: the lowest the compositor confirmed free, else
    /// the next (the compositor accepts a new id only where the table ends or a freed slot is).
    func newID() -> UInt32 {
        if let reused = freeIDs.popLast() { return reused }
        defer { nextID += 1 }
        return nextID
    }

    /// The compositor's delete_id: the id may be given to a new object.
    func release(_ id: UInt32) {
        guard id > 1, id < nextID, !freeIDs.contains(id) else { return }
        freeIDs.append(id)
    }

    // MARK: - Writing

    /// Queues a request (its descriptors now belong to the connection) and writes what the socket
    /// takes: `.blocked` when some waits for the socket to be writable, `.failed` when the
    /// connection cannot go on (closed, or the compositor stopped reading).
    @discardableResult
    func send(_ request: WaylandRequest) -> FlushResult {
        guard !isClosed, let bytes = request.bytes else {
            for descriptor in request.descriptors { closeDescriptor(descriptor) }
            return .failed
        }
        if outgoingDescriptors.count + request.descriptors.count > Self.descriptorsPerSend, !flushAll() {
            for descriptor in request.descriptors { closeDescriptor(descriptor) }
            return .failed
        }
        outgoing.append(contentsOf: bytes)
        outgoingDescriptors.append(contentsOf: request.descriptors)
        guard outgoing.count <= Self.maximumOutgoingBytes else { return .failed }
        return flush()
    }

    enum FlushResult { case done, blocked, failed }

    /// Writes what the socket takes now; `.blocked` when bytes remain (wait until it is writable).
    func flush() -> FlushResult {
        while !outgoing.isEmpty {
            let sent = outgoing.withUnsafeBytes { bytes in
                outgoingDescriptors.withUnsafeBufferPointer { descriptors in
                    retryingInterrupts {
                        baton_send_with_fds(socket, bytes.baseAddress, bytes.count, descriptors.baseAddress, Int32(descriptors.count))
                    }
                }
            }
            if sent < 0 { return errno == EAGAIN || errno == EWOULDBLOCK ? .blocked : .failed }
            // The descriptors went with the first byte; ours are copies the kernel made for the peer.
            for descriptor in outgoingDescriptors { closeDescriptor(descriptor) }
            outgoingDescriptors.removeAll()
            outgoing.removeFirst(sent)
        }
        return .done
    }

    /// Writes everything, waiting for room at most 15 s in all (init, and a batch of descriptors
    /// beyond what one sendmsg carries).
    private func flushAll() -> Bool {
        let deadline = ContinuousClock.now + .seconds(15)
        while true {
            switch flush() {
            case .done: return true
            case .failed: return false
            case .blocked:
                // An interrupted poll comes back here and waits for what is left.
                guard let left = milliseconds(until: deadline) else { return false }
                var entry = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
                guard poll(&entry, 1, left) >= 0 || errno == EINTR else { return false }
            }
        }
    }

    // MARK: - Reading

    enum ReceiveResult: Equatable { case received, wouldBlock, closed(String) }

    /// One recvmsg: bytes into the inbox, descriptors into the queue of received ones.
    func receive() -> ReceiveResult {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var descriptors = [Int32](repeating: -1, count: 32)
        var count: Int32 = 0
        var truncated: Int32 = 0
        let length = buffer.withUnsafeMutableBytes { bytes in
            retryingInterrupts {
                baton_recv_with_fds(socket, bytes.baseAddress, bytes.count, &descriptors, Int32(descriptors.count), &count, &truncated)
            }
        }
        received.append(contentsOf: descriptors.prefix(Int(count)))
        if length < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
            return .closed("the connection to the Wayland compositor failed (\(String(cString: strerror(errno))))")
        }
        guard length > 0 else { return .closed("the Wayland compositor closed the connection") }
        guard truncated == 0 else { return .closed("descriptors from the Wayland compositor were lost (descriptor limit?)") }
        guard received.count <= Self.maximumPendingDescriptors else {
            return .closed("the Wayland compositor sent descriptors without events")
        }
        buffer.withUnsafeBytes { inbox.append(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        return .received
    }

    func nextMessage() throws(WaylandWireError) -> WaylandMessage? { try inbox.next() }

    /// The descriptor that travels with the event being parsed (the oldest received).
    func takeDescriptor() throws(WaylandWireError) -> Int32 {
        guard !received.isEmpty else { throw .missingDescriptor }
        return received.removeFirst()
    }

    /// Waits up to `milliseconds` for the socket to be readable (init's round trips only). True
    /// also when a signal interrupted the wait: the caller reads (nothing, maybe) and waits again
    /// for what is left of its time.
    func waitReadable(milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, milliseconds)
        return ready > 0 || (ready < 0 && errno == EINTR)
    }

    /// Writes what is queued, waiting for room (init's round trips only).
    func flushBlocking() -> Bool { flushAll() }

    /// Closes every descriptor held, the socket last.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        for descriptor in received + outgoingDescriptors { closeDescriptor(descriptor) }
        received.removeAll()
        outgoingDescriptors.removeAll()
        outgoing.removeAll()
        closeDescriptor(socket)
    }
}

/// Closes a descriptor this module owns, through BatonSystem (no module outside it calls close(2)).
func closeDescriptor(_ descriptor: Int32) { FileDescriptor(taking: descriptor).close() }

/// The milliseconds left until `deadline`, nil when it passed.
func milliseconds(until deadline: ContinuousClock.Instant) -> Int32? {
    let left = ContinuousClock.now.duration(to: deadline)
    let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
    return milliseconds > 0 ? Int32(clamping: milliseconds) : nil
}
