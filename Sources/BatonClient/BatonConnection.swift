// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonCore
import BatonDBus
import Synchronization

/// A connection to `batond`: the bus connection that owns this app's activities and handlers.
///
/// Activities belong to the connection that created them: when it closes (explicitly, by releasing
/// it, or when the process exits), the daemon invalidates them and unregisters its handlers. Every
/// method may be called from any thread or task.
public final class BatonConnection: Sendable {
    public static let defaultBusName = BatonBusName.daemon
    public static let managerPath = BatonObjectPath.manager

    /// The underlying bus connection (for apps that export other objects on it).
    public let dbus: DBusConnection
    /// The daemon's bus name, `org.baton` unless several daemons share a bus.
    public let busName: String

    private let daemonUniqueName = Mutex<String?>(nil)
    private let nextObjectNumber = Mutex<UInt64>(0)

    /// Connects to `bus` (`.system` for the packaged daemon, `.session` for `batond --session`,
    /// or `.address(...)`).
    public convenience init(bus: DBusBusKind, busName: String = BatonConnection.defaultBusName) throws(BatonClientError) {
        let connection: DBusConnection
        do {
            connection = try DBusConnection(bus: bus)
        } catch {
            throw BatonClientError.from(error)
        }
        self.init(connection: connection, busName: busName)
    }

    /// Uses an existing bus connection.
    public init(connection: DBusConnection, busName: String = BatonConnection.defaultBusName) {
        dbus = connection
        self.busName = busName
    }

    /// Closes the bus connection: the daemon invalidates this connection's activities and handlers.
    public func close() { dbus.close() }

    // MARK: Daemon queries

    /// Manager1.GetStatus plus the Version property.
    public func status() async throws(BatonClientError) -> DaemonStatus {
        let status = try await call(OrgBaton.Manager1.getStatus, at: Self.managerPath)
        let properties = try await properties(of: Self.managerPath, interface: BatonInterface.manager)
        return try DaemonStatus(status: status, managerProperties: properties)
    }

    /// Manager1.GetHandledTypes.
    public func handledTypes() async throws(BatonClientError) -> [String] {
        try await call(OrgBaton.Manager1.getHandledTypes, at: Self.managerPath)
    }

    /// The object path of the user's current activity, or nil when there is none.
    public func currentActivityPath() async throws(BatonClientError) -> String? {
        let path = try await call(OrgBaton.Manager1.getCurrentActivity, at: Self.managerPath)
        return path == BatonObjectPath.none ? nil : path
    }

    /// Activities the daemon exports (ObjectManager.GetManagedObjects), sorted by path. Other users'
    /// activities show only their type and status.
    public func activities() async throws(BatonClientError) -> [ActivityInfo] {
        let reply = try await call(path: Self.managerPath, interface: BatonInterface.objectManager, method: "GetManagedObjects")
        guard let objects = reply.first?.dictionaryValue else { throw .unexpectedReply("GetManagedObjects returned \(reply.map(\.signature))") }
        var result: [ActivityInfo] = []
        for (pathValue, interfacesValue) in objects {
            guard let path = pathValue.objectPathValue, let interfaces = interfacesValue.asDictionary else {
                throw .unexpectedReply("GetManagedObjects entry has the wrong type")
            }
            // An object being removed can be listed with properties that no longer read (any of
            // them, Type or Status); skip it rather than fail the whole listing.
            guard let properties = interfaces[BatonInterface.activity]?.asDictionary,
                  properties[OrgBaton.Activity1.activityType.name] != nil, properties[OrgBaton.Activity1.status.name] != nil else { continue }
            result.append(try ActivityInfo(path: path, properties: properties))
        }
        return result.sorted { $0.path < $1.path }
    }

    /// The Activity1 properties of one activity.
    public func activity(at path: String) async throws(BatonClientError) -> ActivityInfo {
        try ActivityInfo(path: path, properties: try await properties(of: path, interface: BatonInterface.activity))
    }

    /// Activity1.GetPayload: the state that would leave the machine, after the WillSave exchange.
    public func payload(ofActivityAt path: String) async throws(BatonClientError) -> ActivityPayload {
        try ActivityPayload(try await call(OrgBaton.Activity1.getPayload, at: path))
    }

    /// Suggestion1.Continue on a suggestion object: continue that nearby activity here.
    public func continueSuggestion(at path: String) async throws(BatonClientError) {
        // The outcome is not read: a stopping daemon answers with none.
        _ = try await invoke(OrgBaton.Suggestion1.continue, at: path)
    }

    // MARK: Activities

    /// A new, not yet published activity on this connection (same as `UserActivity(activityType:connection:)`).
    public func makeActivity(type activityType: String) -> UserActivity {
        UserActivity(activityType: activityType, connection: self)
    }

    // MARK: Handlers

