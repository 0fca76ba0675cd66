// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

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

/// The handlers of the machine's users and their session agents: who takes an incoming activity
/// of a type (a registered handler, or an installed app the user's agent starts), and the calls
/// to it (WillContinue, Continue, FailedToContinue) through the typed `HandlerCalls` port. No
/// D-Bus here: registrations arrive decoded from Bus/Manager1.
public actor Handlers {
    public static let maxHandlersPerUser = 32

    let configuration: ServiceConfiguration
    /// The handled-types index (installed apps' X-Baton-ActivityTypes and -ActivityVersions); the
    /// apps themselves are started by the user's session agent.
    let desktopEntries: any DesktopEntrySource
    let calls: any HandlerCalls
    let logger: any ServiceLog
    /// Where failures are recorded (the activities' error log and status file).
    let recordError: @Sendable (ErrorCategory) async -> Void
    /// The documents a delivery and the continuation use.
    let documents: Documents

    var handlers: [HandlerKey: RegisteredHandler] = [:]
    var handlerSequence: UInt64 = 0
    /// Session agents by user (Manager1.RegisterAgent): they launch handler apps in that user's session.
    var agents: [UInt32: HandlerKey] = [:]
    /// Connections seen leaving the bus: a registration racing its caller's disconnect is refused.
    var vanished = VanishedConnections()
    /// Continues waiting for a launched app's handler: resumed by its registration or its deadline.
    var waiters: [UInt64: HandlerWaiter] = [:]
    var waiterSerial: UInt64 = 0

    struct HandlerWaiter {
        var type: String
        var uid: UInt32
        var continuation: CheckedContinuation<RegisteredHandler?, Never>
    }

    package init(configuration: ServiceConfiguration, desktopEntries: any DesktopEntrySource, calls: any HandlerCalls,
                 documents: Documents, logger: any ServiceLog, recordError: @escaping @Sendable (ErrorCategory) async -> Void) {
        self.configuration = configuration
        self.desktopEntries = desktopEntries
        self.calls = calls
        self.documents = documents
        self.logger = logger
        self.recordError = recordError
    }

    // MARK: Registrations

    /// RegisterHandler(o, as) and RegisterHandlerWithOptions(o, as, a{sv}), decoded: `versions` are
    /// the activity versions the handler accepts (nil: every version). Wakes whoever waits for it.
    func registerHandler(_ key: HandlerKey, uid: UInt32, types: [String], versions: ActivityVersions?) throws(ActivityFailure) {
        guard handlers[key] == nil else { throw .alreadyExists("a handler is already registered at that path") }
        guard handlers.values.filter({ $0.uid == uid }).count < Self.maxHandlersPerUser else {
            throw .service(.limitExceeded("at most \(Self.maxHandlersPerUser) handlers per user"))
        }
        guard !vanished.contains(key.connection) else { throw .failed("the calling connection has closed") }
        handlerSequence += 1
        handlers[key] = RegisteredHandler(key: key, uid: uid, types: Array(Set(types)).sorted(), versions: versions, sequence: handlerSequence)
        logger.log("batond: handler registered by \(key.connection) for \(types.count) type(s)")
        for (serial, waiter) in waiters where waiter.uid == uid && types.contains(waiter.type) {
            waiters[serial] = nil
            waiter.continuation.resume(returning: newestHandler(for: waiter.type, uid: uid))
        }
    }

    func unregisterHandler(_ key: HandlerKey, uid: UInt32) throws(ActivityFailure) {
        guard handlers[key] != nil else {
            if handlers.values.contains(where: { $0.key.path == key.path && $0.uid != uid }) {
                throw .notPermitted("the handler belongs to another user")
            }
            throw .service(.unknownActivity("no such handler"))
        }
        handlers[key] = nil
        logger.log("batond: handler unregistered by \(key.connection)")
    }

    /// Manager1.RegisterAgent(o): the caller's connection serves org.baton.Agent1 at `path` for its
    /// user; the newest registration wins, and it ends when that connection closes.
    func registerAgent(_ key: HandlerKey, uid: UInt32) throws(ActivityFailure) {
        guard !vanished.contains(key.connection) else { throw .failed("the calling connection has closed") }
        agents[uid] = key
        logger.log("batond: session agent registered by \(key.connection) for user \(uid)")
    }

    /// Whether `uid` has a session agent that can launch apps (GetStatus "SessionAgent").
    public func hasAgent(uid: UInt32) -> Bool { agents[uid] != nil }

    /// A client left the bus: its handlers and agent registrations end.
    func connectionVanished(_ name: String) {
        vanished.insert(name)
        let removed = handlers.keys.filter { $0.connection == name }
        for key in removed { handlers[key] = nil }
        if !removed.isEmpty { logger.log("batond: \(removed.count) handler(s) of \(name) unregistered (disconnected)") }
        for (uid, agent) in agents where agent.connection == name {
            agents[uid] = nil
            logger.log("batond: the session agent of user \(uid) left")
        }
    }

    func handledTypes(uid: UInt32) -> [String] {
        var types = Set(handlers.values.filter { $0.uid == uid }.flatMap(\.types))
        for entry in desktopEntries.entries() { types.formUnion(entry.activityTypes) }
        return types.sorted()
    }

    func newestHandler(for type: String, uid: UInt32) -> RegisteredHandler? {
        handlers.values.filter { $0.uid == uid && $0.types.contains(type) }.max { $0.sequence < $1.sequence }
    }

    /// `uid`'s handler for `type` once it registers, or nil after `handlerWait`: the registration
    /// resumes the wait (no polling); a deadline task resumes it when none came.
    func waitForHandler(type: String, uid: UInt32) async -> RegisteredHandler? {
        if let handler = newestHandler(for: type, uid: uid) { return handler }
        waiterSerial += 1
        let serial = waiterSerial
        let deadline = Task { [weak self, wait = configuration.handlerWait] in
            try? await Task.sleep(for: wait)
            await self?.waitEnded(serial)
        }
        defer { deadline.cancel() }
        return await withCheckedContinuation { continuation in
            waiters[serial] = HandlerWaiter(type: type, uid: uid, continuation: continuation)
        }
    }

    private func waitEnded(_ serial: UInt64) {
        guard let waiter = waiters.removeValue(forKey: serial) else { return }
        waiter.continuation.resume(returning: newestHandler(for: waiter.type, uid: waiter.uid))
    }

    // MARK: Versions

    /// Whether `uid`'s handler for `type` accepts `version`: the newest registered handler's
    /// declaration, else the installed app's X-Baton-ActivityVersions; no declaration accepts all.
    public func acceptsVersion(_ version: Int64, type: String, uid: UInt32) async -> Bool {
        guard let declared = await versionDeclarations(type: type, uid: uid) else { return true }
        return declared.contains { $0.accepts(version) }
    }

    /// The declarations that decide for `type` (as in acceptsVersion): `uid`'s, or for nil (a
    /// prefetch, before anyone accepted) those of every user with a handler and the installed app's.
    /// nil when one of them declares nothing (every version) or nobody declares.
    public func versionDeclarations(type: String, uid: UInt32?) async -> [ActivityVersions]? {
        let installed = desktopEntries.entries().first { $0.activityTypes.contains(type) }
        var deciding: [ActivityVersions?] = []
        if let uid {
            if let handler = newestHandler(for: type, uid: uid) { deciding = [handler.versions] } else if let installed { deciding = [installed.versions] }
        } else {
            let users = Set(handlers.values.filter { $0.types.contains(type) }.map(\.uid))
            deciding = users.map { newestHandler(for: type, uid: $0)?.versions }
            if let installed { deciding.append(installed.versions) }
        }
        guard !deciding.isEmpty, !deciding.contains(where: { $0 == nil }) else { return nil }
        return deciding.compactMap { $0 }
    }

    /// The accepting handler's own declaration (its registration now); a handler gone since gets
    /// nothing anyway (Continue to it fails), so it restricts nothing here.
    public func versionDeclarations(of ticket: HandlerTicket) async -> [ActivityVersions]? {
        guard let key = ticket.handler else { return await versionDeclarations(type: ticket.type, uid: ticket.uid) }
        return handlers[key]?.versions.map { [$0] }
    }
}

