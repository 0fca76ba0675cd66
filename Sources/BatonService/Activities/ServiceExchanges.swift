// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonDBus

extension ActivityService {
    // MARK: WillSave and the payload

    /// Runs WillSave when needed, then returns the state that would leave the machine.
    func payload(_ id: ActivityID, uid: UInt32) async throws -> DBusValue {
        let record = try await recordLeavingMachine(id, uid: uid)
        var entries: [String: DBusValue] = [
            "Type": .string(record.activityType), "Title": .string(record.title),
            "UserInfo": PropertyValueCoding.encodeUserInfo(record.userInfo), "Version": .int64(record.version),
        ]
        if let url = record.webpageURL { entries["WebpageURL"] = .string(url) }
        return .propertyDictionary(entries)
    }

    /// The activity's record after the WillSave exchange (if NeedsSave and a Source are set). A late,
    /// failing or invalid answer leaves the last saved state and records source-timeout (source-gone
    /// when the owner has left the bus).
    func recordLeavingMachine(_ id: ActivityID, uid: UInt32) async throws -> ActivityRecord {
        let activity = try Self.decode { () throws(RegistryError) in try registry.activity(id, for: uid) }
        if activity.needsSave, let source = activity.sourcePath {
            if let failure = await askSourceToSave(activity, source: source) {
                errorLog.record(ErrorCategory(failure), at: clock.unixSeconds())
                await apply(registry.recordFailure(id, category: failure))
                logger.log("batond: WillSave for \(id.objectPath) failed: \(failure.rawValue)")
            }
        }
        // The activity may have been invalidated while the source was asked.
        return try Self.decode { () throws(RegistryError) in try registry.activity(id, for: uid) }.record
    }

    /// Nil on success (changes applied), else the failure category.
    private func askSourceToSave(_ activity: Activity, source: String) async -> FailureCategory? {
        let reply: [DBusValue]
        do {
            reply = try await connection.call(destination: activity.owner.connection, path: source, interface: BatonInterface.source,
                                              method: "WillSave", arguments: [.objectPath(activity.id.objectPath)],
                                              timeout: configuration.saveTimeout)
        } catch let error as DBusError {
            let gone: Set<String> = [DBusError.serviceUnknownName, DBusError.nameHasNoOwnerName, DBusError.disconnectedName]
            return gone.contains(error.name) ? .sourceGone : .sourceTimeout
        } catch {
            return .sourceTimeout
        }
        guard reply.count == 1 else { return .sourceTimeout }
        do {
            let changes = try Self.decodeChanges(reply[0], allowed: ["Title", "UserInfo", "WebpageURL", "Version"])
            let events = try Self.decode { () throws(RegistryError) in
                try registry.update(activity.id, by: activity.owner.uid, changes: changes)
            }
            await apply(events)
            return nil
        } catch {
            return .sourceTimeout
        }
    }

    /// Tells the source its activity was continued on `device` (once per transfer). Failures are
    /// recorded as source-gone and otherwise ignored.
    public func notifyWasContinued(_ id: ActivityID, device: String) async {
        guard let activity = registry.activities[id], let source = activity.sourcePath else { return }
        do {
            _ = try await connection.call(destination: activity.owner.connection, path: source, interface: BatonInterface.source,
                                          method: "WasContinued", arguments: [.objectPath(id.objectPath), .string(device)],
                                          timeout: configuration.saveTimeout)
        } catch {
            recordError(.sourceGone)
        }
    }

    // MARK: Handlers

    /// RegisterHandler(o, as) and RegisterHandlerWithOptions(o, as, a{sv}); the only option is
    /// Versions a(xx), the activity versions the handler accepts (none declared: every version).
    func registerHandler(_ call: DBusMethodCall) async throws {
        let uid = try await callerUID(call.sender)
        guard call.arguments.count == 2 || call.arguments.count == 3, let path = call.arguments[0].objectPathValue,
              let types = call.arguments[1].stringArrayValue else {
            throw DBusError.invalidArguments("RegisterHandler takes (o handler, as types[, a{sv} options])")
        }
        let versions = call.arguments.count == 3 ? try Self.decodeHandlerVersions(call.arguments[2]) : nil
        guard path != "/" else { throw DBusError.invalidArguments("handler must be an object path other than /") }
        guard !types.isEmpty, types.count <= 64 else { throw DBusError.invalidArguments("give 1 to 64 activity types") }
        for type in types {
            do {
                try ActivityRecord.validateType(type)
            } catch {
                throw DBusError.invalidArguments("invalid activity type")
            }
        }
        let key = HandlerKey(connection: call.sender, path: path)
        guard handlers[key] == nil else { throw DBusError.baton(BatonErrorName.alreadyExists, "a handler is already registered at that path") }
        guard handlers.values.filter({ $0.uid == uid }).count < Self.maxHandlersPerUser else {
            throw DBusError.baton(BatonErrorName.limitExceeded, "at most \(Self.maxHandlersPerUser) handlers per user")
        }
        guard !recentlyVanished.contains(call.sender) else { throw DBusError.failed("the calling connection has closed") }
        handlerSequence += 1
        handlers[key] = RegisteredHandler(key: key, uid: uid, types: Array(Set(types)).sorted(), versions: versions, sequence: handlerSequence)
        logger.log("batond: handler registered by \(call.sender) for \(types.count) type(s)")
    }

    /// The options of RegisterHandlerWithOptions: unknown keys and malformed versions are refused
    /// (a handler that meant to restrict its versions must not silently accept all of them).
    static func decodeHandlerVersions(_ value: DBusValue) throws -> ActivityVersions? {
        guard let options = value.asDictionary else { throw DBusError.invalidArguments("options must be a{sv}") }
        if let unknown = options.keys.sorted().first(where: { $0 != "Versions" }) {
            throw DBusError.invalidArguments("unknown option \(unknown)")
        }
        guard let raw = options["Versions"] else { return nil }
        guard case .array("(xx)", let elements) = raw.unwrapped else { throw DBusError.invalidArguments("Versions must be a(xx)") }
        var pairs: [(Int64, Int64)] = []
        for element in elements {
            guard let fields = element.structValue, fields.count == 2, let first = fields[0].int64Value, let last = fields[1].int64Value else {
                throw DBusError.invalidArguments("Versions must be a(xx)")
            }
            pairs.append((first, last))
        }
        do {
            return try ActivityVersions(pairs: pairs)
        } catch {
            switch error {
            case .empty: throw DBusError.invalidArguments("Versions: give at least one range")
            case .tooManyRanges: throw DBusError.invalidArguments("Versions: at most \(ActivityVersions.maxRanges) ranges")
            case .reversedRange, .malformed: throw DBusError.invalidArguments("Versions: each range is (first, last) with first <= last")
            }
        }
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

    func unregisterHandler(_ call: DBusMethodCall) async throws {
        let uid = try await callerUID(call.sender)
        guard let path = call.arguments.first?.objectPathValue else { throw DBusError.invalidArguments("UnregisterHandler takes (o handler)") }
        let key = HandlerKey(connection: call.sender, path: path)
        guard handlers[key] != nil else {
            if handlers.values.contains(where: { $0.key.path == path && $0.uid != uid }) {
                throw DBusError.notPermitted("the handler belongs to another user")
            }
            throw DBusError.baton(BatonErrorName.unknownActivity, "no such handler")
        }
        handlers[key] = nil
        logger.log("batond: handler unregistered by \(call.sender)")
    }

    func handledTypes(for sender: String) async throws -> [String] {
        let uid = try await callerUID(sender)
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
