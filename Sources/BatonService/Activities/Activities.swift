// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

/// The activities of the machine's users: the registry, their publication on the radio, WillSave,
/// the status. No D-Bus here: calls arrive typed from the bus (Bus/ActivityBus), and what the bus
/// must show or ask goes out through the ports (`ActivityObjects`, `CallerIdentity`,
/// `SourceCalls`). `ActivityRegistry` decides, this applies its events. Handlers and session
/// agents are `Handlers`' (Handlers/), snapshots and edit sessions `Documents`' (Documents/).
public actor Activities {
    let configuration: ServiceConfiguration
    let publisher: (any ActivityPublisher)?
    let statusFile: StatusFile<DaemonStatus>?
    let clock: any WallClock
    let logger: any ServiceLog
    let objects: any ActivityObjects
    let callers: any CallerIdentity
    let sources: any SourceCalls
    let documents: Documents

    var registry = ActivityRegistry()
    var errorLog = ErrorLog()
    var state: DaemonState = .starting
    /// The radio as last asked (`refreshRadio`): the status file is written synchronously.
    var radio: RadioSummary = .off
    /// Asks the ring for its last refused change (GetStatus "RingChangeRefused"); nil: no ring.
    var ringRefusal: (@Sendable (UInt32) async -> RefusedRingChange?)?
    var uidBySender: [String: UInt32] = [:]
    /// Unique names seen leaving the bus, so a call racing its caller's disconnect leaves nothing behind.
    var vanished = VanishedConnections()
    /// Publishes handed to the radio and not finished: status writes wait for them (issue 12).
    var publishesInFlight = 0
    /// Publications and withdrawals for the radio, in the order the registry decided them
    /// (Activities+Publications.swift); one drain carries them out one after the other.
    var publisherQueue: [PublisherOperation] = []
    var publisherDraining = false
    var publisherDrain: Task<Void, Never>?
    /// Status files written (tests: at most one per publish).
    var statusWrites = 0
    /// Whether edit sessions are on (their owners' moves are announced).
    var editSessionsOn = false

    package init(configuration: ServiceConfiguration, publisher: (any ActivityPublisher)? = nil,
                statusFile: StatusFile<DaemonStatus>? = nil,
                objects: any ActivityObjects, callers: any CallerIdentity, sources: any SourceCalls, documents: Documents,
                clock: any WallClock = SystemWallClock(),
                logger: any ServiceLog = StandardErrorLog()) {
        self.configuration = configuration
        self.publisher = publisher
        self.statusFile = statusFile
        self.objects = objects
        self.callers = callers
        self.sources = sources
        self.documents = documents
        self.clock = clock
        self.logger = logger
    }

    // MARK: Lifecycle

    /// The bus serves Manager1 now: running (or degraded, as the radio says).
    func started() async {
        state = .running
        await refreshRadio()
        logger.log("batond: \(state.rawValue) on \(configuration.busName), radio \(radio.description)")
        writeStatus()
    }

    /// Status "stopping"; returns the activities whose objects the bus withdraws.
    func stopping() -> [ActivityID] {
        state = .stopping
        writeStatus()
        return registry.activities.keys.sorted()
    }

    /// The users' adverts are withdrawn, after whatever was queued before.
    func withdrawAll() async {
        guard publisher != nil else { return }
        for uid in Set(registry.activities.values.filter(\.isCurrent).map(\.owner.uid)).sorted() { enqueue(.withdraw(uid: uid)) }
        await publisherQueueDrained()
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
    func callerUID(_ sender: String) async throws(ActivityFailure) -> UInt32 {
        guard !sender.isEmpty else { throw .notPermitted("no caller identity on this connection") }
        if let uid = uidBySender[sender] { return uid }
        let uid: UInt32
        do {
            uid = try await callers.unixUser(of: sender)
        } catch {
            throw .notPermitted("cannot identify the caller")
        }
        if !vanished.contains(sender) { uidBySender[sender] = uid }
        return uid
    }

    /// Refuses a registration from a connection that has left the bus meanwhile.
    func requireConnected(_ sender: String) throws(ActivityFailure) {
        guard !vanished.contains(sender) else { throw .failed("the calling connection has closed") }
    }

    func connectionVanished(_ name: String) async {
        vanished.insert(name)
        uidBySender[name] = nil
        let events = registry.ownerVanished(connection: name)
        if !events.isEmpty {
            logger.log("batond: client \(name) disconnected; its activities are invalidated")
            await apply(events)
        }
    }

    // MARK: Calls from clients (typed; Bus/Manager1 and Bus/Activity1 decode them)

    func createActivity(sender: String, uid: UInt32, type: String, title: String, userInfo: [String: PropertyValue],
                        options: ActivityOptions) async throws(ActivityFailure) -> ActivityID {
        try requireConnected(sender)
        let (id, events) = try checked { () throws(RegistryError) in
            try registry.create(owner: ActivityOwner(uid: uid, connection: sender), type: type, title: title,
                                userInfo: userInfo, options: options)
        }
        await apply(events)
        return id
    }

    func currentActivity(of uid: UInt32) -> ActivityID? { registry.currentActivity(of: uid) }

    /// The activity when `uid` owns it (ownership is checked before anything else of a call).
    func activity(_ id: ActivityID, for uid: UInt32) throws(ActivityFailure) -> Activity {
        try checked { () throws(RegistryError) in try registry.activity(id, for: uid) }
    }

    func transition(_ id: ActivityID, uid: UInt32,
                    _ body: (inout ActivityRegistry, ActivityID, UInt32) throws(RegistryError) -> [RegistryEvent]) async throws(ActivityFailure) {
        let events = try checked { () throws(RegistryError) in try body(&registry, id, uid) }
        await apply(events)
    }

    func update(_ id: ActivityID, uid: UInt32, changes: ActivityChanges) async throws(ActivityFailure) {
        try await transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.update(id, by: uid, changes: changes) }
    }

    /// A property read: public fields for anyone, the rest for the owner, nothing private in broadcasts.
    func readable(_ id: ActivityID, publicField: Bool, sender: String?) async throws(ActivityFailure) -> Activity {
        guard registry.activities[id] != nil else { throw .registry(.unknownActivity) }
        if !publicField {
            guard let sender else { throw .notPermitted("private property") }
            let uid = try await callerUID(sender)
            guard uid == id.uid else { throw .registry(.notPermitted) }
        }
        guard let activity = registry.activities[id] else { throw .registry(.unknownActivity) }
        return activity
    }

    /// GetStatus for `sender`: the daemon's state, and for an identified caller its ring refusal
    /// (the bus adds whether the caller's session agent runs, from `Handlers`).
    func managerStatus(for sender: String) async -> (ManagerStatus, uid: UInt32?) {
        await refreshRadio()
        var status = ManagerStatus(state: state.rawValue, adapter: configuration.adapter, radio: radio.word.rawValue, radioDetail: radio.detail,
                                   lePrivacy: radio.privacy?.word.rawValue, lePrivacyDetail: radio.privacy?.detail,
                                   errors: errorLog.records.map { .init(time: $0.time, category: $0.category.rawValue, count: $0.count) },
                                   secretsAtRest: configuration.secretsAtRest)
        let uid = try? await callerUID(sender)
        // Names a pairing peer or member: for the machine's ring users only (RingService.refusedChange).
        if let uid, let refusal = await ringRefusal?(uid) {
            status.ringChangeRefused = refusal.sentence
            status.ringChangeRefusedTime = refusal.time
        }
        return (status, uid)
    }

    // MARK: Applying registry events

    func apply(_ events: [RegistryEvent]) async {
        for event in events {
            switch event {
            case .added(let id):
                do {
                    try await objects.activityAdded(id)
                    logger.log("batond: activity \(id.objectPath) created")
                } catch {
                    logger.log("batond: cannot export \(id.objectPath): \(error)")
                }
            case .removed(let id):
                objects.activityRemoved(id)
                await documents.removeSnapshots(of: id)
                await refreshDocumentsInUse(uid: id.uid)
                logger.log("batond: activity \(id.objectPath) invalidated")
            case .changed(let id, let fields):
                emitChanges(id, fields)
            case .publish(let id, let revision):
                publish(id, revision: revision)
            case .withdraw(let uid):
                if publisher != nil { enqueue(.withdraw(uid: uid)) }
            }
        }
        writeStatus()
    }

    /// Public properties are broadcast; the others go to the owner's connection only (ActivityObjects).
    func emitChanges(_ id: ActivityID, _ fields: Set<ActivityField>) {
        guard let activity = registry.activities[id] else { return }
        objects.activityChanged(activity, fields: fields)
        if fields.contains(.status) { logger.log("batond: activity \(id.objectPath) \(activity.status.name)") }
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
}
