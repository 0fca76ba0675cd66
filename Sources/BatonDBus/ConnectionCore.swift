internal import CDBus
import BatonReadiness
import Dispatch
import Glibc

/// libdbus needs its thread support switched on once, before any connection exists.
enum LibDBusRuntime {
    static let threadsInitialized: Bool = dbus_threads_init_default() != 0
}

/// A libdbus pointer moved between closures that all run on the owning connection's queue.
struct QueueConfinedPointer: @unchecked Sendable {
    let raw: OpaquePointer
}

/// A retained incoming message. libdbus message reference counts are atomic; everything else done
/// with the message happens on the connection queue, so sharing the handle across tasks is safe.
final class RetainedMessage: @unchecked Sendable {
    let raw: OpaquePointer
    init(_ raw: OpaquePointer) {
        self.raw = raw
        dbus_message_ref(raw)
    }
    deinit { dbus_message_unref(raw) }
}

/// All libdbus state of one connection. Every method that touches `raw` or the mutable fields runs on
/// `queue` (public entry points hop there with `onQueue`), which is what makes `@unchecked Sendable` sound.
final class ConnectionCore: @unchecked Sendable {
    let queue: DispatchQueue
    private let queueKey = DispatchSpecificKey<Bool>()
    let raw: OpaquePointer
    let uniqueName: String

    // Queue-confined state.
    var isClosed = false
    private var drainScheduled = false
    private var dispatchDepth = 0
    private var nextID: UInt64 = 1
    var subscriptions: [UInt64: Subscription] = [:]
    var wellKnownOwners: [String: String] = [:]
    var ownerTracking: [String: OwnerTracking] = [:]
    var inflight: [ObjectIdentifier: PendingReply] = [:]
    var objects: [String: ExportedObject] = [:]
    var objectManagerRoots: Set<String> = []
    var registeredPaths: Set<String> = []
    var fallbackRegistered = false

    /// Set when incoming messages pass through a gate (`maxIncomingMessageBytes`).
    let gate: IncomingMessageGate?