/// Delivery to handlers: WillContinue before the fetch, then Continue or FailedToContinue with a
/// continuation failure category. An app that is not running is started by the user's session
/// agent (Agent1.Launch on the agent's connection to this bus); batond starts no programs itself.
extension Handlers: ContinuationActivities {
    /// Every activity type some local user can continue: registered handlers and installed apps.
    public func allHandledTypes() -> Set<String> {
        var types = Set(handlers.values.flatMap(\.types))
        for entry in desktopEntries.entries() { types.formUnion(entry.activityTypes) }
        return types
    }

    /// WillContinue then Continue in one go (Ring1.Continue's tests, the prefetched path).
    public func deliver(activity record: ActivityRecord, from device: String, to uid: UInt32) async -> DeliveryOutcome {
        switch await willContinue(type: record.activityType, from: device, uid: uid) {
        case .refused(let outcome): outcome
        case .accepted(let ticket): await deliver(activity: record, from: device, to: ticket)
        }
    }

    /// Finds `uid`'s newest handler for `type`, or has the user's session agent launch the
    /// installed app and waits for it to register; then asks WillContinue.
    public func willContinue(type: String, from device: String, uid: UInt32) async -> HandlerAnswer {
        var handler = newestHandler(for: type, uid: uid)
        if handler == nil {
            guard let entry = desktopEntries.entries().first(where: { $0.activityTypes.contains(type) }) else { return .refused(.noHandler) }
            guard let agent = agents[uid] else {
                logger.log("batond: no session agent runs for user \(uid): cannot start \(entry.id)")
                await recordError(.noAgent)
                return .refused(.noAgent)
            }
            switch await calls.launch(type: type, agent: agent) {
            case .success(let started):
                logger.log("batond: the session agent launched \(started ?? entry.id) for an incoming activity")
            case .failure(let error):
                logger.log("batond: the session agent cannot launch \(entry.id): \(error)")
                await recordError(.launchFailed)
                return .refused(.launchFailed)
            }
            handler = await waitForHandler(type: type, uid: uid)
            guard handler != nil else {
                logger.log("batond: \(entry.id) registered no handler in time")
                await recordError(.launchFailed)
                return .refused(.launchFailed)
            }
        }
        guard let handler else { return .refused(.noHandler) }
        let target = handler.key
        switch await calls.willContinue(type: type, from: device, handler: target) {
        case .success(let answer):
            return answer ? .accepted(HandlerTicket(uid: uid, type: type, handler: target)) : .refused(.declined)
        case .failure:
            await recordError(.handlerFailed)
            return .refused(.failed)
        }
    }

