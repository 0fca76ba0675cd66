// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import BatonStore

public struct ServiceConfiguration: Sendable {
    public static let defaultSaveTimeout: Duration = .seconds(2)
    public static let defaultHandlerWait: Duration = .seconds(10)

    public var busName: String
    public var version: String
    public var adapter: String
    /// False with `--no-radio`: the radio is off on purpose, not unavailable.
    public var radioEnabled: Bool
    public var saveTimeout: Duration
    /// How long a launched application has to register a handler.
    public var handlerWait: Duration
    /// Timeout for each call into an application's handler.
    public var handlerCallTimeout: Duration
    /// GetStatus "SecretsAtRest" (RingStore.secretsAtRest); nil: not said (tests without a ring).
    public var secretsAtRest: String?

    public init(busName: String = BatonBusName.daemon, version: String = batonVersion, adapter: String = "hci0", radioEnabled: Bool = true,
                saveTimeout: Duration = defaultSaveTimeout, handlerWait: Duration = defaultHandlerWait,
                handlerCallTimeout: Duration = .seconds(10)) {
        self.busName = busName
        self.version = version
        self.adapter = adapter
        self.radioEnabled = radioEnabled
        self.saveTimeout = saveTimeout
        self.handlerWait = handlerWait
        self.handlerCallTimeout = handlerCallTimeout
    }
}

public let batonVersion = BatonRelease.version

/// What `deliver(activity:from:to:)` achieved.
public enum DeliveryOutcome: Sendable, Hashable {
    case delivered
    /// The handler's WillContinue returned false.
    case declined
    /// No running handler and no installed application for the type.
    case noHandler
    /// An installed application handles the type but no session agent of the user runs to start it.
    case noAgent
    /// An installed application was started but registered no handler in time, or could not start.
    case launchFailed
    /// The handler failed (error, timeout or disconnect); FailedToContinue was sent when possible.
    case failed
}

/// A registered handler object: its unique bus name and object path. Package-level for the
/// fakes of Tests/Support/BatonServiceFakes.
package struct HandlerKey: Hashable, Sendable {
    package var connection: String
    package var path: String

    package init(connection: String, path: String) {
        self.connection = connection
        self.path = path
    }
}

struct RegisteredHandler: Sendable {
    var key: HandlerKey
    var uid: UInt32
    var types: [String]
    /// The activity versions it accepts (RegisterHandlerWithOptions "Versions"); nil: every version.
    var versions: ActivityVersions?
    /// Registration order, so the newest handler for a type wins.
    var sequence: UInt64
}

