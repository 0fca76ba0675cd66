// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

/// org.baton.Activity1: one object per activity; every call is checked against the caller's uid.
extension ActivityService {
    nonisolated func activityInterface(_ id: ActivityID) -> DBusInterface {
        func method<Arguments, Reply>(_ contract: MethodContract<Arguments, Reply>,
                    _ body: @escaping @Sendable (ActivityService, UInt32, DBusMethodCall) async throws -> [DBusValue]) -> DBusMethod {
            DBusMethod(contract, budget: .userInfoCall) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let uid = try await self.callerUID(call.sender)
                return try await body(self, uid, call)
            }
        }
        var properties = ActivityField.allCases.map { field in
            DBusProperty(field.rawValue, signature: Self.signature(of: field)) { [weak self] in
                guard let self else { throw DBusError.failed("stopping") }
                return try await self.propertyValue(field, of: id, sender: DBusCallContext.sender)
            }
        }
        properties.append(DBusProperty(Self.editSessionProperty, signature: "s") { [weak self] in
            guard let self else { throw DBusError.failed("stopping") }
            return try await self.editSessionValue(of: id, sender: DBusCallContext.sender)
        })
        return DBusInterface(BatonInterface.activity, methods: [
            method(OrgBaton.Activity1.update) { service, uid, call in
                try await service.update(id, uid: uid, changes: call.arguments[0])
                return []
            },
            method(OrgBaton.Activity1.becomeCurrent) { service, uid, _ in
                try await service.transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.becomeCurrent(id, by: uid) }
                return []
            },
            method(OrgBaton.Activity1.resignCurrent) { service, uid, _ in
                try await service.transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.resign(id, by: uid) }
                return []
            },
            method(OrgBaton.Activity1.invalidate) { service, uid, _ in
                try await service.transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.invalidate(id, by: uid) }
                return []
            },
            method(OrgBaton.Activity1.attachDocument) { service, uid, call in
                try await service.attachDocument(id, uid: uid, arguments: call.arguments)
                return []
            },
            method(OrgBaton.Activity1.documentEdited) { service, uid, _ in
                try await service.transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.documentEdited(id, by: uid) }
                return []
            },
            method(OrgBaton.Activity1.getPayload) { service, uid, _ in
                [try await service.payload(id, uid: uid)]
            },
        ], properties: properties)
    }

    static func signature(of field: ActivityField) -> String {
        switch field {
        case .type, .title, .webpageURL, .status, .lastError: "s"
        case .userInfo, .document: "a{sv}"
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
