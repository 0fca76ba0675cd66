internal import CDBus
import Dispatch

// Helpers of ConnectionCore: Dispatch sources for libdbus watches and timeouts, pending replies,
// subscriptions and exported objects. All of them are confined to the connection queue.

/// Dispatch sources driving one DBusWatch. Touched only on the connection queue.
final class WatchSources {
    private var sources: [any DispatchSourceProtocol] = []
    private var suspended = false

    func add(_ source: any DispatchSourceProtocol) { sources.append(source) }

    func activateAll() { for source in sources { source.activate() } }

    func setEnabled(_ enabled: Bool) {
        if enabled, suspended {
            for source in sources { source.resume() }
            suspended = false
        } else if !enabled, !suspended {
            for source in sources { source.suspend() }
            suspended = true
        }
    }

    /// Dispatch traps when a suspended source is released, so resume after cancelling.
    func cancel() {
        for source in sources { source.cancel() }
        setEnabled(true)
        sources.removeAll()
    }

    deinit { cancel() }
}

/// The dispatch timer driving one DBusTimeout. Touched only on the connection queue.
final class TimeoutSource {
    let timer: any DispatchSourceTimer
    private var suspended = false
    private var cancelled = false

    init(timer: any DispatchSourceTimer) { self.timer = timer }

    /// Activates the timer (releasing an inactive source traps), suspended unless `enabled`.
    func start(intervalMilliseconds: Int32, enabled: Bool) {
        let interval = DispatchTimeInterval.milliseconds(Int(max(intervalMilliseconds, 1)))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.activate()
        if !enabled { disarm() }
    }

    func arm(intervalMilliseconds: Int32) {
        guard !cancelled else { return }
        let interval = DispatchTimeInterval.milliseconds(Int(max(intervalMilliseconds, 1)))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        if suspended {
            timer.resume()
            suspended = false
        }
    }

    func disarm() {
        guard !cancelled, !suspended else { return }
        timer.suspend()
        suspended = true
    }

    func cancel() {
        guard !cancelled else { return }
        cancelled = true
        timer.cancel()
        if suspended {
            timer.resume()
            suspended = false
        }
    }

    deinit { cancel() }
}

/// A method call awaiting its reply. Touched only on the connection queue.
final class PendingReply {
    var pending: OpaquePointer?
    var completion: ((Result<[DBusValue], any Error>) -> Void)?
    /// Unregisters the reply from the connection's in-flight table.
    var onFinish: (() -> Void)?

    init(completion: @escaping (Result<[DBusValue], any Error>) -> Void) { self.completion = completion }

    /// Delivers the result once; later calls are ignored.
    func finish(_ result: Result<[DBusValue], any Error>) {
        guard let completion else { return }
        self.completion = nil
        onFinish?()
        onFinish = nil
        completion(result)
    }
}

/// Lets `call` cancel a request whose send may or may not have happened yet. Queue-confined.
final class CallCancellation: @unchecked Sendable {
    var cancelled = false
    var reply: PendingReply?
}

struct Subscription {
    let rule: DBusMatchRule
    /// Runs on the connection queue, inside dispatch; must not block.
    let handler: @Sendable (DBusSignal) -> Void
    let onClose: (@Sendable () -> Void)?
    let isInternal: Bool
}

struct OwnerTracking {
    var count: Int
    var subscriptionID: UInt64?
    var waiters: [CheckedContinuation<Void, Never>] = []
    var ready = false
}

struct ExportedObject {
    var interfaces: [DBusInterface]
    func interface(named name: String) -> DBusInterface? { interfaces.first { $0.name == name } }
}

/// Converts libdbus's `DBusError` struct into ours.
func takeLibDBusError(_ error: inout CDBus.DBusError, fallback: String) -> DBusError {
    defer { dbus_error_free(&error) }
    guard dbus_error_is_set(&error) != 0 else { return .failed(fallback) }
    let name = error.name.map { String(cString: $0) } ?? DBusError.failedName
    let message = error.message.map { String(cString: $0) } ?? fallback
    return DBusError(name: name, message: message)
}

func optionalString(_ pointer: UnsafePointer<CChar>?) -> String? {
    pointer.map { String(cString: $0) }
}
