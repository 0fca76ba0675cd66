// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

/// org.baton.Manager1 at /org/baton: create activities, find the current one, register handlers;
/// its arguments decoded into typed values (below).
extension ActivityBus {
    func managerInterface() -> DBusInterface {
        DBusInterface(BatonInterface.manager, methods: [
            DBusMethod(OrgBaton.Manager1.createActivity, budget: .userInfoCall) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                return [.objectPath(try await self.createActivity(call))]
            },
            DBusMethod(OrgBaton.Manager1.getCurrentActivity) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities()
                let uid = try await self.callerUID(call.sender)
                return [.objectPath(await activities.currentActivity(of: uid)?.objectPath ?? "/")]
            },
            DBusMethod(OrgBaton.Manager1.registerHandler) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                try await self.registerHandler(call)
                return []
            },
            DBusMethod(OrgBaton.Manager1.registerHandlerWithOptions) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                try await self.registerHandler(call)
                return []
            },
            DBusMethod(OrgBaton.Manager1.unregisterHandler) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities(), handlers = try self.handlers()
                let uid = try await self.callerUID(call.sender)
                guard let path = call.arguments.first?.objectPathValue else { throw DBusError.invalidArguments("UnregisterHandler takes (o handler)") }
                try await mappingActivityFailures { () throws(ActivityFailure) in
                    try await handlers.unregisterHandler(HandlerKey(connection: call.sender, path: path), uid: uid)
                }
                return []
            },
            DBusMethod(OrgBaton.Manager1.registerAgent) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities(), handlers = try self.handlers()
                let uid = try await self.callerUID(call.sender)
                guard let path = call.arguments.first?.objectPathValue, path != "/" else {
                    throw DBusError.invalidArguments("RegisterAgent takes (o agent), a path other than /")
                }
                try await mappingActivityFailures { () throws(ActivityFailure) in
                    try await handlers.registerAgent(HandlerKey(connection: call.sender, path: path), uid: uid)
                }
                return []
            },
            DBusMethod(OrgBaton.Manager1.getHandledTypes) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities(), handlers = try self.handlers()
                let uid = try await self.callerUID(call.sender)
                return [.stringArray(await handlers.handledTypes(uid: uid))]
            },
            DBusMethod(OrgBaton.Manager1.getStatus) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities(), handlers = try self.handlers()
                let uid = try? await self.callerUID(call.sender)
                var status = await activities.managerStatus(for: uid)
                // Per caller: whether an app continued for this user can be started.
                if let uid { status.sessionAgent = await handlers.hasAgent(uid: uid) }
                return [status.dbusValue]
            },
        ], properties: [
            DBusProperty(OrgBaton.Manager1.version) { [configuration] in .string(configuration.version) },
            DBusProperty(OrgBaton.Manager1.busName) { [configuration] in .string(configuration.busName) },
        ])
    }

    func createActivity(_ call: DBusMethodCall) async throws -> String {
        let activities = try activities()
        let uid = try await self.callerUID(call.sender)
        guard call.arguments.count == 4, let type = call.arguments[0].stringValue, let title = call.arguments[1].stringValue else {
            throw DBusError.invalidArguments("CreateActivity takes (s type, s title, a{sv} userInfo, a{sv} options)")
        }
        let userInfo = try Self.decode { () throws(RegistryError) in try PropertyValueCoding.registryUserInfo(call.arguments[2]) }
        let options = try Self.decodeOptions(call.arguments[3])
        if let source = options.sourcePath, source == "/" {
            throw DBusError.invalidArguments("Source must be an object path other than /")
        }
        let id = try await mappingActivityFailures { () throws(ActivityFailure) in
            try await activities.createActivity(sender: call.sender, uid: uid, type: type, title: title, userInfo: userInfo, options: options)
        }
        return id.objectPath
    }

    func registerHandler(_ call: DBusMethodCall) async throws {
        let activities = try activities(), handlers = try handlers()
        let uid = try await self.callerUID(call.sender)
        let (path, types, versions) = try Self.decodeHandler(call.arguments)
        try await mappingActivityFailures { () throws(ActivityFailure) in
            try await handlers.registerHandler(HandlerKey(connection: call.sender, path: path), uid: uid, types: types, versions: versions)
        }
    }

    // MARK: Arguments

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

    /// The options of RegisterHandlerWithOptions: unknown keys and malformed versions are refused
    /// (a handler that meant to restrict its versions must not silently accept all of them).
    static func decodeHandlerVersions(_ value: DBusValue) throws(DBusError) -> ActivityVersions? {
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

    /// RegisterHandler's handler path and types: a path other than /, 1 to 64 valid activity types.
    static func decodeHandler(_ arguments: [DBusValue]) throws(DBusError) -> (path: String, types: [String], versions: ActivityVersions?) {
        guard arguments.count == 2 || arguments.count == 3, let path = arguments[0].objectPathValue,
              let types = arguments[1].stringArrayValue else {
            throw DBusError.invalidArguments("RegisterHandler takes (o handler, as types[, a{sv} options])")
        }
        let versions = arguments.count == 3 ? try decodeHandlerVersions(arguments[2]) : nil
        guard path != "/" else { throw DBusError.invalidArguments("handler must be an object path other than /") }
        guard !types.isEmpty, types.count <= 64 else { throw DBusError.invalidArguments("give 1 to 64 activity types") }
        for type in types {
            do {
                try ActivityRecord.validateType(type)
            } catch {
                throw DBusError.invalidArguments("invalid activity type")
            }
        }
        return (path, types, versions)
    }
}
