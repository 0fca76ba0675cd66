// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus
import BatonSystem
import BatonStore

/// The activities side of the daemon, wired: `Activities` (registry, publications, WillSave,
/// status), `Handlers` (handlers, session agents, delivery), `Documents` (snapshots, inbox, edit
/// sessions), none of which knows D-Bus, and their D-Bus glue `ActivityBus` (Manager1, Activity1,
/// the calls to applications), which they reach only through their ports. The transfer reaches
/// the activities as `TransferActivities` (`activities`), the continuation as
/// `ContinuationActivities` (`handlers`).
public final class ActivityService: Sendable {
    /// Per document and per user, by default; `useDocuments` takes others.
    public static let defaultDocumentLimit: UInt64 = 4 << 30
    public static let defaultUserDocumentLimit: UInt64 = 8 << 30

    public let activities: Activities
    public let handlers: Handlers
    public let documents: Documents
    public let bus: ActivityBus

    public init(connection: DBusConnection, configuration: ServiceConfiguration, publisher: (any ActivityPublisher)? = nil,
                statusFile: StatusFile<DaemonStatus>? = nil, desktopEntries: any DesktopEntrySource,
                clock: any WallClock = SystemWallClock(),
                logger: any ServiceLog = StandardErrorLog()) {
        let bus = ActivityBus(connection: connection, configuration: configuration)
        let documents = Documents(logger: logger)
        let activities = Activities(configuration: configuration, publisher: publisher, statusFile: statusFile,
                                    objects: bus, sources: bus, documents: documents, clock: clock, logger: logger)
        handlers = Handlers(configuration: configuration, desktopEntries: desktopEntries, calls: bus, documents: documents, logger: logger,
                            recordError: { [weak activities] category in await activities?.recordError(category) })
        bus.attach((activities, handlers))
        self.activities = activities
        self.documents = documents
        self.bus = bus
    }

    /// Exports Manager1 and the ObjectManager and starts watching for vanished clients. Call before
    /// requesting the bus name so no call arrives before the objects exist.
    public func start() async throws {
        try await bus.export()
        await activities.started()
    }

    /// Status "stopping", activities withdrawn, objects removed. The caller releases the name.
    public func stop() async {
        let ids = await activities.stopping()
        bus.unexport(ids)
        await activities.withdrawAll()
        bus.unexportManager()
        activities.logger.log("batond: stopping")
    }

    /// Turns documents on with `store` (batond: `<state directory>/documents`).
    public func useDocuments(_ store: SnapshotStore) async { await activities.useDocuments(store) }

    /// Turns edit sessions on (batond: `<state directory>/sessions`).
    public func useEditSessions(_ sessions: EditSessions) async { await activities.useEditSessions(sessions) }
}
