// SPDX-License-Identifier: LGPL-2.1-or-later
internal import CBusSocket
import BatonReadiness
import BatonSystem
import Dispatch
import Glibc

/// The I/O shell of one bus connection: its socket, the readiness sources that read and write it,
/// timers, tasks and continuations. The protocol's decisions are pure value types it holds and
/// performs: `ReplyBook` (serials, calls awaiting replies), `Outbox` (what is not yet written),
/// `Backpressure` (when to read, dispatch and hold calls), `CallAdmission` (which incoming calls
/// are served and when their handlers start), `SignalRoutes` (subscriptions, owners of names) and
/// `ObjectRegistry` (exported objects). Every method that touches the mutable fields runs on
/// `queue` (public entry points hop there with `onQueue`), which is what makes `@unchecked
/// Sendable` sound.
///
/// BatonDBus speaks the protocol itself (no libdbus): reading is driven by a readiness source on
/// the socket, each read is framed (`IncomingMessageStream`: a message over the limit is skipped
/// as it streams in, never buffered), and whole messages are dispatched in arrival order. Writing
/// goes straight to the socket and waits for room only when the socket is full.
final class ConnectionCore: @unchecked Sendable {
    let queue: DispatchQueue
    private let queueKey = DispatchSpecificKey<Bool>()
    let uniqueName: String
    /// The limits of this connection (and what to call when memory may be given back).
    let configuration: DBusConnectionConfiguration
    /// The bus socket's number, lent by `ownedSocket` (valid until the connection ends).
    private let socket: Int32
    /// Whether the bus agreed to pass descriptors (NEGOTIATE_UNIX_FD).
    let passesDescriptors: Bool
    /// Which descriptors of an incoming call reach its handler.
    let incomingDescriptors: DBusDescriptorPolicy

    // Queue-confined state.
    var isClosed = false
    private var dispatchDepth = 0
    private var stream: IncomingMessageStream
    private var streamBroken = false
    var replies = ReplyBook<PendingReply>()
    private var outbox = Outbox()
    private var pressure: Backpressure
    var admission: CallAdmission<PendingHandler>
    var routes = ConnectionRoutes()
    var registry = ObjectRegistry()
    private var readSource: (any DispatchSourceRead)?
    /// Made with the read source and kept, suspended while nothing waits for room: making one when
    /// the socket fills could fail at the descriptor limit, and then nothing would ever flush again.
    private var writeSource: (any DispatchSourceRead)?
    private var waitingForRoom = false
    /// The socket closes when the connection and every readiness source watching it let go.
    private var socketHolders = 1
    /// The bus socket's one owner; closed (and nil) once `socketHolders` reaches 0.
    private var ownedSocket: FileDescriptor?