    /// Continue to the handler that accepted; when that call fails the handler hears
    /// FailedToContinue "cancelled" (it refused what it had accepted) or "timedOut".
    public func deliver(activity record: ActivityRecord, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        await deliver(activity: record, document: nil, from: device, to: ticket)
    }

    /// As above, with the activity's document handed to the handler beside the userInfo (a read-only
    /// descriptor, Bus/ActivityApps.swift).
    public func deliver(activity record: ActivityRecord, document: PulledDocument?, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        guard let target = ticket.handler else { return .noHandler }
        switch await calls.continueActivity(record, document: document, from: device, handler: target) {
        case .delivered:
            logger.log("batond: activity delivered to \(target.connection)")
            return .delivered
        case .documentUnopenable:
            await recordError(.handlerFailed)
            await failedToContinue(ticket, .interrupted, detail: "the document cannot be opened")
            return .failed
        case .failed(let error):
            await recordError(.handlerFailed)
            await failedToContinue(ticket, error == .timedOut ? .timedOut : .cancelled, detail: "the handler did not accept the activity")
            return .failed
        }
    }

    /// FailedToContinue(type, category, "category: detail") to the handler that accepted.
    public func failedToContinue(_ ticket: HandlerTicket, _ failure: ContinuationFailure, detail: String) async {
        guard let target = ticket.handler else { return }
        await calls.failedToContinue(type: ticket.type, failure, message: failure.message(detail), handler: target)
    }

    // MARK: Documents and edit sessions (the continuation's, kept by `Documents`)

    public func documentInbox(uid: UInt32) async -> DocumentInbox? { await documents.documentInbox(uid: uid) }
    public func editSessionsForContinue() async -> EditSessions? { await documents.editSessions }
    public func holdsReceivedDocument(digest: [UInt8]) async -> Bool { await documents.holdsReceivedDocument(digest: digest) }

    /// Claims abandoned because their owner left the ring (§6.6): one `edit-session-lost` record
    /// each, and the words for the person in the log, naming the document by its id (as error
    /// records and the log never carry an activity's title).
    public func editSessionsLost(_ lost: [LostEditSession]) async {
        for claim in lost {
            logger.log("batond: " + claim.sentence(documentName: claim.documentID))
            await recordError(.editSessionLost)
        }
    }
}

/// The calls to handlers and session agents (ActivityHandler1 and Agent1 on D-Bus,
/// Bus/ActivityApps): typed here, coded at the bus edge. No requirement has a default.
package protocol HandlerCalls: Sendable {
    /// Agent1.Launch: the session agent starts the app handling `type`; what it started, or why not.
    func launch(type: String, agent: HandlerKey) async -> Result<String?, ApplicationCallError>
    /// ActivityHandler1.WillContinue: the handler's yes or no.
    func willContinue(type: String, from device: String, handler: HandlerKey) async -> Result<Bool, ApplicationCallError>
    /// ActivityHandler1.Continue with the record (and the document's read-only descriptor).
    func continueActivity(_ record: ActivityRecord, document: PulledDocument?, from device: String, handler: HandlerKey) async -> ContinueCallOutcome
    /// ActivityHandler1.FailedToContinue(type, category, message); errors are ignored.
    func failedToContinue(type: String, _ failure: ContinuationFailure, message: String, handler: HandlerKey) async
}

/// Why a call to an application failed.
public enum ApplicationCallError: Error, Sendable, Hashable {
    /// The application did not answer in time.
    case timedOut
    /// Its connection is gone.
    case gone
    /// It answered with an error or a malformed reply; the detail is for the log.
    case failed(String)
}

/// How ActivityHandler1.Continue went.
public enum ContinueCallOutcome: Sendable, Hashable {
    case delivered
    /// The received document could not be opened for the handler: nothing was sent.
    case documentUnopenable
    case failed(ApplicationCallError)
}

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
