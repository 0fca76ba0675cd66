internal import CDBus
import Dispatch
import Glibc

/// Keeps messages over a size limit away from libdbus.
///
/// Why: libdbus reads a whole message into its buffer and then copies it into the `DBusMessage`
/// before any callback can look at it, so one hostile 31 MB call costs about 62 MB at its peak, and
/// its only size limit (`dbus_connection_set_max_message_size`) drops the whole bus connection.
/// The gate sits between the bus socket and libdbus: right after the connection is opened (before
/// any byte is exchanged) libdbus's descriptor is replaced by one end of a socket pair, and a
/// thread relays both directions. Authentication passes through untouched; after `BEGIN`, the
/// bus's stream is framed (`IncomingMessageFramer`) and a message over the limit is skipped while
/// it streams in; a method call among them is reported so the connection can answer it.
final class IncomingMessageGate: @unchecked Sendable {
    /// Where reports of refused messages go; attached once the connection exists.
    final class Sink: @unchecked Sendable {
        private let lock = DispatchQueue(label: "baton.dbus.gate-sink")
        private var handler: (@Sendable (OversizedMessage) -> Void)?
        func attach(_ handler: @escaping @Sendable (OversizedMessage) -> Void) { lock.sync { self.handler = handler } }
        func deliver(_ message: OversizedMessage) { lock.sync { handler }?(message) }
    }

    let limit: Int
    let sink = Sink()
    private let busSocket: Int32
    private let librarySocket: Int32

    // Confined to the relay thread.
    private var framer: IncomingMessageFramer
    private var toLibrary = Outbox()
    private var toBus = Outbox()
    private var authenticated = false
    private var authenticationLine: [UInt8] = []

    private init(busSocket: Int32, librarySocket: Int32, limit: Int) {
        self.busSocket = busSocket
        self.librarySocket = librarySocket
        self.limit = limit
        self.framer = IncomingMessageFramer(limit: limit)
    }