    /// Exports `handler` as an org.baton.ActivityHandler1 object and registers it for `types`.
    /// The connection keeps the handler until it is unregistered or the connection closes.
    /// `versions`: the activity versions it accepts (Manager1.RegisterHandlerWithOptions "Versions");
    /// nil accepts every version. Another version is refused with `.continuationFailure(.versionUnsupported)`
    /// on the continuing side and never reaches this handler.
    public func registerHandler(_ handler: some ActivityHandler, for types: [String],
                                versions: ActivityVersions? = nil) async throws(BatonClientError) -> HandlerRegistration {
        let path = makeObjectPath("handler")
        let interface = ActivityHandlerObject(handler: handler, connection: self).interface
        try await translatingErrors { try await dbus.export([interface], at: path) }
        do throws(BatonClientError) {
            try await announceHandler(at: path, for: types, versions: versions)
        } catch {
            try? dbus.unexport(path: path)
            throw error
        }
        return HandlerRegistration(path: path, types: types, versions: versions)
    }

    /// Registers closures as a handler; see `ActivityHandler` for when each is called.
    public func registerHandler(
        for types: [String],
        versions: ActivityVersions? = nil,
        willContinue: @escaping @Sendable (_ type: String, _ device: String) async -> Bool = { _, _ in true },
        continue continueActivity: @escaping @Sendable (ContinuedActivity) async -> Void,
        didFailToContinue: @escaping @Sendable (_ type: String, _ error: BatonClientError) async -> Void = { _, _ in }
    ) async throws(BatonClientError) -> HandlerRegistration {
        try await registerHandler(
            ClosureActivityHandler(willContinue: willContinue, continue: continueActivity, didFailToContinue: didFailToContinue),
            for: types, versions: versions)
    }

    /// Manager1.RegisterAgent: the org.baton.Agent1 object at `path` on this connection launches
    /// handler apps for this user (baton-agent does this; the registration ends with the connection).
    public func registerAgent(at path: String) async throws(BatonClientError) {
        try await call(OrgBaton.Manager1.registerAgent, at: Self.managerPath, path)
    }

    /// Manager1.UnregisterHandler, then removes the exported object.
    public func unregisterHandler(_ registration: HandlerRegistration) async throws(BatonClientError) {
        try await call(OrgBaton.Manager1.unregisterHandler, at: Self.managerPath, registration.path)
        try? dbus.unexport(path: registration.path)
    }

    // MARK: Plumbing

    func makeObjectPath(_ kind: String) -> String {
        let number = nextObjectNumber.withLock { counter in
            counter += 1
            return counter
        }
        return "\(BatonObjectPath.clientExportRoot)/\(kind)\(number)"
    }

    /// Calls `method` of the object at `path` with typed arguments; the reply decoded as the contract says.
    @discardableResult
    func call<Arguments, Reply>(_ method: MethodContract<Arguments, Reply>, at path: String, _ arguments: Arguments,
                                timeout: Duration? = nil) async throws(BatonClientError) -> Reply {
        let reply = try await invoke(method, at: path, arguments, timeout: timeout)
        return try decoding { () throws(BatonAPIError) in try method.decodeReply(reply) }
    }

    @discardableResult
    func call<Reply>(_ method: MethodContract<Void, Reply>, at path: String, timeout: Duration? = nil) async throws(BatonClientError) -> Reply {
        try await call(method, at: path, (), timeout: timeout)
    }

    /// Calls `method` with typed arguments and returns the reply's values as they came (for the
    /// few callers that read a reply leniently).
    func invoke<Arguments, Reply>(_ method: MethodContract<Arguments, Reply>, at path: String, _ arguments: Arguments,
                                  timeout: Duration? = nil) async throws(BatonClientError) -> [DBusValue] {
        try await call(path: path, interface: method.interface, method: method.name, arguments: method.encodeArguments(arguments), timeout: timeout)
    }

    func invoke<Reply>(_ method: MethodContract<Void, Reply>, at path: String) async throws(BatonClientError) -> [DBusValue] {
        try await invoke(method, at: path, ())
    }

    func call(path: String, interface: String, method: String, arguments: [DBusValue] = [],
              timeout: Duration? = nil) async throws(BatonClientError) -> [DBusValue] {
        try await translatingErrors {
            try await dbus.call(destination: busName, path: path, interface: interface, method: method, arguments: arguments, timeout: timeout)
        }
    }

    func properties(of path: String, interface: String) async throws(BatonClientError) -> [String: DBusValue] {
        let reply = try await call(path: path, interface: BatonInterface.properties, method: "GetAll", arguments: [.string(interface)])
        guard let properties = reply.first?.asDictionary else { throw .unexpectedReply("GetAll returned \(reply.map(\.signature))") }
        return properties
    }

    /// True when `sender` is the daemon. The daemon's unique name is cached and looked up again
    /// when it does not match (the daemon may have restarted). Exported objects answer only the
    /// daemon: other peers on the bus must not read an app's state or fake continuations.
    func isDaemon(_ sender: String) async -> Bool {
        if daemonUniqueName.withLock({ $0 }) == sender { return true }
        guard let owner = try? await dbus.nameOwner(busName) else { return false }
        daemonUniqueName.withLock { $0 = owner }
        return owner == sender
    }

    /// Refuses a call into an exported object unless it comes from the daemon (NotPermitted).
    public func requireDaemon(_ call: DBusMethodCall) async throws(DBusError) {
        guard await isDaemon(call.sender) else {
            throw DBusError(name: BatonErrorName.notPermitted, message: "only \(busName) may call this object")
        }
    }
}
