// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

/// org.baton.Activity1: one object per activity; every call is checked against the caller's uid;
/// Update's changes (and WillSave's answers) decoded into typed values.
extension ActivityBus {
    static let editSessionProperty = "EditSession"

    func activityInterface(_ id: ActivityID) -> DBusInterface {
        func method<Arguments, Reply>(_ contract: MethodContract<Arguments, Reply>,
                    _ body: @escaping @Sendable (Activities, UInt32, DBusMethodCall) async throws -> [DBusValue]) -> DBusMethod {
            DBusMethod(contract, budget: .userInfoCall) { [weak self] call in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities()
                let uid = try await self.callerUID(call.sender)
                return try await body(activities, uid, call)
            }
        }
        func transition<Arguments, Reply>(_ contract: MethodContract<Arguments, Reply>,
                        _ body: @escaping @Sendable (inout ActivityRegistry, ActivityID, UInt32) throws(RegistryError) -> [RegistryEvent]) -> DBusMethod {
            method(contract) { activities, uid, _ in
                try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.transition(id, uid: uid, body) }
                return []
            }
        }
        var properties = ActivityField.allCases.map { field in
            DBusProperty(field.rawValue, signature: Self.signature(of: field)) { [weak self] in
                guard let self else { throw DBusError.failed("stopping") }
                let activities = try self.activities()
                let reader = try await self.reader(of: field.isPublic)
                let activity = try await mappingActivityFailures { () throws(ActivityFailure) in
                    try await activities.readable(id, publicField: field.isPublic, reader: reader)
                }
                return Self.value(of: field, in: activity)
            }
        }
        properties.append(DBusProperty(Self.editSessionProperty, signature: "s") { [weak self] in
            guard let self else { throw DBusError.failed("stopping") }
            let activities = try self.activities()
            let reader = try await self.reader(of: false)
            return .string(try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.editSessionOwner(of: id, reader: reader) })
        })
        return DBusInterface(BatonInterface.activity, methods: [
            method(OrgBaton.Activity1.update) { activities, uid, call in
                // Ownership first: another user learns nothing from validation errors.
                _ = try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.activity(id, for: uid) }
                let changes = try Self.decodeChanges(call.arguments[0], allowed: ["Title", "UserInfo", "WebpageURL", "Version", "NeedsSave"])
                try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.update(id, uid: uid, changes: changes) }
                return []
            },
            transition(OrgBaton.Activity1.becomeCurrent) { registry, id, uid throws(RegistryError) in try registry.becomeCurrent(id, by: uid) },
            transition(OrgBaton.Activity1.resignCurrent) { registry, id, uid throws(RegistryError) in try registry.resign(id, by: uid) },
            transition(OrgBaton.Activity1.invalidate) { registry, id, uid throws(RegistryError) in try registry.invalidate(id, by: uid) },
            method(OrgBaton.Activity1.attachDocument) { activities, uid, call in
                // The descriptor is ours until this call returns; the bus connection closes it then, whatever happens.
                guard case .unixFD(let descriptor) = call.arguments[0] else {
                    throw DBusError.invalidArguments("snapshot must be a file descriptor (h)")
                }
                // Ownership first: another user learns nothing from validation errors.
                _ = try await mappingActivityFailures { () throws(ActivityFailure) in try await activities.activity(id, for: uid) }
                guard case .string(let mediaType) = call.arguments[1], case .string(let documentID) = call.arguments[2] else {
                    throw DBusError.invalidArguments("mediaType and documentId must be strings (s)")
                }
                try await mappingActivityFailures { () throws(ActivityFailure) in
                    try await activities.attachDocument(id, uid: uid, descriptor: descriptor, mediaType: mediaType, documentID: documentID)
                }
                return []
            },
            transition(OrgBaton.Activity1.documentEdited) { registry, id, uid throws(RegistryError) in try registry.documentEdited(id, by: uid) },
            method(OrgBaton.Activity1.getPayload) { activities, uid, _ in
                let record = try await mappingActivityFailures { () throws(ActivityFailure) in
                    try await activities.recordLeavingMachine(id, uid: uid)
                }
                return [Self.payload(record)]
            },
        ], properties: properties)
    }

    /// The uid of a property's reader: nil for a public property (anyone reads it) and for a read
    /// without a caller identity, which a private property refuses.
    func reader(of publicField: Bool) async throws(DBusError) -> UInt32? {
        guard !publicField, let sender = DBusCallContext.sender else { return nil }
        return try await callerUID(sender)
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
                changes.userInfo = try decode { () throws(RegistryError) in try PropertyValueCoding.registryUserInfo(raw) }
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

    /// GetPayload: the state that would leave the machine (after WillSave when asked for).
    static func payload(_ record: ActivityRecord) -> DBusValue {
        var entries: [String: DBusValue] = [
            "Type": .string(record.activityType), "Title": .string(record.title),
            "UserInfo": PropertyValueCoding.encodeUserInfo(record.userInfo), "Version": .int64(record.version),
        ]
        if let url = record.webpageURL { entries["WebpageURL"] = .string(url) }
        return .propertyDictionary(entries)
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

    static func value(of field: ActivityField, in activity: Activity) -> DBusValue {
        switch field {
        case .type: .string(activity.record.activityType)
        case .title: .string(activity.record.title)
        case .userInfo: PropertyValueCoding.encodeUserInfo(activity.record.userInfo)
        case .webpageURL: .string(activity.record.webpageURL ?? "")
        case .version: .int64(activity.record.version)
        case .needsSave: .boolean(activity.needsSave)
        case .current: .boolean(activity.isCurrent)
        case .owner: .uint32(activity.owner.uid)
        case .revision: .uint32(activity.advertRevision)
        case .status: .string(activity.status.name)
        case .lastError: .string(activity.lastError?.rawValue ?? "")
        case .document: .propertyDictionary(activity.document.map { documentDescription($0.snapshot.info) } ?? [:])
        }
    }
}