    /// Puts a gate in front of `descriptor`, libdbus's freshly connected socket, and starts relaying.
    static func install(onLibrarySocket descriptor: Int32, limit: Int) throws(DBusError) -> IncomingMessageGate {
        let bus = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard bus >= 0 else { throw .failed("cannot duplicate the bus socket: errno \(errno)") }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            _ = close(bus)
            throw .failed("cannot make the gate's socket pair: errno \(errno)")
        }
        for socket in [bus, pair[0], pair[1]] { _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK) }
        // libdbus keeps its descriptor number (its watches are registered under it) but now reads the pair.
        guard dup2(pair[0], descriptor) == descriptor, fcntl(descriptor, F_SETFD, FD_CLOEXEC) == 0 else {
            for socket in [bus, pair[0], pair[1]] { _ = close(socket) }
            throw .failed("cannot install the gate: errno \(errno)")
        }
        _ = close(pair[0])
        let gate = IncomingMessageGate(busSocket: bus, librarySocket: pair[1], limit: limit)
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attributes, 256 << 10)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(gate).toOpaque()
        guard pthread_create(&thread, &attributes, { context in
            Unmanaged<IncomingMessageGate>.fromOpaque(context!).takeRetainedValue().relay()
            return nil
        }, context) == 0 else {
            Unmanaged<IncomingMessageGate>.fromOpaque(context).release()
            // libdbus now holds an unconnected end: closing ours makes it see a hang-up.
            _ = close(bus)
            _ = close(pair[1])
            throw .failed("cannot start the gate's thread")
        }
        return gate
    }

    /// Until either side closes: libdbus closing its end (connection closed) or the bus going away.
    private func relay() {
        // Small: every connection of the daemon has a gate, and a skipped message only costs reads.
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var descriptors = [Int32](repeating: -1, count: 256)
        var polls = [pollfd(fd: busSocket, events: 0, revents: 0), pollfd(fd: librarySocket, events: 0, revents: 0)]
        let readable = Int16(POLLIN), writable = Int16(POLLOUT), broken = Int16(POLLHUP | POLLERR)
        while true {
            // Backpressure: read a side only while what it sent before has been passed on.
            polls[0].events = (toLibrary.isEmpty ? readable : 0) | (toBus.isEmpty ? 0 : writable)
            polls[1].events = (toBus.isEmpty ? readable : 0) | (toLibrary.isEmpty ? 0 : writable)
            polls[0].revents = 0
            polls[1].revents = 0
            if poll(&polls, 2, -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            if polls[0].revents & (readable | broken) != 0, !readFromBus(&buffer, &descriptors) { break }
            if polls[1].revents & (readable | broken) != 0, !readFromLibrary(&buffer, &descriptors) { break }
            guard toLibrary.flush(to: librarySocket), toBus.flush(to: busSocket) else { break }
        }
        toLibrary.discard()
        toBus.discard()
        _ = close(busSocket)
        _ = close(librarySocket)
    }

    /// False when the side is gone (end of stream or an error other than "try again").
    private static func receive(_ socket: Int32, _ buffer: inout [UInt8], _ descriptors: inout [Int32]) -> (Int, [Int32])? {
        var count: Int32 = 0
        let received = buffer.withUnsafeMutableBytes { bytes in
            descriptors.withUnsafeMutableBufferPointer { fds in
                baton_recv_with_fds(socket, bytes.baseAddress, bytes.count, fds.baseAddress, Int32(fds.count), &count)
            }
        }
        if received < 0 { return errno == EAGAIN || errno == EINTR ? (0, []) : nil }
        return received == 0 ? nil : (received, Array(descriptors[0..<Int(count)]))
    }

    private func readFromBus(_ buffer: inout [UInt8], _ descriptors: inout [Int32]) -> Bool {
        guard let (count, received) = IncomingMessageGate.receive(busSocket, &buffer, &descriptors) else { return false }
        guard count > 0 else { return true }
        guard authenticated else {
            toLibrary.append(Array(buffer[0..<count]), descriptors: received)
            return true
        }
        let output = buffer.withUnsafeBytes { framer.consume(UnsafeRawBufferPointer(rebasing: $0[0..<count]), descriptors: received) }
        toLibrary.append(output.forward, descriptors: output.forwardDescriptors)
        for descriptor in output.closeDescriptors { _ = close(descriptor) }
        for message in output.refused { sink.deliver(message) }
        return true
    }

    private func readFromLibrary(_ buffer: inout [UInt8], _ descriptors: inout [Int32]) -> Bool {
        guard let (count, received) = IncomingMessageGate.receive(librarySocket, &buffer, &descriptors) else { return false }
        guard count > 0 else { return true }
        if !authenticated { watchForBegin(buffer[0..<count]) }
        toBus.append(Array(buffer[0..<count]), descriptors: received)
        return true
    }

    /// The client's `BEGIN` line ends the text protocol: the bus sends binary only after it, and
    /// every text reply before it was already relayed (libdbus waits for each before going on).
    private func watchForBegin(_ bytes: ArraySlice<UInt8>) {
        for byte in bytes {
            authenticationLine.append(byte)
            if byte == UInt8(ascii: "\n") {
                if authenticationLine == Array("BEGIN\r\n".utf8) {
                    authenticated = true
                    return
                }
                authenticationLine = []
            } else if authenticationLine.count > 16 << 10 {
                authenticationLine = []
            }
        }
    }
}

/// Bytes waiting for a nonblocking socket, with the descriptors that travel with their first byte.
private struct Outbox {
    private var chunks: [(bytes: [UInt8], sent: Int, descriptors: [Int32])] = []
    private var carried: [Int32] = []

    var isEmpty: Bool { chunks.isEmpty }

    mutating func append(_ bytes: [UInt8], descriptors: [Int32]) {
        guard !bytes.isEmpty else {
            carried += descriptors  // they go with the next bytes: early is fine, libdbus takes them in order
            return
        }
        chunks.append((bytes, 0, carried + descriptors))
        carried = []
    }

    /// False on an error other than "try again" (the peer is gone).
    mutating func flush(to socket: Int32) -> Bool {
        while let first = chunks.first {
            let written = first.bytes.withUnsafeBytes { bytes in
                first.descriptors.withUnsafeBufferPointer { fds in
                    baton_send_with_fds(socket, bytes.baseAddress! + first.sent, bytes.count - first.sent,
                                        fds.baseAddress, Int32(fds.count))
                }
            }
            if written < 0 { return errno == EAGAIN || errno == EINTR }
            for descriptor in first.descriptors { _ = close(descriptor) }  // the kernel passed its own copies
            chunks[0].descriptors = []
            chunks[0].sent += written
            if chunks[0].sent == first.bytes.count { chunks.removeFirst() }
        }
        return true
    }

    mutating func discard() {
        for chunk in chunks { for descriptor in chunk.descriptors { _ = close(descriptor) } }
        for descriptor in carried { _ = close(descriptor) }
        chunks = []
        carried = []
    }
}