/// The daemon side of the D-Bus API: Manager1 at /org/baton and one Activity1 object per activity.
/// All state lives in this actor; `ActivityRegistry` decides, this applies its events to the bus.
public actor ActivityService {
    public static let maxHandlersPerUser = 32
    static let recentlyVanishedLimit = 1_024

    let connection: DBusConnection
    let configuration: ServiceConfiguration
    let publisher: (any ActivityPublisher)?
    let statusFile: StatusFile<DaemonStatus>?
    /// The handled-types index (installed apps' X-Baton-ActivityTypes and -ActivityVersions); the
    /// apps themselves are started by the user's session agent.
    let desktopEntries: any DesktopEntrySource
    let clock: any WallClock
    let logger: any ServiceLog

    var registry = ActivityRegistry()
    var errorLog = ErrorLog()
    var state: DaemonState = .starting
    /// The radio as last asked (`refreshRadio`): the status file is written synchronously.
    var radio: RadioSummary = .off
    /// Asks the ring for its last refused change (GetStatus "RingChangeRefused"); nil: no ring.
    var ringRefusal: (@Sendable (UInt32) async -> RefusedRingChange?)?
    var uidBySender: [String: UInt32] = [:]
    /// Unique names seen leaving the bus, so a call racing its caller's disconnect leaves nothing behind.
    var recentlyVanished: Set<String> = []
    var recentlyVanishedOrder: [String] = []
    var handlers: [HandlerKey: RegisteredHandler] = [:]
    var handlerSequence: UInt64 = 0
    /// Session agents by user (Manager1.RegisterAgent): they launch handler apps in that user's session.
    var agents: [UInt32: HandlerKey] = [:]
    var ownerWatch: Task<Void, Never>?
    /// Publishes handed to the radio and not finished: status writes wait for them (issue 12).
    var publishesInFlight = 0
    /// Status files written (tests: at most one per publish).
    var statusWrites = 0
    /// Where attached document snapshots are kept; nil: AttachDocument is refused (NotReady).
    var documents: SnapshotStore?
    /// Edit sessions of documents (§6.6); nil: documents are not session-checked.
    var editSessions: EditSessions?
    var snapshotSerial: UInt64 = 0

    public init(connection: DBusConnection, configuration: ServiceConfiguration, publisher: (any ActivityPublisher)? = nil,
                statusFile: StatusFile<DaemonStatus>? = nil, desktopEntries: any DesktopEntrySource,
                clock: any WallClock = SystemWallClock(),
                logger: any ServiceLog = StandardErrorLog()) {
        self.connection = connection
        self.configuration = configuration
        self.publisher = publisher
        self.statusFile = statusFile
        self.desktopEntries = desktopEntries
        self.clock = clock
        self.logger = logger
    }

    // MARK: Lifecycle

    /// Exports Manager1 and the ObjectManager and starts watching for vanished clients. Call before
    /// requesting the bus name so no call arrives before the objects exist.
    public func start() async throws {
        let changes = try await connection.nameOwnerChanges()
        ownerWatch = Task { [weak self] in
            for await change in changes where change.newOwner == nil && change.name.hasPrefix(":") {
                await self?.connectionVanished(change.name)
            }
        }
        try connection.addObjectManager(at: BatonObjectPath.manager)
        try await connection.export([managerInterface()], at: BatonObjectPath.manager)
        state = .running
        await refreshRadio()
        logger.log("batond: \(state.rawValue) on \(configuration.busName), radio \(radio.description)")
        writeStatus()
    }

    /// Status "stopping", activities withdrawn, objects removed. The caller releases the name.
    public func stop() async {
        state = .stopping
        writeStatus()
        ownerWatch?.cancel()
        ownerWatch = nil
        for id in registry.activities.keys.sorted() { try? connection.unexport(path: id.objectPath) }
        if let publisher {
            for uid in Set(registry.activities.values.filter(\.isCurrent).map(\.owner.uid)) { await publisher.withdraw(uid: uid) }
        }
        try? connection.unexport(path: BatonObjectPath.manager)
        logger.log("batond: stopping")
    }

    /// Asks the radio what it can do and derives the lifecycle state from it: a radio that was
    /// asked for (no --no-radio) but cannot work makes the daemon degraded, not running.
    /// GetStatus reports the ring's last refused change (batond: DaemonParts.start).
    public func useRingRefusals(_ read: @escaping @Sendable (UInt32) async -> RefusedRingChange?) { ringRefusal = read }

    func refreshRadio() async {
        if !configuration.radioEnabled {
            radio = .off
        } else if let reporter = publisher as? any RadioSummaryReporting {
            radio = await reporter.radioSummary()
        } else {
            radio = publisher == nil ? RadioSummary(.unavailable, detail: "no radio") : RadioSummary(.advertising)
        }
        if state == .running || state == .degraded { state = radio.isUnavailable ? .degraded : .running }
    }

    // MARK: Callers

    /// The caller's Unix user, from the bus (cached per connection: it cannot change).
    func callerUID(_ sender: String) async throws -> UInt32 {
        guard !sender.isEmpty else { throw DBusError.notPermitted("no caller identity on this connection") }
        if let uid = uidBySender[sender] { return uid }
        let uid: UInt32
        do {
            uid = try await connection.connectionUnixUser(sender)
        } catch {
            throw DBusError.notPermitted("cannot identify the caller")
        }
        if !recentlyVanished.contains(sender) { uidBySender[sender] = uid }
        return uid
    }

    func connectionVanished(_ name: String) async {
        if recentlyVanished.insert(name).inserted {
            recentlyVanishedOrder.append(name)
            if recentlyVanishedOrder.count > Self.recentlyVanishedLimit {
                recentlyVanished.remove(recentlyVanishedOrder.removeFirst())
            }
        }
        uidBySender[name] = nil
        let removedHandlers = handlers.keys.filter { $0.connection == name }
        for key in removedHandlers { handlers[key] = nil }
        if !removedHandlers.isEmpty { logger.log("batond: \(removedHandlers.count) handler(s) of \(name) unregistered (disconnected)") }
        for (uid, agent) in agents where agent.connection == name {
            agents[uid] = nil
            logger.log("batond: the session agent of user \(uid) left")
        }
        let events = registry.ownerVanished(connection: name)
        if !events.isEmpty {
            logger.log("batond: client \(name) disconnected; its activities are invalidated")
            await apply(events)
        }
    }

    // MARK: Applying registry events

    func apply(_ events: [RegistryEvent]) async {
        for event in events {
            switch event {
            case .added(let id):
                do {
                    try await connection.export([activityInterface(id)], at: id.objectPath)
                    logger.log("batond: activity \(id.objectPath) created")
                } catch {
                    logger.log("batond: cannot export \(id.objectPath): \(error)")
                }
            case .removed(let id):
                try? connection.unexport(path: id.objectPath)
                removeSnapshots(of: id)
                await refreshDocumentsInUse(uid: id.uid)
                logger.log("batond: activity \(id.objectPath) invalidated")
            case .changed(let id, let fields):
                emitChanges(id, fields)
            case .publish(let id, let revision):
                publish(id, revision: revision)
            case .withdraw(let uid):
                if let publisher { Task { await publisher.withdraw(uid: uid) } }
            }
        }
        writeStatus()
    }

    /// Public properties are broadcast; the others go to the owner's connection only.
    func emitChanges(_ id: ActivityID, _ fields: Set<ActivityField>) {
        guard let activity = registry.activities[id] else { return }
        var broadcast: [String: DBusValue] = [:]
        var owned: [String: DBusValue] = [:]
        for field in fields.sorted() {
            let value = Self.value(of: field, in: activity)
            if field.isPublic { broadcast[field.rawValue] = value } else { owned[field.rawValue] = value }
        }
        if !broadcast.isEmpty {
            try? connection.emitPropertiesChanged(path: id.objectPath, interface: BatonInterface.activity, changed: broadcast)
        }
        if !owned.isEmpty {
            try? connection.emitSignal(path: id.objectPath, interface: "org.freedesktop.DBus.Properties", name: "PropertiesChanged",
                                       arguments: [.string(BatonInterface.activity), .propertyDictionary(owned), .stringArray([])],
                                       destination: activity.owner.connection)
        }
        if fields.contains(.status) { logger.log("batond: activity \(id.objectPath) \(activity.status.name)") }
    }

    func publish(_ id: ActivityID, revision: UInt32) {
        guard let publisher else {
            let category: FailureCategory = .radioUnavailable
            errorLog.record(ErrorCategory(category), at: clock.unixSeconds())
            emitAll(registry.publishFailed(id, revision: revision, category: category))
            return
        }
        guard let record = registry.activities[id]?.record else { return }
        publishesInFlight += 1
        Task {
            do throws(RadioError) {
                let advertRevision = try await publisher.publish(record, uid: id.uid)
                await self.publishFinished(id, revision: revision, failure: nil, advertRevision: advertRevision)
            } catch {
                let category: FailureCategory = switch error {
                case .unavailable: .radioUnavailable
                case .instanceLimit, .invalidLength, .failed: .advertRejected
                }
                await self.publishFinished(id, revision: revision, failure: category)
            }
        }
    }

    func publishFinished(_ id: ActivityID, revision: UInt32, failure: FailureCategory?, advertRevision: UInt32? = nil) async {
        publishesInFlight -= 1
        await refreshRadio()
        if let failure {
            errorLog.record(ErrorCategory(failure), at: clock.unixSeconds())
            await apply(registry.publishFailed(id, revision: revision, category: failure))
        } else {
            await apply(registry.published(id, revision: revision, advertRevision: advertRevision))
        }
    }

    /// Applies events that only change properties (no await needed).
    func emitAll(_ events: [RegistryEvent]) {
        for case .changed(let id, let fields) in events { emitChanges(id, fields) }
    }

    // MARK: Status

    public func status() -> DaemonStatus {
        DaemonStatus(
            state: state, busName: configuration.busName, adapter: configuration.adapter, radio: radio.word.rawValue,
            radioDetail: radio.detail, lePrivacy: radio.privacy?.word.rawValue, lePrivacyDetail: radio.privacy?.detail,
            activities: registry.activities.values.sorted { $0.id < $1.id }.map {
                DaemonStatus.ActivityEntry(objectPath: $0.id.objectPath, type: $0.record.activityType, status: $0.status.name,
                                           current: $0.isCurrent, lastError: $0.lastError?.rawValue)
            },
            errors: errorLog.records, updated: clock.unixSeconds())
    }

    /// Writes the status file now, or once the publishes in flight have finished: only the advert
    /// counters may precede an advert (the nonce rule), so status waits and the writes coalesce.
    func writeStatus() {
        guard let statusFile else { return }
        // publishFinished writes once the last one is done.
        guard publishesInFlight == 0 || state == .stopping else { return }
        statusWrites += 1
        do {
            try statusFile.write(status())
        } catch {
            // Logged without the path: the category is enough to act on, the unit knows its directory.
            if errorLog.records.last?.category != .statusWriteFailed { logger.log("batond: cannot write the status file") }
            errorLog.record(.statusWriteFailed, at: clock.unixSeconds())
        }
    }

    func recordError(_ category: ErrorCategory) {
        errorLog.record(category, at: clock.unixSeconds())
        writeStatus()
    }

    // MARK: Property values

    static func value(of field: ActivityField, in activity: Activity) -> DBusValue {
        switch field {
        case .type: .string(activity.record.activityType)
        case .title: .string(activity.record.title)
        case .userInfo: PropertyValueCoding.encodeUserInfo(activity.record.userInfo)
        case .webpageURL: .string(activity.record.webpageURL ?? "")
        case .version: .int64(activity.record.version)
        case .needsSave: .boolean(activity.needsSave)
        case .current: .boolean(activity.isCurrent)
        case .owner: .uint32(activity.owner.uid)
        case .revision: .uint32(activity.advertRevision)
        case .status: .string(activity.status.name)
        case .lastError: .string(activity.lastError?.rawValue ?? "")
        case .document: .propertyDictionary(activity.document.map { documentDescription($0.snapshot.info) } ?? [:])
        }
    }

    /// A property read: public fields for anyone, the rest for the owner, nothing private in broadcasts.
    func propertyValue(_ field: ActivityField, of id: ActivityID, sender: String?) async throws -> DBusValue {
        guard registry.activities[id] != nil else { throw DBusError(RegistryError.unknownActivity) }
        if !field.isPublic {
            guard let sender else { throw DBusError.notPermitted("private property") }
            let uid = try await callerUID(sender)
            guard uid == id.uid else { throw DBusError(RegistryError.notPermitted) }
        }
        guard let activity = registry.activities[id] else { throw DBusError(RegistryError.unknownActivity) }
        return Self.value(of: field, in: activity)
    }
}
