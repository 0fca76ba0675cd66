// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore

extension Activities {
    // MARK: WillSave and the payload

    /// The activity's record after the WillSave exchange (if NeedsSave and a Source are set). A late,
    /// failing or invalid answer leaves the last saved state and records source-timeout (source-gone
    /// when the owner has left the bus).
    func recordLeavingMachine(_ id: ActivityID, uid: UInt32) async throws(ActivityFailure) -> ActivityRecord {
        let saving = try activity(id, for: uid)
        if saving.needsSave, let source = saving.sourcePath {
            if let failure = await askSourceToSave(saving, source: source) {
                errorLog.record(ErrorCategory(failure), at: clock.unixSeconds())
                await apply(registry.recordFailure(id, category: failure))
                logger.log("batond: WillSave for \(id.objectPath) failed: \(failure.rawValue)")
            }
        }
        // The activity may have been invalidated while the source was asked.
        return try activity(id, for: uid).record
    }

    /// Nil on success (changes applied), else the failure category.
    private func askSourceToSave(_ activity: Activity, source: String) async -> FailureCategory? {
        switch await apps.willSave(activity, source: source) {
        case .failed(let category): return category
        case .changes(let changes):
            do {
                let events = try registry.update(activity.id, by: activity.owner.uid, changes: changes)
                await apply(events)
                return nil
            } catch {
                return .sourceTimeout
            }
        }
    }

    /// Tells the source its activity was continued on `device` (once per transfer). Failures are
    /// recorded as source-gone and otherwise ignored.
    public func notifyWasContinued(_ id: ActivityID, device: String) async {
        guard let activity = registry.activities[id], let source = activity.sourcePath else { return }
        if await !apps.wasContinued(activity, source: source, device: device) { recordError(.sourceGone) }
    }

    // MARK: Handlers

    /// RegisterHandler(o, as) and RegisterHandlerWithOptions(o, as, a{sv}), decoded: `versions` are
    /// the activity versions the handler accepts (nil: every version).
    func registerHandler(_ key: HandlerKey, uid: UInt32, types: [String], versions: ActivityVersions?) throws(ActivityFailure) {
        guard handlers[key] == nil else { throw .alreadyExists("a handler is already registered at that path") }
        guard handlers.values.filter({ $0.uid == uid }).count < Self.maxHandlersPerUser else {
            throw .service(.limitExceeded("at most \(Self.maxHandlersPerUser) handlers per user"))
        }
        try requireConnected(key.connection)
        handlerSequence += 1
        handlers[key] = RegisteredHandler(key: key, uid: uid, types: Array(Set(types)).sorted(), versions: versions, sequence: handlerSequence)
        logger.log("batond: handler registered by \(key.connection) for \(types.count) type(s)")
    }

    /// Whether `uid`'s handler for `type` accepts `version`: the newest registered handler's
    /// declaration, else the installed app's X-Baton-ActivityVersions; no declaration accepts all.
    /// async like the requirement, so it (not the protocol's accept-all default) is the witness.
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

    func handledTypes(uid: UInt32) -> [String] {
        var types = Set(handlers.values.filter { $0.uid == uid }.flatMap(\.types))
        for entry in desktopEntries.entries() { types.formUnion(entry.activityTypes) }
        return types.sorted()
    }

    func newestHandler(for type: String, uid: UInt32) -> RegisteredHandler? {
        handlers.values.filter { $0.uid == uid && $0.types.contains(type) }.max { $0.sequence < $1.sequence }
    }

    func waitForHandler(type: String, uid: UInt32) async -> RegisteredHandler? {
        let deadline = ContinuousClock.now + configuration.handlerWait
        while ContinuousClock.now < deadline {
            if let handler = newestHandler(for: type, uid: uid) { return handler }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return newestHandler(for: type, uid: uid)
    }
}
