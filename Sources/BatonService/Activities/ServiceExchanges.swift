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

    func registerHandler(_ call: DBusMethodCall) async throws {
        let uid = try await callerUID(call.sender)
        guard call.arguments.count == 2, let path = call.arguments[0].objectPathValue, let types = call.arguments[1].stringArrayValue else {
            throw DBusError.invalidArguments("RegisterHandler takes (o handler, as types)")
        }
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
        handlers[key] = RegisteredHandler(key: key, uid: uid, types: Array(Set(types)).sorted(), sequence: handlerSequence)
        logger.log("batond: handler registered by \(call.sender) for \(types.count) type(s)")
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

    /// Hands an incoming activity to `uid`'s handler for its type: a registered one, or an installed
    /// application launched for it (only when the daemon runs as that user: it never starts programs
    /// on another user's behalf). Used by the transfer.
    public func deliver(activity record: ActivityRecord, from device: String, to uid: UInt32) async -> DeliveryOutcome {
        await deliver(activity: record, document: nil, from: device, to: uid)
    }

    /// As above, with the activity's document handed to the handler beside the userInfo (a read-only
    /// descriptor, ActivityService+Documents).
    public func deliver(activity record: ActivityRecord, document: PulledDocument?, from device: String, to uid: UInt32) async -> DeliveryOutcome {
        let type = record.activityType
        var handler = newestHandler(for: type, uid: uid)
        if handler == nil {
            guard let entry = desktopEntries.entries().first(where: { $0.activityTypes.contains(type) }) else { return .noHandler }
            guard uid == getuid() else { return .noHandler }
            do {
                try await launcher.launch(entry)
                logger.log("batond: launched \(entry.id) for an incoming activity")
            } catch {
                logger.log("batond: cannot launch \(entry.id)")
                recordError(.launchFailed)
                return .launchFailed
            }
            handler = await waitForHandler(type: type, uid: uid)
            guard handler != nil else {
                logger.log("batond: \(entry.id) registered no handler in time")
                recordError(.launchFailed)
                return .launchFailed
            }
        }
        guard let handler else { return .noHandler }
        let target = handler.key
        let accepted: Bool
        do {
            let reply = try await connection.call(destination: target.connection, path: target.path, interface: BatonInterface.handler,
                                                  method: "WillContinue", arguments: [.string(type), .string(device)],
                                                  timeout: configuration.handlerCallTimeout)
            guard reply.count == 1, case .boolean(let answer) = reply[0] else {
                recordError(.handlerFailed)
                return .failed
            }
            accepted = answer
        } catch {
            recordError(.handlerFailed)
            return .failed
        }
        guard accepted else { return .declined }
        var info: [String: DBusValue] = ["Version": .int64(record.version), "Device": .string(device)]
        if let url = record.webpageURL { info["WebpageURL"] = .string(url) }
        var descriptor: Int32?
        if let document {
            guard let (value, opened) = Self.handlerDocument(document) else {
                recordError(.handlerFailed)
                await failedToContinue(target, type: type, error: BatonErrorName.failed.rawValue, message: "the document cannot be opened")
                return .failed
            }
            info["Document"] = value
            descriptor = opened
        }
        // libdbus sent its own duplicate: ours closes once the call is done.
        defer { if let descriptor { close(descriptor) } }
        do {
            _ = try await connection.call(destination: target.connection, path: target.path, interface: BatonInterface.handler,
                                          method: "Continue",
                                          arguments: [.string(type), .string(record.title), PropertyValueCoding.encodeUserInfo(record.userInfo),
                                                      .propertyDictionary(info)],
                                          timeout: configuration.handlerCallTimeout)
            logger.log("batond: activity delivered to \(target.connection)")
            return .delivered
        } catch {
            recordError(.handlerFailed)
            await failedToContinue(target, type: type, error: BatonErrorName.failed.rawValue, message: "the handler did not accept the activity")
            return .failed
        }
    }

    /// Tells an accepting handler that its continuation could not complete (e.g. the transfer failed).
    func failedToContinue(_ target: HandlerKey, type: String, error: String, message: String) async {
        _ = try? await connection.call(destination: target.connection, path: target.path, interface: BatonInterface.handler,
                                       method: "FailedToContinue", arguments: [.string(type), .string(error), .string(message)],
                                       timeout: configuration.handlerCallTimeout)
    }

    private func waitForHandler(type: String, uid: UInt32) async -> RegisteredHandler? {
        let deadline = ContinuousClock.now + configuration.handlerWait
        while ContinuousClock.now < deadline {
            if let handler = newestHandler(for: type, uid: uid) { return handler }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return newestHandler(for: type, uid: uid)
    }
}
