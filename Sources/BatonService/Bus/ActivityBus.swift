// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import Synchronization

/// The D-Bus glue of the activities: Manager1 at /org/baton (Manager1.swift), one Activity1 object
/// per activity (Activity1.swift), the calls out to applications (ActivityApps.swift). Closures
/// decode arguments (ActivityArguments.swift) and call typed methods of `Activities` and
/// `Handlers`; their `ActivityFailure`s become D-Bus errors (ActivityErrors.swift). They reach
/// the bus only through their ports (`ActivityObjects`, `CallerIdentity`, `SourceCalls`, `HandlerCalls`).
public final class ActivityBus: Sendable {
    let connection: DBusConnection
    let configuration: ServiceConfiguration
    private let attached = Mutex<(Activities, Handlers)?>(nil)
    private let ownerWatch = Mutex<Task<Void, Never>?>(nil)

    public init(connection: DBusConnection, configuration: ServiceConfiguration) {
        self.connection = connection
        self.configuration = configuration
    }

    /// The activities and handlers the methods call (nil once stopped: calls fail with "stopping").
    func attach(_ parts: (Activities, Handlers)?) { attached.withLock { $0 = parts } }

    /// The activities behind the objects, or Failed "stopping".
    func activities() throws(DBusError) -> Activities {
        guard let parts = attached.withLock({ $0 }) else { throw DBusError.failed("stopping") }
        return parts.0
    }

    /// The handlers behind Manager1's registrations, or Failed "stopping".
    func handlers() throws(DBusError) -> Handlers {
        guard let parts = attached.withLock({ $0 }) else { throw DBusError.failed("stopping") }
        return parts.1
    }

    /// Exports Manager1 and the ObjectManager and starts watching for vanished clients. Call before
    /// requesting the bus name so no call arrives before the objects exist.
    func export() async throws {
        let changes = try await connection.nameOwnerChanges()
        let watch = Task { [weak self] in
            for await change in changes where change.newOwner == nil && change.name.hasPrefix(":") {
                guard let (activities, handlers) = self?.attached.withLock({ $0 }) else { continue }
                await handlers.connectionVanished(change.name)
                await activities.connectionVanished(change.name)
            }
        }
        ownerWatch.withLock { $0 = watch }
        try connection.addObjectManager(at: BatonObjectPath.manager)
        try await connection.export([managerInterface()], at: BatonObjectPath.manager)
    }

    /// Stops the watch and withdraws the activities' objects and Manager1.
    func unexport(_ ids: [ActivityID]) {
        ownerWatch.withLock { watch in
            watch?.cancel()
            watch = nil
        }
        for id in ids { try? connection.unexport(path: id.objectPath) }
    }

    func unexportManager() {
        try? connection.unexport(path: BatonObjectPath.manager)
        attach(nil)
    }
}

extension ActivityBus: CallerIdentity {
    public func unixUser(of connection: String) async throws -> UInt32 {
        try await self.connection.connectionUnixUser(connection)
    }
}

extension ActivityBus: ActivityObjects {
    public func activityAdded(_ id: ActivityID) async throws {
        try await connection.export([activityInterface(id)], at: id.objectPath)
    }

    public func activityRemoved(_ id: ActivityID) {
        try? connection.unexport(path: id.objectPath)
    }

    /// Public properties are broadcast; the others go to the owner's connection only.
    public func activityChanged(_ activity: Activity, fields: Set<ActivityField>) {
        var broadcast: [String: DBusValue] = [:]
        var owned: [String: DBusValue] = [:]
        for field in fields.sorted() {
            let value = Self.value(of: field, in: activity)
            if field.isPublic { broadcast[field.rawValue] = value } else { owned[field.rawValue] = value }
        }
        if !broadcast.isEmpty {
            try? connection.emitPropertiesChanged(path: activity.id.objectPath, interface: BatonInterface.activity, changed: broadcast)
        }
        if !owned.isEmpty { emitOwned(activity, owned) }
    }

    public func editSessionChanged(_ activity: Activity, owner: String) {
        emitOwned(activity, [Self.editSessionProperty: .string(owner)])
    }

    /// PropertiesChanged to the activity's owner only (private properties).
    private func emitOwned(_ activity: Activity, _ changed: [String: DBusValue]) {
        try? connection.emitSignal(path: activity.id.objectPath, interface: "org.freedesktop.DBus.Properties", name: "PropertiesChanged",
                                   arguments: [.string(BatonInterface.activity), .propertyDictionary(changed), .stringArray([])],
                                   destination: activity.owner.connection)
    }
}