    init(bus: DBusBusKind, maxIncomingMessageBytes: Int? = nil) throws(DBusError) {
        guard LibDBusRuntime.threadsInitialized else { throw .noMemory() }
        MemoryRelease.mapLargeAllocationsOnce()
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        var connection: OpaquePointer?
        var gate: IncomingMessageGate?
        let gatedAddress: String?
        switch bus {
        case .address(let address): gatedAddress = address
        case .system: gatedAddress = maxIncomingMessageBytes == nil ? nil
            : getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) } ?? "unix:path=/var/run/dbus/system_bus_socket"
        case .session: gatedAddress = maxIncomingMessageBytes == nil ? nil : getenv("DBUS_SESSION_BUS_ADDRESS").map { String(cString: $0) }
        }
        switch bus {
        case .session where gatedAddress == nil:
            connection = dbus_bus_get_private(DBUS_BUS_SESSION, &error)
        case .system where gatedAddress == nil:
            connection = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error)
        default:
            let address = gatedAddress ?? ""
            guard !address.isEmpty, !address.utf8.contains(0) else { throw .invalidArgs("invalid bus address") }
            connection = dbus_connection_open_private(address, &error)
            if let opened = connection, let limit = maxIncomingMessageBytes {
                // No byte has been exchanged yet: the gate sees the stream from its first byte.
                var descriptor: Int32 = -1
                do throws(DBusError) {
                    guard dbus_connection_get_socket(opened, &descriptor) != 0 else { throw .failed("no socket to gate") }
                    gate = try IncomingMessageGate.install(onLibrarySocket: descriptor, limit: limit)
                } catch let gateError {
                    dbus_connection_close(opened)
                    dbus_connection_unref(opened)
                    dbus_error_free(&error)
                    throw gateError
                }
            }
            if let opened = connection, dbus_bus_register(opened, &error) == 0 {
                dbus_connection_close(opened)
                dbus_connection_unref(opened)
                connection = nil
            }
        }
        guard let connection else { throw takeLibDBusError(&error, fallback: "cannot connect to the bus") }
        self.gate = gate
        dbus_error_free(&error)
        // A library must never exit the process when the bus goes away.
        dbus_connection_set_exit_on_disconnect(connection, 0)
        raw = connection
        uniqueName = optionalString(dbus_bus_get_unique_name(connection)) ?? ""
        queue = DispatchQueue(label: "baton.dbus.\(uniqueName)")
        queue.setSpecific(key: queueKey, value: true)
        queue.sync { installMainLoopHooks() }
        gate?.sink.attach { [weak self] message in
            guard let self else { return }
            self.queue.async { self.refuseOversized(message) }
        }
    }

    var isOnQueue: Bool { DispatchQueue.getSpecific(key: queueKey) == true }

    /// The socket libdbus reads and writes, while connected (tests use it to spot descriptor reuse).
    var socketDescriptor: Int32? {
        onQueue {
            var descriptor: Int32 = -1
            guard !isClosed, dbus_connection_get_unix_fd(raw, &descriptor) != 0 else { return nil }
            return descriptor
        }
    }

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

    // MARK: - Main loop integration

    private var unretainedSelf: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ data: UnsafeMutableRawPointer?) -> ConnectionCore? {
        guard let data else { return nil }
        return Unmanaged<ConnectionCore>.fromOpaque(data).takeUnretainedValue()
    }

    /// Callbacks get an unretained pointer: `close()` removes every hook before the core can go away.
    private func installMainLoopHooks() {
        dbus_connection_set_watch_functions(
            raw,
            { watch, data in
                guard let watch, let core = ConnectionCore.from(data) else { return 0 }
                return core.addWatch(watch) ? 1 : 0
            },
            { watch, _ in
                guard let watch, let sourcesPointer = dbus_watch_get_data(watch) else { return }
                Unmanaged<WatchSources>.fromOpaque(sourcesPointer).takeUnretainedValue().cancel()
            },
            { watch, _ in
                guard let watch, let sourcesPointer = dbus_watch_get_data(watch) else { return }
                Unmanaged<WatchSources>.fromOpaque(sourcesPointer).takeUnretainedValue()
                    .setEnabled(dbus_watch_get_enabled(watch) != 0)
            },
            unretainedSelf, nil)
        dbus_connection_set_timeout_functions(
            raw,
            { timeout, data in
                guard let timeout, let core = ConnectionCore.from(data) else { return 0 }
                core.addTimeout(timeout)
                return 1
            },
            { timeout, _ in
                guard let timeout, let sourcePointer = dbus_timeout_get_data(timeout) else { return }
                Unmanaged<TimeoutSource>.fromOpaque(sourcePointer).takeUnretainedValue().cancel()
            },
            { timeout, _ in
                guard let timeout, let sourcePointer = dbus_timeout_get_data(timeout) else { return }
                let source = Unmanaged<TimeoutSource>.fromOpaque(sourcePointer).takeUnretainedValue()
                if dbus_timeout_get_enabled(timeout) != 0 {
                    source.arm(intervalMilliseconds: dbus_timeout_get_interval(timeout))
                } else {
                    source.disarm()
                }
            },
            unretainedSelf, nil)
        dbus_connection_set_dispatch_status_function(
            raw,
            { _, status, data in
                guard status == DBUS_DISPATCH_DATA_REMAINS, let core = ConnectionCore.from(data) else { return }
                core.scheduleDrain()
            },
            unretainedSelf, nil)
        _ = dbus_connection_add_filter(raw, ConnectionCore.filterFunction, unretainedSelf, nil)
        // Messages (e.g. NameAcquired) may already be queued from the registration handshake.
        scheduleDrain()
    }

    static let filterFunction: DBusHandleMessageFunction = { _, message, data in
        guard let message, let core = ConnectionCore.from(data) else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
        core.filter(message)
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
    }

    /// Dispatch sources never watch libdbus's socket directly but a private epoll instance holding it
    /// (BatonReadiness), closed only by their cancel handler. Two failures it avoids: libdbus closes its
    /// descriptor right after removing the watch, but dispatch unregisters a cancelled source later and
    /// keys its epoll registrations by descriptor number, so a new connection given the freed number
    /// joined the stale registration and its replies sat unread; and a bus that goes away hangs the
    /// socket up, which libdispatch's epoll code handles racily (a crash in its manager thread).
    private func addWatch(_ watch: OpaquePointer) -> Bool {
        let fd = dbus_watch_get_unix_fd(watch)
        let flags = dbus_watch_get_flags(watch)
        let sources = WatchSources()
        let watchHandle = QueueConfinedPointer(raw: watch)
        func makeSource(_ condition: DBusWatchFlags) -> (any DispatchSourceProtocol)? {
            let readiness: Readiness = condition == DBUS_WATCH_READABLE ? .readable : .writable
            guard let source = makeReadinessSource(watching: fd, for: readiness, queue: queue) else { return nil }
            source.setEventHandler { [weak self] in
                guard let self, !self.isClosed else { return }
                _ = dbus_watch_handle(watchHandle.raw, condition.rawValue)
                self.drain()
            }
            return source
        }
        for condition in [DBUS_WATCH_READABLE, DBUS_WATCH_WRITABLE] where flags & condition.rawValue != 0 {
            guard let source = makeSource(condition) else {
                // Activated only to be cancelled: that closes the private descriptors already made.
                sources.activateAll()
                sources.cancel()
                return false
            }
            sources.add(source)
        }
        // Activate always (releasing an inactive source traps), then suspend if disabled.
        sources.activateAll()
        sources.setEnabled(dbus_watch_get_enabled(watch) != 0)
        dbus_watch_set_data(watch, Unmanaged.passRetained(sources).toOpaque()) { pointer in
            guard let pointer else { return }
            let sources = Unmanaged<WatchSources>.fromOpaque(pointer).takeRetainedValue()
            sources.cancel()
        }
        return true
    }

    private func addTimeout(_ timeout: OpaquePointer) {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let timeoutHandle = QueueConfinedPointer(raw: timeout)
        timer.setEventHandler { [weak self] in
            guard let self, !self.isClosed else { return }
            _ = dbus_timeout_handle(timeoutHandle.raw)
            self.drain()
        }
        let source = TimeoutSource(timer: timer)
        source.start(intervalMilliseconds: dbus_timeout_get_interval(timeout), enabled: dbus_timeout_get_enabled(timeout) != 0)
        dbus_timeout_set_data(timeout, Unmanaged.passRetained(source).toOpaque()) { pointer in
            guard let pointer else { return }
            Unmanaged<TimeoutSource>.fromOpaque(pointer).takeRetainedValue().cancel()
        }
    }

    /// Safe to call from any thread (libdbus calls it from inside its own functions).
    func scheduleDrain() {
        queue.async { [weak self] in
            guard let self, !self.drainScheduled else { return }
            self.drainScheduled = true
            self.queue.async { [weak self] in self?.drain() }
        }
    }

    /// Dispatches queued incoming messages, a bounded batch at a time so other queue work interleaves.
    func drain() {
        drainScheduled = false
        guard !isClosed, dispatchDepth == 0 else { return }
        dispatchDepth += 1
        var budget = 64
        while budget > 0, !isClosed, dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {
            budget -= 1
        }
        dispatchDepth -= 1
        if !isClosed, dbus_connection_get_dispatch_status(raw) == DBUS_DISPATCH_DATA_REMAINS {
            drainScheduled = true
            queue.async { [weak self] in self?.drain() }
        }
    }

    var isDispatching: Bool { dispatchDepth > 0 }

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
        for reply in waiting {
            if let pending = reply.pending {
                dbus_pending_call_cancel(pending)
                dbus_pending_call_unref(pending)
                reply.pending = nil
            }
            reply.finish(.failure(DBusError.disconnected()))
        }
        for path in registeredPaths { _ = dbus_connection_unregister_object_path(raw, path) }
        registeredPaths.removeAll()
        if fallbackRegistered { _ = dbus_connection_unregister_object_path(raw, "/") }
        objects.removeAll()
        objectManagerRoots.removeAll()
        dbus_connection_remove_filter(raw, ConnectionCore.filterFunction, unretainedSelf)
        dbus_connection_flush(raw)
        // The watch sources' duplicates keep the socket open until dispatch cancels them, shortly after
        // this returns; shutting it down now lets the bus see the disconnect (and free names) at once.
        var descriptor: Int32 = -1
        if dbus_connection_get_socket(raw, &descriptor) != 0, descriptor >= 0 { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }
        dbus_connection_close(raw)
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        _ = dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        _ = dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_unref(raw)
    }
}

