// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonDBus
import BatonStore
import Synchronization

/// The D-Bus glue of the activities: Manager1 at /org/baton (Manager1.swift), one Activity1 object
/// per activity (Activity1.swift), the calls out to applications (ActivityApps.swift). Each
/// interface decodes its own arguments; the caller's Unix user is resolved here, at the edge, and
/// handed to `Activities` and `Handlers` as a typed argument; their `ActivityFailure`s become
/// D-Bus errors here (the table at the end). They reach the bus only through their ports
/// (`ActivityObjects`, `SourceCalls`, `HandlerCalls`).
public final class ActivityBus: Sendable {
    let connection: DBusConnection
    let configuration: ServiceConfiguration
    private let attached = Mutex<(Activities, Handlers)?>(nil)
    private let ownerWatch = Mutex<Task<Void, Never>?>(nil)
    /// Callers' Unix users by unique name (a name's user cannot change), and the names seen
    /// leaving the bus, so a lookup racing its caller's disconnect leaves nothing cached.
    private let callers = Mutex<(uids: [String: UInt32], vanished: VanishedConnections)>(([:], VanishedConnections()))

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
                self?.callers.withLock { callers in
                    callers.vanished.insert(change.name)
                    callers.uids[change.name] = nil
                }
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

extension ActivityBus {
    /// The caller's Unix user, from the bus daemon (GetConnectionUnixUser; cached per connection).
    func callerUID(_ sender: String) async throws(DBusError) -> UInt32 {
        guard !sender.isEmpty else { throw DBusError(ActivityFailure.notPermitted("no caller identity on this connection")) }
        if let uid = callers.withLock({ $0.uids[sender] }) { return uid }
        let uid: UInt32
        do {
            uid = try await connection.connectionUnixUser(sender)
        } catch {
            throw DBusError(ActivityFailure.notPermitted("cannot identify the caller"))
        }
        callers.withLock { callers in
            if !callers.vanished.contains(sender) { callers.uids[sender] = uid }
        }
        return uid
    }

    /// A userInfo argument (CreateActivity, Update, WillSave's answer) as typed values.
    static func decode<T>(_ body: () throws(RegistryError) -> T) throws(DBusError) -> T {
        do {
            return try body()
        } catch {
            throw DBusError(error)
        }
    }
}

extension DBusArgumentBudget {
    /// CreateActivity and Activity1.Update: room for any userInfo of at most 65,536 bytes encoded
    /// (each encoded byte yields at most two D-Bus values, e.g. a boolean inside `av`, and at most
    /// one byte of string) plus type, title, URL and options. Anything larger is refused with
    /// PayloadTooLarge while it is being unmarshalled, before the handler runs.
    static let userInfoCall = DBusArgumentBudget(
        maxValues: 2 * PropertyValue.maxUserInfoBytes + 1_024,
        maxStringBytes: PropertyValue.maxUserInfoBytes + 16_384,
        maxDepth: 64,
        tooLargeErrorName: BatonErrorName.payloadTooLarge.rawValue,
        invalidErrorName: BatonErrorName.invalidArguments.rawValue)
}

/// Unique names seen leaving the bus, bounded (the oldest are forgotten). Kept by the bus for its
/// callers' cache and by the actors that must refuse a registration racing its caller's disconnect.
struct VanishedConnections: Sendable {
    static let limit = 1_024
    private var names: Set<String> = []
    private var order: [String] = []

    func contains(_ name: String) -> Bool { names.contains(name) }

    mutating func insert(_ name: String) {
        guard names.insert(name).inserted else { return }
        order.append(name)
        if order.count > Self.limit { names.remove(order.removeFirst()) }
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

// MARK: Refusals

extension DBusError {
    /// An activity call's refusal as its org.baton.Error.* name and words.
    init(_ failure: ActivityFailure) {
        switch failure {
        case .registry(let error): self.init(error)
        case .service(let failure): self.init(failure)
        case .alreadyExists(let message): self = .baton(BatonErrorName.alreadyExists, message)
        case .snapshot(let error): self = ActivityBus.busError(error)
        case .editSession(let failure): self = ActivityBus.busError(failure)
        case .failed(let message): self = .failed(message)
        }
    }
}

/// Runs a typed activities call for a D-Bus method, its `ActivityFailure` as the D-Bus error.
func mappingActivityFailures<T>(_ body: () async throws(ActivityFailure) -> T) async throws(DBusError) -> T {
    do { return try await body() } catch { throw DBusError(error) }
}

extension ActivityBus {
    static func busError(_ error: SnapshotError) -> DBusError {
        switch error {
        case .payloadTooLarge(let limit, let actual):
            .payloadTooLarge("the document is \(actual) bytes or more, the limit left is \(limit)")
        case .diskFull: .baton(BatonErrorName.diskFull, "no space left for the snapshot; the previous one is kept")
        case .notARegularFile: .invalidArguments("the snapshot must be a regular file")
        case .notReadable: .invalidArguments("the snapshot must be a descriptor opened for reading")
        case .digestMismatch, .invalidName: .failed("snapshot refused")
        case .io(let operation, let code): .failed("snapshot \(operation) failed (errno \(code))")
        case .pullInProgress: .failed("another transfer of this document is running")
        }
    }

    static func busError(_ failure: EditSessionFailure) -> DBusError {
        switch failure {
        case .session(.notOwner): .baton(BatonErrorName.editSessionNotOwned, "another machine owns this document's edit session")
        case .session(.conflict): .baton(BatonErrorName.documentConflict, "the document changed on both machines; this copy is kept")
        case .session(.tooManyDocuments(let limit)): .baton(BatonErrorName.limitExceeded, "at most \(limit) of your documents in use have edit sessions")
        case .tooManyClaims(let limit): .baton(BatonErrorName.limitExceeded, "at most \(limit) claims are pending")
        case .refused(.sessionBusy), .claimPendingElsewhere: .baton(BatonErrorName.editSessionBusy, "the edit session was not released")
        case .refused(.documentConflict): .baton(BatonErrorName.documentConflict, "the document changed on both machines; this copy is kept")
        case .store(let error):
            if case .io(_, _, let code) = error, code == ENOSPC || code == EDQUOT { .baton(BatonErrorName.diskFull, "no space left to record the edit session; nothing changed") }
            else { .failed("the edit session could not be recorded; nothing changed") }
        default: .failed("edit session: \(failure)")
        }
    }
}
