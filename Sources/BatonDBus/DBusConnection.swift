// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch

/// Which descriptors an incoming call's handler gets. Each read of an `h` value is a duplicate
/// someone must close, and a caller can attach up to 253 descriptors anywhere in a call.
public enum DBusDescriptorPolicy: Sendable {
    /// Every descriptor in the call's arguments, wherever it is (an app's handler, whose `a{sv}`
    /// arguments may carry one by design); the handler closes them.
    case handlerOwnsAll
    /// Only those of the top-level `h` arguments the method declares, lent for the handler's run: the
    /// connection closes them when it returns or throws (a handler that keeps one duplicates it).
    /// Any other is closed at once.
    case declaredArgumentsOnly
}

/// A private connection to a message bus, driven by Dispatch (no blocking loop).
///
/// All work for this connection runs on one serial queue owned by the connection; every
/// method may be called from any thread or task. Signal handlers passed to `subscribe` run on that
/// queue and must return quickly. Closing (explicitly or by releasing the last reference) ends
/// subscription streams, fails outstanding calls with `org.freedesktop.DBus.Error.Disconnected`,
/// and removes exported objects. Errors thrown are `DBusError` unless stated otherwise.
public final class DBusConnection: Sendable {
    let core: ConnectionCore

    /// Opens a private connection and registers with the bus (the one blocking step: `Hello`).
    ///
    /// `configuration` holds the connection's limits (see `DBusConnectionConfiguration`); the
    /// defaults suit an app. Incoming calls and signals over `maxIncomingMessageBytes` are never
    /// buffered (`IncomingMessageFramer` skips them as they stream in): a method call over it is
    /// answered with its method's `DBusArgumentBudget.tooLargeErrorName` (`LimitsExceeded` for
    /// others) and other messages over it are dropped, while at most one read buffer of it is held.
    /// A reply over `maxReplyBytes` fails its call at once with `DBusError.replyTooLargeName`.
    ///
    /// `incomingDescriptors` says which descriptors of an incoming call its handler gets (and then
    /// owns); any other is closed before the handler runs. Descriptors in signals and in
    /// `Properties` calls never reach a handler.
    public init(bus: DBusBusKind, configuration: DBusConnectionConfiguration = DBusConnectionConfiguration(),
                incomingDescriptors: DBusDescriptorPolicy = .handlerOwnsAll) throws {
        core = try ConnectionCore(bus: bus, configuration: configuration, incomingDescriptors: incomingDescriptors)
    }

    /// The defaults with `maxIncomingMessageBytes` (and the same limit for replies).
    public convenience init(bus: DBusBusKind, maxIncomingMessageBytes: Int?,
                            incomingDescriptors: DBusDescriptorPolicy = .handlerOwnsAll) throws {
        try self.init(bus: bus, configuration: DBusConnectionConfiguration(maxIncomingMessageBytes: maxIncomingMessageBytes,
                                                                           maxReplyBytes: maxIncomingMessageBytes),
                      incomingDescriptors: incomingDescriptors)
    }

    /// What every connection batond opens uses (its own name, BlueZ, Avahi): any local user can
    /// send each of them calls and unicast signals. `configuration` is `.service` with, in batond,
    /// its `memoryReleasable`.
    public static func service(bus: DBusBusKind, configuration: DBusConnectionConfiguration = .service) throws -> DBusConnection {
        try DBusConnection(bus: bus, configuration: configuration, incomingDescriptors: .declaredArgumentsOnly)
    }

    /// The incoming limit of `DBusConnectionConfiguration.service` (8 MiB).
    public static let serviceMessageLimit = DBusConnectionConfiguration.service.maxIncomingMessageBytes ?? 8 << 20

    deinit { core.onQueue { core.closeOnQueue() } }

    /// This connection's unique name, e.g. `:1.42`.
    public var uniqueName: String { core.uniqueName }

    public var isConnected: Bool { core.onQueue { !core.isClosed } }

    /// Flushes queued output and closes. Idempotent.
    public func close() { core.onQueue { core.closeOnQueue() } }

    // MARK: Method calls

    /// Calls a method and waits (without blocking a thread) for its reply values.
    /// Remote errors are thrown as `DBusError`; task cancellation throws `CancellationError`.
    /// - Parameter timeout: nil uses the default (25 s, as libdbus and sd-bus).
    public func call(destination: String?, path: String, interface: String?, method: String,
                     arguments: [DBusValue] = [], timeout: Duration? = nil) async throws -> [DBusValue] {
        try await performCall(destination: destination, path: path, interface: interface, method: method,
                              arguments: arguments, timeout: timeout)
    }

    // MARK: Signals

    /// Emits a signal (broadcast, or unicast when `destination` is given).
    public func emitSignal(path: String, interface: String, name: String, arguments: [DBusValue] = [],
                           destination: String? = nil) throws {
        try core.onQueue { () throws(DBusError) in
            try core.emitSignalOnQueue(path: path, interface: interface, name: name, arguments: arguments, destination: destination)
        }
    }

    /// Adds the match rule on the bus and calls `handler` (on the connection queue) for each matching
    /// signal. Returns once the bus has accepted the rule, so later signals are not missed.
    public func subscribe(_ rule: DBusMatchRule, handler: @escaping @Sendable (DBusSignal) -> Void) async throws -> DBusSubscription {
        try await addSubscription(rule, handler: handler)
    }

