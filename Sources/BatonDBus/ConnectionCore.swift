// SPDX-License-Identifier: LGPL-2.1-or-later
internal import CBusSocket
import BatonReadiness
import Dispatch
import Glibc

/// All state of one bus connection: its socket, the messages coming in and going out, calls
/// awaiting replies, subscriptions and exported objects. Every method that touches the mutable
/// fields runs on `queue` (public entry points hop there with `onQueue`), which is what makes
/// `@unchecked Sendable` sound.
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
    private let socket: Int32
    /// Whether the bus agreed to pass descriptors (NEGOTIATE_UNIX_FD).
    let passesDescriptors: Bool
    /// Which descriptors of an incoming call reach its handler.
    let incomingDescriptors: DBusDescriptorPolicy

    // Queue-confined state.
    var isClosed = false
    private var dispatchDepth = 0
    private var nextID: UInt64 = 1
    private var nextSerial: UInt32 = 2  // 1 was Hello
    private var stream: IncomingMessageStream
    private var streamBroken = false
    /// Messages not yet written, oldest at `outboxHead` (entries before it are sent; taking one is O(1)).
    private var outbox: [(bytes: [UInt8], sent: Int, descriptors: [Int32])] = []
    private var outboxHead = 0
    /// Bytes in the outbox not yet written.
    private(set) var outboxBytes = 0
    /// Reading is paused while the outbox is over `outboxHighWater` (the bus takes our replies slower
    /// than callers ask for them) and none of our own calls waits for a reply, or while received
    /// messages wait to be dispatched.
    private var readingPaused = false
    /// Incoming calls read while the outbox is over the high mark (to reach replies to our own
    /// calls behind them), oldest at `heldHead`; dispatched in order once it drains.
    private var held: [DBusMessage] = []
    private var heldHead = 0
    private(set) var heldBytes = 0
    private var dispatchPending = false
    private var readSource: (any DispatchSourceRead)?
    /// Made with the read source and kept, suspended while nothing waits for room: making one when
    /// the socket fills could fail at the descriptor limit, and then nothing would ever flush again.
    private var writeSource: (any DispatchSourceRead)?
    private var waitingForRoom = false
    /// The socket closes when the connection and every readiness source watching it let go.
    private var socketHolders = 1
    var subscriptions: [UInt64: Subscription] = [:]
    var wellKnownOwners: [String: String] = [:]
    var ownerTracking: [String: OwnerTracking] = [:]
    var inflight: [UInt32: PendingReply] = [:]
    var objects: [String: ExportedObject] = [:]
    var objectManagerRoots: Set<String> = []
    /// Handlers of incoming calls not yet answered, and the most at once since the last trim.
    var handlersRunning = 0
    var mostHandlersRunning = 0
    /// Handlers not yet answered (running or waiting), by the caller's unique name.
    var handlersBySender: [String: Int] = [:]
    var runningBySender: [String: Int] = [:]
    var waitingBySender: [String: [PendingHandler]] = [:]

    init(bus: DBusBusKind, configuration: DBusConnectionConfiguration = DBusConnectionConfiguration(),
         incomingDescriptors: DBusDescriptorPolicy = .handlerOwnsAll) throws(DBusError) {
        let address = try BusSocket.address(of: bus)
        guard !address.isEmpty, !address.utf8.contains(0) else { throw .invalidArgs("invalid bus address") }
        let (socket, passesDescriptors) = try BusSocket.open(address)
        var stream = IncomingMessageStream(limit: configuration.incomingLimit, replyLimit: configuration.replyLimit)
        let hello: (name: String, early: [DBusMessage])
        do throws(DBusError) {
            hello = try ConnectionCore.sayHello(on: socket, stream: &stream)
        } catch {
            stream.discard()
            _ = close(socket)
            throw error
        }
        _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK)
        self.socket = socket
        self.passesDescriptors = passesDescriptors
        self.incomingDescriptors = incomingDescriptors
        self.stream = stream
        self.configuration = configuration
        uniqueName = hello.name
        queue = DispatchQueue(label: "baton.dbus.\(uniqueName)")
        queue.setSpecific(key: queueKey, value: true)
        let early = hello.early
        let watching = queue.sync { () -> Bool in
            guard let source = makeReadinessSource(watching: socket, for: .readable, queue: queue, onCancel: { [self] in releaseSocket() }) else {
                self.stream.discard()
                _ = close(socket)
                isClosed = true
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

    /// Sends `Hello` and waits for its reply (the one blocking step), keeping whatever else arrives.
    private static func sayHello(on socket: Int32, stream: inout IncomingMessageStream) throws(DBusError) -> (String, [DBusMessage]) {
        var hello = DBusMessage.busCall("Hello")
        hello.serial = 1
        let (bytes, _) = try hello.encoded(body: [])
        var offset = 0
        while offset < bytes.count {
            guard let written = BusSocket.send(socket, bytes, from: offset, descriptors: []), written > 0 else {
                throw .disconnected("the bus closed the connection before Hello")
            }
            offset += written
        }
        var early: [DBusMessage] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var room = [Int32](repeating: -1, count: 256)
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(BusSocket.handshakeTimeoutSeconds) * 1_000_000_000
        while true {
            while let message = try stream.next() {
                // Nobody knows our name before Hello's reply: no call to answer, nothing of ours to end.
                _ = stream.takeMalformed()
                guard message.replySerial == 1 else {
                    early.append(message)
                    continue
                }
                let result = ConnectionCore.result(of: message)
                guard case .success(let values) = result, let name = values.first?.stringValue, DBusNames.isValidBusName(name.utf8) else {
                    if case .failure(let error as DBusError) = result { throw error }
                    throw .failed("unexpected reply to Hello")
                }
                return (name, early)
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { throw DBusError(name: DBusError.noReplyName, message: "no reply to Hello from the bus") }
            var poll = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            _ = Glibc.poll(&poll, 1, Int32((deadline - now) / 1_000_000) + 1)
            guard let (count, descriptors) = BusSocket.receive(socket, into: &buffer, descriptors: &room) else {
                throw .disconnected("the bus closed the connection before answering Hello")
            }
            guard count > 0 else { continue }
            _ = buffer.withUnsafeBytes { stream.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count]), descriptors: descriptors) }
        }
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

    func makeID() -> UInt64 {
        defer { nextID += 1 }
        return nextID
    }

    private func releaseSocket() {
        socketHolders -= 1
        if socketHolders == 0 { _ = close(socket) }
    }

    // MARK: - Reading

    /// Reads what the socket holds (a bounded number of reads, so other queue work interleaves; the
    /// source fires again while more is there) and dispatches every whole message.
    private func readAvailable() {
        guard !isClosed, !streamBroken else { return }
        guard !mustPauseReading else { return updateReading() }
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
            if isClosed || streamBroken || count < size || mustPauseReading { break }
        }
        updateReading()
    }

    /// A burst of calls whose replies the bus takes slower than they come (a client pipelining
    /// thousands of Introspect calls: 117 MiB before) waits in the bus and the kernel, not here.
    /// Replies to our own calls are not held back by it: while one is awaited, reading goes on and
    /// the calls read meanwhile are held (up to `heldCallBytes`), so a reply from BlueZ is never
    /// stuck behind callers' calls (it used to wait out its timeout).
    private var mustPauseReading: Bool {
        if dispatchPending { return true }
        return outboxIsFull && !readingForReplies
    }

    /// Over the outbox's high mark with our own calls awaiting replies and room to hold calls.
    private var readingForReplies: Bool { !inflight.isEmpty && heldBytes < configuration.heldCallBytes }

    /// Over the high mark: no incoming call is dispatched and no waiting handler starts until the
    /// bus has taken the outbox down to the low mark.
    var outboxIsFull: Bool { outboxBytes >= configuration.outboxHighWater }

    /// Pauses the read source while it must pause, and resumes it once the outbox is below the low
    /// mark (or a reply to our own call is awaited) and every received message is dispatched (a
    /// paused source never spins: readiness is level-triggered, so it fires again at once while
    /// bytes wait).
    func updateReading() {
        guard !isClosed, let readSource else { return }
        if !readingPaused, mustPauseReading {
            readingPaused = true
            readSource.suspend()
        } else if readingPaused, !mustPauseReading, outboxBytes <= configuration.outboxLowWater || readingForReplies {
            readingPaused = false
            readSource.resume()
        }
    }

    /// Dispatches whole messages received, 64 at a time (then again later, so other work interleaves).
    private func dispatchQueued() {
        guard dispatchDepth == 0 else { return }
        var budget = 64
        dispatchPending = false
        while !isClosed, !streamBroken {
            let full = outboxIsFull
            if !full, heldHead < held.count {
                // Calls held while the outbox was full go first, in order.
                let message = held[heldHead]
                held[heldHead] = DBusMessage(kind: .unknown)
                heldHead += 1
                heldBytes -= message.bytes.count
                if heldHead == held.count {
                    held.removeAll(keepingCapacity: held.capacity <= 64)
                    heldHead = 0
                }
                dispatch(message)
            } else {
                if full, !readingForReplies {
                    // Resumed from `flush` once the bus has taken enough of what is queued.
                    dispatchPending = true
                    updateReading()
                    return
                }
                guard let message = nextReceived() else { return }
                if full || heldHead < held.count, message.kind == .methodCall {
                    // Held (not dispatched) while the bus takes our replies; replies and signals go on.
                    heldBytes += message.bytes.count
                    held.append(message)
                } else {
                    dispatch(message)
                }
            }
            budget -= 1
            if budget == 0 {
                dispatchPending = true
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
        guard !isClosed, readingPaused else { return }
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
            guard let serial = message.replySerial, let reply = inflight[serial],
                  ReplyMatch.accepts(expectedSender: reply.expectedSender, sender: message.sender, isError: message.kind == .error)
            else { return }  // late, or forged
            reply.finish(ConnectionCore.result(of: message))
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
        message.serial = nextSerial
        nextSerial = nextSerial == UInt32.max ? 1 : nextSerial + 1
        let (bytes, descriptors) = try message.encoded(body: body)
        guard descriptors.isEmpty || passesDescriptors else {
            for descriptor in descriptors { _ = close(descriptor) }
            throw .failed("the bus does not pass file descriptors on this connection")
        }
        enqueue(bytes, descriptors: descriptors)
        return message.serial
    }

    /// Queues bytes already encoded (the descriptors travel with their first bytes, then are closed).
    func enqueue(_ bytes: [UInt8], descriptors: [Int32]) {
        outbox.append((bytes, 0, descriptors))
        outboxBytes += bytes.count
        if outbox.count - outboxHead == 1 { flush() }
    }

    private enum FlushResult { case done, blocked, broken }

    private func writeOut() -> FlushResult {
        while outboxHead < outbox.count {
            let first = outbox[outboxHead]
            guard let written = BusSocket.send(socket, first.bytes, from: first.sent, descriptors: first.descriptors) else { return .broken }
            guard written > 0 else { return .blocked }
            // The kernel passed its own copies with the first bytes.
            for descriptor in first.descriptors { _ = close(descriptor) }
            outbox[outboxHead].descriptors = []
            outbox[outboxHead].sent += written
            outboxBytes -= written
            if outbox[outboxHead].sent == first.bytes.count {
                outbox[outboxHead].bytes = []
                outboxHead += 1
                if outboxHead == outbox.count {
                    outbox.removeAll(keepingCapacity: outbox.capacity <= 64)
                    outboxHead = 0
                } else if outboxHead >= 64, outboxHead * 2 >= outbox.count {
                    outbox.removeFirst(outboxHead)
                    outboxHead = 0
                }
            }
        }
        return .done
    }

    /// Writes what the socket takes; waits for room with a writable source while it is full.
    private func flush() {
        defer {
            if outboxBytes <= configuration.outboxLowWater, !waitingBySender.isEmpty { startWaitingHandlers() }
            if readingPaused || heldHead < held.count, outboxBytes <= configuration.outboxLowWater {
                // Messages left undispatched go first, then reading resumes.
                if dispatchPending || heldHead < held.count { queue.async { [weak self] in self?.dispatchQueued(); self?.updateReading() } } else { updateReading() }
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
        let closing = subscriptions.values
        subscriptions.removeAll()
        for subscription in closing { subscription.onClose?() }
        for tracking in ownerTracking.values { for waiter in tracking.waiters { waiter.resume() } }
        ownerTracking.removeAll()
        let waiting = inflight.values
        inflight.removeAll()
        for reply in waiting { reply.finish(.failure(DBusError.disconnected())) }
        objects.removeAll()
        objectManagerRoots.removeAll()
        let neverStarted = waitingBySender.values.joined()
        waitingBySender.removeAll()
        for handler in neverStarted { handler.discard() }
        // Calls held unanswered (their descriptors close with them).
        held = []
        heldHead = 0
        heldBytes = 0
        // What is queued (replies, a last signal) still goes, for up to a second.
        let deadline = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
        while outboxHead < outbox.count, writeOut() == .blocked {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { break }
            var poll = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            _ = Glibc.poll(&poll, 1, Int32((deadline - now) / 1_000_000) + 1)
        }
        for entry in outbox[outboxHead...] { for descriptor in entry.descriptors { _ = close(descriptor) } }
        outbox = []
        outboxHead = 0
        outboxBytes = 0
        stream.discard()
        // The readiness sources hold the socket until dispatch cancels them; shutting it down now
        // lets the bus see the disconnect (and free names) at once.
        _ = shutdown(socket, Int32(SHUT_RDWR))
        // A suspended source must be resumed before it is cancelled and released.
        if readingPaused, let readSource {
            readingPaused = false
            readSource.resume()
        }
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
