// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

/// org.baton.Manager1 at /org/baton: create activities, find the current one, register handlers.
extension ActivityService {
    nonisolated func managerInterface() -> DBusInterface {
        DBusInterface(BatonInterface.manager, methods: [
            DBusMethod(OrgBaton.Manager1.createActivity, budget: .userInfoCall) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                return [.objectPath(try await self.createActivity(call))]
            },
            DBusMethod(OrgBaton.Manager1.getCurrentActivity) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                return [.objectPath(try await self.currentActivityPath(for: call.sender))]
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
                try await self.unregisterHandler(call)
                return []
            },
            DBusMethod(OrgBaton.Manager1.registerAgent) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                try await self.registerAgent(call)
                return []
            },
            DBusMethod(OrgBaton.Manager1.getHandledTypes) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                return [.stringArray(try await self.handledTypes(for: call.sender))]
            },
            DBusMethod(OrgBaton.Manager1.getStatus) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                await self.refreshRadio()
                var status = await self.managerStatus()
                let uid = try? await self.callerUID(call.sender)
                // Names a pairing peer or member: for the machine's ring users only (RingService.refusedChange).
                if let uid, let refusal = await self.ringRefusal?(uid) {
                    status.ringChangeRefused = refusal.sentence
                    status.ringChangeRefusedTime = refusal.time
                }
                // Per caller: whether an app continued for this user can be started.
                if let uid { status.sessionAgent = await self.hasAgent(uid: uid) }
                return [status.dbusValue]
            },
        ], properties: [
            DBusProperty(OrgBaton.Manager1.version) { [configuration] in .string(configuration.version) },
            DBusProperty(OrgBaton.Manager1.busName) { [configuration] in .string(configuration.busName) },
        ])
    }

    func createActivity(_ call: DBusMethodCall) async throws -> String {
        let uid = try await callerUID(call.sender)
        guard call.arguments.count == 4, let type = call.arguments[0].stringValue, let title = call.arguments[1].stringValue else {
            throw DBusError.invalidArguments("CreateActivity takes (s type, s title, a{sv} userInfo, a{sv} options)")
        }
        let userInfo = try Self.decode { () throws(RegistryError) in try PropertyValueCoding.registryUserInfo(call.arguments[2]) }
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

    /// GetStatus in BatonAPI's coding (the one the client decodes).
    func managerStatus() -> ManagerStatus {
        ManagerStatus(state: state.rawValue, adapter: configuration.adapter, radio: radio.word.rawValue, radioDetail: radio.detail,
                      lePrivacy: radio.privacy?.word.rawValue, lePrivacyDetail: radio.privacy?.detail,
                      errors: errorLog.records.map { .init(time: $0.time, category: $0.category.rawValue, count: $0.count) },
                      secretsAtRest: configuration.secretsAtRest)
    }
}
