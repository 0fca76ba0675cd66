import BatonCore
import BatonDBus

extension ActivityService {
    // MARK: Manager1

    nonisolated func managerInterface() -> DBusInterface {
        DBusInterface(BatonInterface.manager, methods: [
            DBusMethod("CreateActivity", in: [.init("type", "s"), .init("title", "s"), .init("userInfo", "a{sv}"), .init("options", "a{sv}")],
                       out: [.init("activity", "o")], budget: .userInfoCall) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                return [.objectPath(try await self.createActivity(call))]
            },
            DBusMethod("GetCurrentActivity", out: [.init("activity", "o")]) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                return [.objectPath(try await self.currentActivityPath(for: call.sender))]
            },
            DBusMethod("RegisterHandler", in: [.init("handler", "o"), .init("types", "as")]) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                try await self.registerHandler(call)
                return []
            },
            DBusMethod("UnregisterHandler", in: [.init("handler", "o")]) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                try await self.unregisterHandler(call)
                return []
            },
            DBusMethod("GetHandledTypes", out: [.init("types", "as")]) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                return [.stringArray(try await self.handledTypes(for: call.sender))]
            },
            DBusMethod("GetStatus", out: [.init("status", "a{sv}")]) { [weak self] _ in
                guard let self else { throw DBusError.failed("stopping") }
                return [await self.statusDictionary()]
            },
        ], properties: [
            DBusProperty("Version", signature: "s") { [configuration] in .string(configuration.version) },
            DBusProperty("BusName", signature: "s") { [configuration] in .string(configuration.busName) },
        ])
    }

    func createActivity(_ call: DBusMethodCall) async throws -> String {
        let uid = try await callerUID(call.sender)
        guard call.arguments.count == 4, let type = call.arguments[0].stringValue, let title = call.arguments[1].stringValue else {
            throw DBusError.invalidArguments("CreateActivity takes (s type, s title, a{sv} userInfo, a{sv} options)")
        }
        let userInfo = try Self.decode { () throws(RegistryError) in try UserInfoCoding.decodeUserInfo(call.arguments[2]) }
        let options = try Self.decodeOptions(call.arguments[3])
        if let source = options.sourcePath, source == "/" {
            throw DBusError.invalidArguments("Source must be an object path other than /")
        }
        guard !recentlyVanished.contains(call.sender) else { throw DBusError.failed("the calling connection has closed") }
        let (id, events) = try Self.decode { () throws(RegistryError) in
            try registry.create(owner: ActivityOwner(uid: uid, connection: call.sender), type: type, title: title,
                                userInfo: userInfo, options: options)
        }
        await apply(events)
        return id.objectPath
    }

    func currentActivityPath(for sender: String) async throws -> String {
        let uid = try await callerUID(sender)
        return registry.currentActivity(of: uid)?.objectPath ?? "/"
    }

    func statusDictionary() -> DBusValue {
        let errors = errorLog.records.map { record in
            DBusValue.propertyDictionary([
                "Time": .int64(record.time), "Category": .string(record.category.rawValue), "Count": .uint32(record.count),
            ])
        }
        return .propertyDictionary([
            "State": .string(state.rawValue),
            "Adapter": .string(configuration.adapter),
            "Radio": .string(radioName),
            "Errors": .array(elementSignature: "a{sv}", errors),
        ])
    }

    static func decode<T>(_ body: () throws(RegistryError) -> T) throws(DBusError) -> T {
        do {
            return try body()
        } catch {
            throw DBusError(error)
        }
    }

    static func decodeOptions(_ value: DBusValue) throws(DBusError) -> ActivityOptions {
        guard let entries = value.asDictionary else { throw DBusError.invalidArguments("options must be a{sv}") }
        var options = ActivityOptions()
        for (key, raw) in entries {
            switch key {
            case "WebpageURL":
                guard case .string(let url) = raw else { throw DBusError.invalidArguments("option WebpageURL must be a string (s)") }
                options.webpageURL = url.isEmpty ? nil : url
            case "Version":
                guard case .int64(let version) = raw else { throw DBusError.invalidArguments("option Version must be int64 (x)") }
                options.version = version
            case "NeedsSave":
                guard case .boolean(let needsSave) = raw else { throw DBusError.invalidArguments("option NeedsSave must be a boolean (b)") }
                options.needsSave = needsSave
            case "Source":
                guard case .objectPath(let path) = raw else { throw DBusError.invalidArguments("option Source must be an object path (o)") }
                options.sourcePath = path
            default:
                // The key is the caller's own option name, not payload; bounded so the message stays short.
                throw DBusError.invalidArguments("unknown option \"\(key.prefix(64))\"")
            }
        }
        return options
    }

    /// Update's and WillSave's dictionary of changes.
    static func decodeChanges(_ value: DBusValue, allowed: Set<String>) throws(DBusError) -> ActivityChanges {
        guard let entries = value.asDictionary else { throw DBusError.invalidArguments("changes must be a{sv}") }
        var changes = ActivityChanges()
        for (key, raw) in entries {
            guard allowed.contains(key) else { throw DBusError.invalidArguments("unknown or read-only property \"\(key.prefix(64))\"") }
            switch key {
            case "Title":
                guard case .string(let title) = raw else { throw DBusError.invalidArguments("Title must be a string (s)") }
                changes.title = title
            case "UserInfo":
                changes.userInfo = try decode { () throws(RegistryError) in try UserInfoCoding.decodeUserInfo(raw) }
            case "WebpageURL":
                guard case .string(let url) = raw else { throw DBusError.invalidArguments("WebpageURL must be a string (s)") }
                changes.webpageURL = .some(url.isEmpty ? nil : url)
            case "Version":
                guard case .int64(let version) = raw else { throw DBusError.invalidArguments("Version must be int64 (x)") }
                changes.version = version
            case "NeedsSave":
                guard case .boolean(let needsSave) = raw else { throw DBusError.invalidArguments("NeedsSave must be a boolean (b)") }
                changes.needsSave = needsSave
            default:
                throw DBusError.invalidArguments("unknown property \"\(key.prefix(64))\"")
            }
        }
        return changes
    }

    // MARK: Activity1

    nonisolated func activityInterface(_ id: ActivityID) -> DBusInterface {
        func method(_ name: String, in inArguments: [DBusArgument] = [], out outArguments: [DBusArgument] = [],
                    _ body: @escaping @Sendable (ActivityService, UInt32, DBusMethodCall) async throws -> [DBusValue]) -> DBusMethod {
            DBusMethod(name, in: inArguments, out: outArguments, budget: .userInfoCall) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.callerUID(call.sender)
                return try await body(self, uid, call)
            }
        }
        let properties = ActivityField.allCases.map { field in
            DBusProperty(field.rawValue, signature: Self.signature(of: field)) { [weak self] in
                guard let self else { throw DBusError.failed("stopping") }
                return try await self.propertyValue(field, of: id, sender: DBusCallContext.sender)
            }
        }
        return DBusInterface(BatonInterface.activity, methods: [
            method("Update", in: [.init("changes", "a{sv}")]) { service, uid, call in
                try await service.update(id, uid: uid, changes: call.arguments[0])
                return []
            },
            method("BecomeCurrent") { service, uid, _ in
                try await service.transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.becomeCurrent(id, by: uid) }
                return []
            },
            method("ResignCurrent") { service, uid, _ in
                try await service.transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.resign(id, by: uid) }
                return []
            },
            method("Invalidate") { service, uid, _ in
                try await service.transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.invalidate(id, by: uid) }
                return []
            },
            method("GetPayload", out: [.init("payload", "a{sv}")]) { service, uid, _ in
                [try await service.payload(id, uid: uid)]
            },
        ], properties: properties)
    }

    static func signature(of field: ActivityField) -> String {
        switch field {
        case .type, .title, .webpageURL, .status, .lastError: "s"
        case .userInfo: "a{sv}"
        case .version: "x"
        case .needsSave, .current: "b"
        case .owner, .revision: "u"
        }
    }

    func transition(_ id: ActivityID, uid: UInt32,
                    _ body: (inout ActivityRegistry, ActivityID, UInt32) throws(RegistryError) -> [RegistryEvent]) async throws {
        let events = try Self.decode { () throws(RegistryError) in try body(&registry, id, uid) }
        await apply(events)
    }

    func update(_ id: ActivityID, uid: UInt32, changes value: DBusValue) async throws {
        // Ownership first: another user learns nothing from validation errors.
        _ = try Self.decode { () throws(RegistryError) in try registry.activity(id, for: uid) }
        let changes = try Self.decodeChanges(value, allowed: ["Title", "UserInfo", "WebpageURL", "Version", "NeedsSave"])
        try await transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.update(id, by: uid, changes: changes) }
    }
}
