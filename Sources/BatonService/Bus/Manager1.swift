// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

/// org.baton.Manager1 at /org/baton: create activities, find the current one, register handlers.
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
                let uid = try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.callerUID(call.sender) }
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
                let uid = try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.callerUID(call.sender) }
                guard let path = call.arguments.first?.objectPathValue else { throw DBusError.invalidArguments("UnregisterHandler takes (o handler)") }
                try await mappingActivityFailures { () throws(ActivityFailure) in
                    try await handlers.unregisterHandler(HandlerKey(connection: call.sender, path: path), uid: uid)
                }
                return []
            },
            DBusMethod(OrgBaton.Manager1.registerAgent) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities(), handlers = try self.handlers()
                let uid = try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.callerUID(call.sender) }
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
                let uid = try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.callerUID(call.sender) }
                return [.stringArray(await handlers.handledTypes(uid: uid))]
            },
            DBusMethod(OrgBaton.Manager1.getStatus) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities(), handlers = try self.handlers()
                var (status, uid) = await activities.managerStatus(for: call.sender)
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
        let uid = try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.callerUID(call.sender) }
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
        let uid = try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.callerUID(call.sender) }
        let (path, types, versions) = try Self.decodeHandler(call.arguments)
        try await mappingActivityFailures { () throws(ActivityFailure) in
            try await handlers.registerHandler(HandlerKey(connection: call.sender, path: path), uid: uid, types: types, versions: versions)
        }
    }
}