    init(bus: DBusBusKind, configuration: DBusConnectionConfiguration = DBusConnectionConfiguration(),
         incomingDescriptors: DBusDescriptorPolicy = .handlerOwnsAll) throws(DBusError) {
        let address = try BusSocket.address(of: bus)
        guard !address.isEmpty, !address.utf8.contains(0) else { throw .invalidArgs("invalid bus address") }
        let connected = try BusSocket.open(address)
        let socket = connected.socket.rawValue
        let passesDescriptors = connected.unixFDs
        var stream = IncomingMessageStream(limit: configuration.incomingLimit, replyLimit: configuration.replyLimit)
        let hello: (name: String, early: [DBusMessage])
        do throws(DBusError) {
            hello = try BusHello.sayHello(on: socket, stream: &stream)
        } catch {
            stream.discard()
            // `connected` goes here, closing the socket.
            throw error
        }
        _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK)
        self.socket = socket
        ownedSocket = consume connected.socket
        self.passesDescriptors = passesDescriptors
        self.incomingDescriptors = incomingDescriptors
        self.stream = stream
        self.configuration = configuration
        pressure = Backpressure(configuration: configuration)
        admission = CallAdmission(configuration: configuration)
        uniqueName = hello.name
        queue = DispatchQueue(label: "baton.dbus.\(uniqueName)")
        queue.setSpecific(key: queueKey, value: true)
        let early = hello.early
        let watching = queue.sync { () -> Bool in
            guard let source = makeReadinessSource(watching: socket, for: .readable, queue: queue, onCancel: { [self] in releaseSocket() }) else {
                self.stream.discard()
                isClosed = true
                releaseSocket()
                return false
            }
            socketHolders += 1
            guard let roomSource = makeReadinessSource(watching: socket, for: .writable, queue: queue, onCancel: { [self] in releaseSocket() }) else {
                source.setEventHandler {}
                source.activate()
                source.cancel()
                self.stream.discard()
                isClosed = true
                releaseSocket()
                return false
            }
            socketHolders += 1
            roomSource.setEventHandler { [weak self] in
                guard let self, !self.isClosed else { return }
                self.flush()
            }
            // Activated and suspended at once (on the queue, so its handler cannot run in between).
            roomSource.activate()
            roomSource.suspend()
            writeSource = roomSource
            source.setEventHandler { [weak self] in self?.readAvailable() }
            source.activate()
            readSource = source
            // Messages that came with Hello's reply (NameAcquired, early calls) go first.
            for message in early { dispatch(message) }
            return true
        }
        guard watching else { throw .failed("cannot watch the bus socket (descriptor limit?)") }
    }

    var isOnQueue: Bool { DispatchQueue.getSpecific(key: queueKey) == true }

    /// The bus socket, while connected (tests use it to spot descriptor reuse).
    var socketDescriptor: Int32? { onQueue { isClosed ? nil : socket } }

    /// Runs `body` on the connection queue, inline if already there (handlers may call back in).
    func onQueue<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        if isOnQueue { return try body() }
        let result: Result<T, Failure> = queue.sync { Result { () throws(Failure) -> T in try body() } }
        return try result.get()
    }

    private func releaseSocket() {
        socketHolders -= 1
        if socketHolders == 0 { ownedSocket.take()?.close() }
    }

    /// Bytes in the outbox not yet written.
    var outboxBytes: Int { outbox.bytes }
    var outboxIsFull: Bool { pressure.isFull(outbox.bytes) }
    private var load: Backpressure.Load { Backpressure.Load(outboxBytes: outbox.bytes, awaitingReplies: replies.isAwaitingReplies) }

    // MARK: - Reading

    /// Reads what the socket holds (a bounded number of reads, so other queue work interleaves; the
    /// source fires again while more is there) and dispatches every whole message.
    private func readAvailable() {
        guard !isClosed, !streamBroken else { return }
        guard !pressure.mustPauseReading(load) else { return updateReading() }
        let size = 64 << 10
        var buffer = [UInt8](unsafeUninitializedCapacity: size) { _, count in count = size }
        var room = [Int32](repeating: -1, count: 256)
        for _ in 0..<8 {
            guard let (count, descriptors) = BusSocket.receive(socket, into: &buffer, descriptors: &room) else {
                closeOnQueue()
                return
            }
            guard count > 0 else { break }
            let refused = buffer.withUnsafeBytes { stream.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count]), descriptors: descriptors) }
            for message in refused { refuseOversized(message) }
            dispatchQueued()
            if isClosed || streamBroken || count < size || pressure.mustPauseReading(load) { break }
        }
        updateReading()
    }

    /// Suspends or resumes the read source as `Backpressure` decides.
    func updateReading() {
        guard !isClosed, let readSource else { return }
        switch pressure.updateReading(load) {
        case .pause: readSource.suspend()
        case .resume: readSource.resume()
        case .none: break
        }
    }

    /// Dispatches whole messages received, 64 at a time (then again later, so other work interleaves).
    private func dispatchQueued() {
        guard dispatchDepth == 0 else { return }
        var budget = 64
        pressure.beginDispatch()
        while !isClosed, !streamBroken {
            switch pressure.nextStep(load) {
            case .dispatch(let message):
                dispatch(message)
            case .waitForOutbox:
                // Resumed from `flush` once the bus has taken enough of what is queued.
                updateReading()
                return
            case .receive(let holdingCalls):
                guard let message = nextReceived() else { return }
                if pressure.holds(message, holdingCalls: holdingCalls) { pressure.hold(message) } else { dispatch(message) }
            }
            budget -= 1
            if budget == 0 {
                pressure.deferDispatch()
                updateReading()
                queue.async { [weak self] in
                    guard let self else { return }
                    self.dispatchQueued()
                    self.updateReading()
                }
                return
            }
        }
    }

    /// Dispatches what was received (replies first reach their calls) and resumes reading, after
    /// one of our calls was sent while reading was paused for a full outbox.
    func resumeForReplies() {
        guard !isClosed, pressure.readingPaused else { return }
        dispatchQueued()
        updateReading()
    }

    /// The next whole message received, nil when none is (or the stream broke: closing then).
    private func nextReceived() -> DBusMessage? {
        let message: DBusMessage?
        do {
            message = try stream.next()
            if !stream.malformed.isEmpty { for attempt in stream.takeMalformed() { refuseMalformed(attempt) } }
        } catch {
            // What the bus sent is not D-Bus: nothing later can be trusted to be framed right.
            streamBroken = true
            queue.async { self.closeOnQueue() }
            return nil
        }
        return message
    }

    private func dispatch(_ message: DBusMessage) {
        dispatchDepth += 1
        defer { dispatchDepth -= 1 }
        switch message.kind {
        case .methodReturn, .error:
            // Late or forged replies end nothing.
            replies.takeCall(endedBy: message.replySerial, from: message.sender, isError: message.kind == .error)?
                .finish(message.callResult)
        case .signal:
            filter(message)
        case .methodCall:
            handleObjectMessage(message)
        case .unknown:
            break
        }
    }

    var isDispatching: Bool { dispatchDepth > 0 }

    // MARK: - Writing

    /// Sends `message` with `body` (validated here) and returns its serial. Must run on the queue.
    @discardableResult
    func send(_ message: inout DBusMessage, body: [DBusValue]) throws(DBusError) -> UInt32 {
        guard !isClosed else { throw .disconnected() }
        try DBusValidate.arguments(body)
        message.serial = replies.takeSerial()
        let (bytes, descriptors) = try message.encoded(body: body)
        guard descriptors.isEmpty || passesDescriptors else {
            DescriptorNumbers.close(descriptors)
            throw .failed("the bus does not pass file descriptors on this connection")
        }
        enqueue(bytes, descriptors: descriptors)
        return message.serial
    }

    /// Queues bytes already encoded (the descriptors travel with their first bytes, then are closed).
    func enqueue(_ bytes: [UInt8], descriptors: [Int32]) {
        if outbox.append(bytes, descriptors: descriptors) { flush() }
    }

    private enum FlushResult { case done, blocked, broken }

    private func writeOut() -> FlushResult {
        while let first = outbox.front {
            guard let written = BusSocket.send(socket, first.bytes, from: first.sent, descriptors: first.descriptors) else { return .broken }
            guard written > 0 else { return .blocked }
            // The kernel passed its own copies with the first bytes.
            DescriptorNumbers.close(outbox.sent(written))
        }
        return .done
    }

    /// Writes what the socket takes; waits for room with a writable source while it is full.
    private func flush() {
        defer {
            if pressure.isDrained(outbox.bytes), admission.hasWaiting { startWaitingHandlers() }
            switch pressure.afterWrite(outboxBytes: outbox.bytes) {
            case .dispatchThenUpdateReading: queue.async { [weak self] in self?.dispatchQueued(); self?.updateReading() }
            case .updateReading: updateReading()
            case .none: break
            }
        }
        switch writeOut() {
        case .done:
            if waitingForRoom {
                waitingForRoom = false
                writeSource?.suspend()
            }
        case .blocked:
            if !waitingForRoom {
                waitingForRoom = true
                writeSource?.resume()
            }
        case .broken:
            queue.async { self.closeOnQueue() }
        }
    }

    // MARK: - Closing

    /// Closes the connection (idempotent). Must run on the queue, never inside dispatch.
    func closeOnQueue() {
        guard !isClosed else { return }
        if isDispatching {
            queue.async { self.closeOnQueue() }
            return
        }
        isClosed = true
        let (closing, waiters) = routes.close()
        for subscription in closing { subscription.onClose?() }
        for waiter in waiters { waiter.resume() }
        for reply in replies.takeAll() { reply.finish(.failure(DBusError.disconnected())) }
        registry.removeAll()
        for handler in admission.close() { handler.discard() }
        // Calls held unanswered (their descriptors close with them); a paused source must be
        // resumed before it is cancelled and released.
        let reading = pressure.close()
        // What is queued (replies, a last signal) still goes, for up to a second.
        let deadline = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
        while !outbox.isEmpty, writeOut() == .blocked {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { break }
            var poll = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            _ = Glibc.poll(&poll, 1, Int32((deadline - now) / 1_000_000) + 1)
        }
        DescriptorNumbers.close(outbox.removeAll())
        stream.discard()
        // The readiness sources hold the socket until dispatch cancels them; shutting it down now
        // lets the bus see the disconnect (and free names) at once.
        _ = shutdown(socket, Int32(SHUT_RDWR))
        if reading == .resume { readSource?.resume() }
        readSource?.cancel()
        readSource = nil
        if let writeSource {
            if !waitingForRoom { writeSource.resume() }
            waitingForRoom = false
            writeSource.cancel()
        }
        writeSource = nil
        releaseSocket()
    }
}