    /// Matching signals as a stream; the subscription ends when the stream is terminated or the connection closes.
    public func signals(matching rule: DBusMatchRule) async throws -> AsyncStream<DBusSignal> {
        let (stream, continuation) = AsyncStream.makeStream(of: DBusSignal.self)
        let subscription = try await addSubscription(rule, onClose: { continuation.finish() }) { continuation.yield($0) }
        continuation.onTermination = { [weak core] _ in
            guard let core else { return }
            core.queue.async { core.unsubscribeOnQueue(subscription.id) }
        }
        return stream
    }

    /// Removes a subscription (and its bus match rule). Unknown or already removed subscriptions are ignored.
    public func unsubscribe(_ subscription: DBusSubscription) {
        core.onQueue { core.unsubscribeOnQueue(subscription.id) }
    }

    // MARK: Exported objects

    /// Exports an object implementing `interfaces` at `path`. Properties, Introspectable and Peer are
    /// added automatically. If an ObjectManager root is an ancestor, `InterfacesAdded` is emitted.
    public func export(_ interfaces: [DBusInterface], at path: String) async throws {
        try await exportObject(interfaces, at: path)
    }

    /// Removes the object at `path`, emitting `InterfacesRemoved` from ancestor ObjectManager roots.
    public func unexport(path: String) throws {
        try core.unexport(path: path)
    }

    /// Provides `org.freedesktop.DBus.ObjectManager` at `root`, covering every object exported below it.
    public func addObjectManager(at root: String) throws {
        try core.addObjectManager(at: root)
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` for an exported (or any) object:
    /// broadcast, or to `destination` only (a unique name) for properties only their owner may read.
    public func emitPropertiesChanged(path: String, interface: String, changed: [String: DBusValue],
                                      invalidated: [String] = [], destination: String? = nil) throws {
        try core.onQueue { () throws(DBusError) in
            try core.emitPropertiesChangedOnQueue(path: path, interface: interface, changed: changed, invalidated: invalidated,
                                                  destination: destination)
        }
    }

    // MARK: Bus names and peers

    public func requestName(_ name: String, flags: DBusRequestNameFlags = []) async throws -> DBusRequestNameReply {
        let reply = try await callBus("RequestName", [.string(name), .uint32(flags.rawValue)])
        guard let code = reply.first?.uint32Value, let result = DBusRequestNameReply(rawValue: code) else {
            throw DBusError.failed("unexpected RequestName reply \(reply)")
        }
        return result
    }

    /// - Parameter timeout: nil waits the default call timeout (25 s).
    public func releaseName(_ name: String, timeout: Duration? = nil) async throws -> DBusReleaseNameReply {
        let reply = try await callBus("ReleaseName", [.string(name)], timeout: timeout)
        guard let code = reply.first?.uint32Value, let result = DBusReleaseNameReply(rawValue: code) else {
            throw DBusError.failed("unexpected ReleaseName reply \(reply)")
        }
        return result
    }

    public func nameHasOwner(_ name: String) async throws -> Bool {
        let reply = try await callBus("NameHasOwner", [.string(name)])
        guard let owned = reply.first?.boolValue else { throw DBusError.failed("unexpected NameHasOwner reply \(reply)") }
        return owned
    }

    /// The unique name owning `name`; throws `org.freedesktop.DBus.Error.NameHasNoOwner` if none.
    public func nameOwner(_ name: String) async throws -> String {
        let reply = try await callBus("GetNameOwner", [.string(name)])
        guard let owner = reply.first?.stringValue else { throw DBusError.failed("unexpected GetNameOwner reply \(reply)") }
        return owner
    }

    /// The Unix user id of the process owning `name` (usually a method call's `sender`).
    public func connectionUnixUser(_ name: String) async throws -> UInt32 {
        let reply = try await callBus("GetConnectionUnixUser", [.string(name)])
        guard let uid = reply.first?.uint32Value else { throw DBusError.failed("unexpected GetConnectionUnixUser reply \(reply)") }
        return uid
    }

    /// The process id of the process owning `name`.
    public func connectionUnixProcessID(_ name: String) async throws -> UInt32 {
        let reply = try await callBus("GetConnectionUnixProcessID", [.string(name)])
        guard let pid = reply.first?.uint32Value else { throw DBusError.failed("unexpected GetConnectionUnixProcessID reply \(reply)") }
        return pid
    }

    /// Owner changes of `name` (or of every name when nil).
    public func nameOwnerChanges(for name: String? = nil) async throws -> AsyncStream<DBusNameOwnerChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: DBusNameOwnerChange.self)
        let subscription = try await addSubscription(DBusMatchRule.nameOwnerChanged(for: name),
                                                    onClose: { continuation.finish() }) { signal in
            if let change = DBusNameOwnerChange(signal) { continuation.yield(change) }
        }
        continuation.onTermination = { [weak core] _ in
            guard let core else { return }
            core.queue.async { core.unsubscribeOnQueue(subscription.id) }
        }
        return stream
    }

    /// Calls `onVanish` (on the connection queue) whenever `name` loses its owner, e.g. when the client
    /// with unique name `name` disconnects. Unsubscribe with the returned handle.
    public func watchNameOwner(_ name: String, onVanish: @escaping @Sendable () -> Void) async throws -> DBusSubscription {
        try await addSubscription(DBusMatchRule.nameOwnerChanged(for: name)) { signal in
            if let change = DBusNameOwnerChange(signal), change.name == name, change.newOwner == nil {
                onVanish()
            }
        }
    }
}
