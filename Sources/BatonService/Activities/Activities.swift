// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore
import BatonSystem

/// The activities of the machine's users: the registry, their publication on the radio, WillSave,
/// the status. No D-Bus here: calls arrive typed from the bus (Bus/ActivityBus), with the caller's
/// Unix user resolved there, and what the bus must show or ask goes out through the ports
/// (`ActivityObjects`, `SourceCalls`, ActivityPorts.swift). `ActivityRegistry` decides, this
/// applies its events; publications go to the `ActivityPublisher` in the registry's order (below).
/// Handlers and session agents are `Handlers`' (Handlers/), snapshots and edit sessions
/// `Documents`' (Documents/).
public actor Activities {
    let configuration: ServiceConfiguration
    let publisher: (any ActivityPublisher)?
    let statusFile: StatusFile<DaemonStatus>?
    let clock: any WallClock
    let logger: any ServiceLog
    let objects: any ActivityObjects
    let sources: any SourceCalls
    let documents: Documents

    var registry = ActivityRegistry()
    var errorLog = ErrorLog()
    var state: DaemonState = .starting
    /// The radio as last learnt (`refreshRadio`, or a publication's receipt): the status file is
    /// written synchronously.
    var radio: RadioSummary = .off
    /// Asks the ring for its last refused change (GetStatus "RingChangeRefused"); nil: no ring.
    var ringRefusal: (@Sendable (UInt32) async -> RefusedRingChange?)?
    /// Unique names seen leaving the bus, so a call racing its caller's disconnect leaves nothing behind.
    var vanished = VanishedConnections()
    /// Publishes handed to the radio and not finished: status writes wait for them (issue 12).
    var publishesInFlight = 0
    /// Publications and withdrawals for the radio, in the order the registry decided them; one
    /// drain carries them out one after the other (Publication, below).
    var publisherQueue: [PublisherOperation] = []
    var publisherDraining = false
    var publisherDrain: Task<Void, Never>?
    /// Status files written (tests: at most one per publish).
    var statusWrites = 0
    /// Whether edit sessions are on (their owners' moves are announced).
    var editSessionsOn = false

    package init(configuration: ServiceConfiguration, publisher: (any ActivityPublisher)? = nil,
                statusFile: StatusFile<DaemonStatus>? = nil,
                objects: any ActivityObjects, sources: any SourceCalls, documents: Documents,
                clock: any WallClock = SystemWallClock(),
                logger: any ServiceLog = StandardErrorLog()) {
        self.configuration = configuration
        self.publisher = publisher
        self.statusFile = statusFile
        self.objects = objects
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
        let reporter = configuration.radioEnabled ? publisher as? any RadioSummaryReporting : nil
        adoptRadio(await reporter?.radioSummary())
    }

    /// Takes what the radio said (`reported`: its summary, from `refreshRadio` or a publication's
    /// receipt; nil from a publisher that cannot say) and derives the lifecycle state from it.
    func adoptRadio(_ reported: RadioSummary?) {
        if !configuration.radioEnabled {
            radio = .off
        } else if let reported {
            radio = reported
        } else if !(publisher is any RadioSummaryReporting) {
            radio = publisher == nil ? RadioSummary(.unavailable, detail: "no radio") : RadioSummary(.advertising)
        }
        if state == .running || state == .degraded { state = radio.isUnavailable ? .degraded : .running }
    }

    // MARK: Callers

    /// Refuses a registration from a connection that has left the bus meanwhile.
    func requireConnected(_ sender: String) throws(ActivityFailure) {
        guard !vanished.contains(sender) else { throw .failed("the calling connection has closed") }
    }

    func connectionVanished(_ name: String) async {
        vanished.insert(name)
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

    /// A property read: public fields for anyone, the rest for the owner (`reader`: the caller's
    /// uid, resolved by the bus for a private field), nothing private in broadcasts.
    func readable(_ id: ActivityID, publicField: Bool, reader: UInt32?) throws(ActivityFailure) -> Activity {
        guard let activity = registry.activities[id] else { throw .registry(.unknownActivity) }
        if !publicField {
            guard let reader else { throw .notPermitted("private property") }
            guard reader == id.uid else { throw .registry(.notPermitted) }
        }
        return activity
    }

    /// GetStatus for the caller `uid` (nil: not identified): the daemon's state, and for an
    /// identified caller its ring refusal (the bus adds whether the caller's session agent runs,
    /// from `Handlers`).
    func managerStatus(for uid: UInt32?) async -> ManagerStatus {
        await refreshRadio()
        var status = ManagerStatus(state: state.rawValue, adapter: configuration.adapter, radio: radio.word.rawValue, radioDetail: radio.detail,
                                   lePrivacy: radio.privacy?.word.rawValue, lePrivacyDetail: radio.privacy?.detail,
                                   errors: errorLog.records.map { .init(time: $0.time, category: $0.category.rawValue, count: $0.count) },
                                   secretsAtRest: configuration.secretsAtRest)
        // Names a pairing peer or member: for the machine's ring users only (RingService.refusedChange).
        if let uid, let refusal = await ringRefusal?(uid) {
            status.ringChangeRefused = refusal.sentence
            status.ringChangeRefusedTime = refusal.time
        }
        return status
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

    // MARK: Publication
    // The registry's publish and withdraw events go to the `ActivityPublisher` (the radio, whose
    // planner's book says what each user published and what the advert stands for) strictly in
    // the order the registry emitted them: one queue, drained one call at a time, so no task
    // scheduling decides whether a withdrawal overtakes a publication.

    func publish(_ id: ActivityID, revision: UInt32) {
        guard publisher != nil else {
            let category: FailureCategory = .radioUnavailable
            errorLog.record(ErrorCategory(category), at: clock.unixSeconds())
            emitAll(registry.publishFailed(id, revision: revision, category: category))
            return
        }
        guard let record = registry.activities[id]?.record else { return }
        publishesInFlight += 1
        enqueue(.publish(id, revision: revision, record))
    }

    /// Queues `operation`; starts the drain when none runs (the queue, not the drain, holds the order).
    func enqueue(_ operation: PublisherOperation) {
        publisherQueue.append(operation)
        guard !publisherDraining else { return }
        publisherDraining = true
        publisherDrain = Task { await drainPublisherQueue() }
    }

    /// Waits until every queued call is carried out.
    func publisherQueueDrained() async {
        while publisherDraining, let drain = publisherDrain { await drain.value }
    }

    /// Carries out the queued calls first to last; the answer of a publication is applied before
    /// the next call goes out.
    private func drainPublisherQueue() async {
        while let publisher, !publisherQueue.isEmpty {
            switch publisherQueue.removeFirst() {
            case .publish(let id, let revision, let record):
                do throws(RadioError) {
                    let receipt = try await publisher.publish(record, uid: id.uid)
                    await publishFinished(id, revision: revision, receipt: receipt)
                } catch {
                    let category: FailureCategory = switch error {
                    case .unavailable: .radioUnavailable
                    case .instanceLimit, .invalidLength, .failed: .advertRejected
                    }
                    await publishFailed(id, revision: revision, category: category)
                }
            case .withdraw(let uid):
                await publisher.withdraw(uid: uid)
            }
        }
        publisherDraining = false
    }

    /// The advert is on the air: the receipt says under which advert revision and what the radio
    /// does now, so the status needs no second call to the radio.
    func publishFinished(_ id: ActivityID, revision: UInt32, receipt: PublishReceipt) async {
        publishesInFlight -= 1
        adoptRadio(receipt.radio)
        await apply(registry.published(id, revision: revision, advertRevision: receipt.advertRevision))
    }

    /// The radio refused the advert: it is asked what it can do (the daemon may be degraded now).
    func publishFailed(_ id: ActivityID, revision: UInt32, category: FailureCategory) async {
        publishesInFlight -= 1
        await refreshRadio()
        errorLog.record(ErrorCategory(category), at: clock.unixSeconds())
        await apply(registry.publishFailed(id, revision: revision, category: category))
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
}

/// A publisher call, queued in the order the registry's events decided it.
enum PublisherOperation: Sendable {
    case publish(ActivityID, revision: UInt32, ActivityRecord)
    case withdraw(uid: UInt32)
}
