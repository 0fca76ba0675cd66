// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore

/// Why an activity could not be published or handed over: the publish side of the one category
/// enum the daemon records (`ErrorCategory`: these strings are all that status output, LastError
/// and the error log ever say about a failure). The activities use sourceTimeout, sourceGone,
/// radioUnavailable, advertRejected and transferFailed.
public typealias FailureCategory = ErrorCategory

public enum ActivityStatus: Sendable, Hashable {
    case idle
    case preparing
    case published
    case failed(FailureCategory)

    /// The value of Activity1.Status.
    public var name: String {
        switch self {
        case .idle: "idle"
        case .preparing: "preparing"
        case .published: "published"
        case .failed: "failed"
        }
    }
}

/// An activity's identity: the owning Unix user and a daemon-wide serial number.
public struct ActivityID: Sendable, Hashable, Comparable {
    public static let pathPrefix = BatonObjectPath.activityPrefix

    public var uid: UInt32
    public var serial: UInt64

    public init(uid: UInt32, serial: UInt64) {
        self.uid = uid
        self.serial = serial
    }

    public var objectPath: String { "\(Self.pathPrefix)u\(uid)_\(serial)" }

    /// Parses `/org/baton/activity/u{uid}_{n}`; nil for anything else.
    public init?(objectPath: String) {
        guard objectPath.hasPrefix(Self.pathPrefix) else { return nil }
        let leaf = objectPath.dropFirst(Self.pathPrefix.count)
        guard leaf.first == "u" else { return nil }
        let parts = leaf.dropFirst().split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 2, let uid = UInt32(parts[0]), let serial = UInt64(parts[1]),
              String(uid) == parts[0], String(serial) == parts[1] else { return nil }
        self.init(uid: uid, serial: serial)
    }

    public static func < (lhs: ActivityID, rhs: ActivityID) -> Bool {
        (lhs.uid, lhs.serial) < (rhs.uid, rhs.serial)
    }
}

/// Who created an activity: the Unix user, and the bus connection whose closing ends it.
public struct ActivityOwner: Sendable, Hashable {
    public var uid: UInt32
    public var connection: String

    public init(uid: UInt32, connection: String) {
        self.uid = uid
        self.connection = connection
    }
}

/// CreateActivity options after D-Bus decoding.
public struct ActivityOptions: Sendable, Hashable {
    public var webpageURL: String?
    public var version: Int64
    public var needsSave: Bool
    /// Path of an ActivitySource1 object on the owner's connection.
    public var sourcePath: String?

    public init(webpageURL: String? = nil, version: Int64 = 0, needsSave: Bool = false, sourcePath: String? = nil) {
        self.webpageURL = webpageURL
        self.version = version
        self.needsSave = needsSave
        self.sourcePath = sourcePath
    }
}

/// Activity1.Update (and WillSave answers): nil fields stay as they are.
public struct ActivityChanges: Sendable, Hashable {
    public var title: String?
    public var userInfo: [String: PropertyValue]?
    /// `.some(nil)` removes the URL.
    public var webpageURL: String??
    public var version: Int64?
    public var needsSave: Bool?

    public init(title: String? = nil, userInfo: [String: PropertyValue]? = nil, webpageURL: String?? = nil,
                version: Int64? = nil, needsSave: Bool? = nil) {
        self.title = title
        self.userInfo = userInfo
        self.webpageURL = webpageURL
        self.version = version
        self.needsSave = needsSave
    }

    public var isEmpty: Bool { title == nil && userInfo == nil && webpageURL == nil && version == nil && needsSave == nil }
}

/// Activity1 properties, named as on D-Bus, for change notifications.
public enum ActivityField: String, Sendable, Hashable, CaseIterable, Comparable {
    case type = "Type", title = "Title", userInfo = "UserInfo", webpageURL = "WebpageURL", version = "Version"
    case needsSave = "NeedsSave", current = "Current", owner = "Owner", revision = "Revision", status = "Status"
    case lastError = "LastError", document = "Document"

    /// Fields any user may read; the rest only the owner.
    public var isPublic: Bool { self == .type || self == .status }

    public static func < (lhs: ActivityField, rhs: ActivityField) -> Bool { lhs.rawValue < rhs.rawValue }
}

public struct Activity: Sendable, Hashable {
    public let id: ActivityID
    public let owner: ActivityOwner
    /// The last saved state: what leaves the machine unless WillSave brings something newer.
    public internal(set) var record: ActivityRecord
    public internal(set) var needsSave: Bool
    public let sourcePath: String?
    public internal(set) var isCurrent: Bool
    public internal(set) var status: ActivityStatus
    public internal(set) var lastError: FailureCategory?
    /// The document snapshot attached to it, if any (§6.5).
    public internal(set) var document: ActivityDocument? = nil
    /// The device-wide advert revision (§4.2) it was last published with, which FetchActivity
    /// serves (Activity1.Revision); 0 until it was published. `record.revision` counts this
    /// activity's own changes, only to drop stale publish reports.
    public internal(set) var advertRevision: UInt32 = 0
}

/// An activity's document: the committed snapshot, and whether the app edited it since (then the
/// advert waits for the next snapshot: what is advertised is always what would be served).
public struct ActivityDocument: Sendable, Hashable {
    public var snapshot: AttachedDocument
    public var editedSinceSnapshot: Bool
}

/// Registry refusals; the D-Bus layer maps each to an org.baton.Error name. Messages name fields,
/// never their contents.
public enum RegistryError: Error, Sendable, Hashable {
    case invalidArguments(String)
    case payloadTooLarge(String)
    case unknownActivity
    case notPermitted
    case limitExceeded(String)
}

/// What the service must do after a registry transition, in order.
public enum RegistryEvent: Sendable, Hashable {
    case added(ActivityID)
    case changed(ActivityID, Set<ActivityField>)
    case removed(ActivityID)
    /// Advertise this activity with this revision (it is its user's current one).
    case publish(ActivityID, revision: UInt32)
    /// Stop advertising for this user: no current activity any more.
    case withdraw(uid: UInt32)
}

/// The activity state machine: no I/O and no D-Bus types. Every user has at most one current
/// activity and at most `maxActivitiesPerUser` activities; callers act only on their own.
public struct ActivityRegistry: Sendable {
    public static let maxActivitiesPerUser = 64

    public private(set) var activities: [ActivityID: Activity] = [:]
    private var currentByUser: [UInt32: ActivityID] = [:]
    private var nextSerial: UInt64 = 1

    public init() {}

    public func currentActivity(of uid: UInt32) -> ActivityID? { currentByUser[uid] }

    public func count(of uid: UInt32) -> Int { activities.values.reduce(0) { $0 + ($1.owner.uid == uid ? 1 : 0) } }

    /// The activity if it exists and `uid` owns it.
    public func activity(_ id: ActivityID, for uid: UInt32) throws(RegistryError) -> Activity {
        guard let activity = activities[id] else { throw .unknownActivity }
        guard activity.owner.uid == uid else { throw .notPermitted }
        return activity
    }

    public mutating func create(owner: ActivityOwner, type: String, title: String, userInfo: [String: PropertyValue],
                                options: ActivityOptions) throws(RegistryError) -> (ActivityID, [RegistryEvent]) {
        let record = try Self.makeRecord(type: type, title: title, userInfo: userInfo, webpageURL: options.webpageURL,
                                         version: options.version, revision: 0)
        guard count(of: owner.uid) < Self.maxActivitiesPerUser else {
            throw .limitExceeded("at most \(Self.maxActivitiesPerUser) activities per user")
        }
        let id = ActivityID(uid: owner.uid, serial: nextSerial)
        nextSerial += 1
        activities[id] = Activity(id: id, owner: owner, record: record, needsSave: options.needsSave, sourcePath: options.sourcePath,
                                  isCurrent: false, status: .idle, lastError: nil)
        return (id, [.added(id)])
    }

    /// Validates all changes first; on any error nothing changes.
    public mutating func update(_ id: ActivityID, by uid: UInt32, changes: ActivityChanges) throws(RegistryError) -> [RegistryEvent] {
        var activity = try activity(id, for: uid)
        let old = activity.record
        let url: String? = changes.webpageURL.map { $0.flatMap { $0.isEmpty ? nil : $0 } } ?? old.webpageURL
        let record = try Self.makeRecord(type: old.activityType, title: changes.title ?? old.title,
                                         userInfo: changes.userInfo ?? old.userInfo, webpageURL: url,
                                         version: changes.version ?? old.version, revision: old.revision)
        var fields: Set<ActivityField> = []
        if record.title != old.title { fields.insert(.title) }
        if record.userInfo != old.userInfo { fields.insert(.userInfo) }
        if record.webpageURL != old.webpageURL { fields.insert(.webpageURL) }
        if record.version != old.version { fields.insert(.version) }
        if let needsSave = changes.needsSave, needsSave != activity.needsSave {
            activity.needsSave = needsSave
            fields.insert(.needsSave)
        }
        activity.record = record
        activities[id] = activity
        guard !fields.isEmpty else { return [] }
        var events: [RegistryEvent] = [.changed(id, fields)]
        let contentChanged = !fields.subtracting([.needsSave]).isEmpty
        if activity.isCurrent, contentChanged { events += republish(id) }
        return events
    }

    /// Makes `id` its user's current activity; the previous one resigns.
    public mutating func becomeCurrent(_ id: ActivityID, by uid: UInt32) throws(RegistryError) -> [RegistryEvent] {
        let activity = try activity(id, for: uid)
        var events: [RegistryEvent] = []
        if let previous = currentByUser[uid], previous != id { events += resignUnchecked(previous) }
        if !activity.isCurrent {
            activities[id]?.isCurrent = true
            currentByUser[uid] = id
            events.append(.changed(id, [.current]))
        } else if activity.status == .preparing || activity.status == .published {
            // Already on the air with its latest content (Update re-publishes a change): a new
            // revision would only make every receiver replace its suggestion for nothing.
            return events
        }
        events += republish(id)
        return events
    }

    public mutating func resign(_ id: ActivityID, by uid: UInt32) throws(RegistryError) -> [RegistryEvent] {
        let activity = try activity(id, for: uid)
        guard activity.isCurrent else { return [] }
        return resignUnchecked(id) + [.withdraw(uid: uid)]
    }

    public mutating func invalidate(_ id: ActivityID, by uid: UInt32) throws(RegistryError) -> [RegistryEvent] {
        _ = try activity(id, for: uid)
        return remove(id)
    }

    /// The bus connection closed: every activity it created ends.
    public mutating func ownerVanished(connection: String) -> [RegistryEvent] {
        let owned = activities.values.filter { $0.owner.connection == connection }.map(\.id).sorted()
        return owned.flatMap { remove($0) }
    }

    /// The radio advertises `revision`. Stale reports (an older revision, or no longer current) are ignored.
    public mutating func published(_ id: ActivityID, revision: UInt32, advertRevision: UInt32? = nil) -> [RegistryEvent] {
        guard let activity = activities[id], activity.isCurrent, activity.record.revision == revision,
              activity.status == .preparing else { return [] }
        activities[id]?.status = .published
        guard let advertRevision, advertRevision != activity.advertRevision else { return [.changed(id, [.status])] }
        activities[id]?.advertRevision = advertRevision
        return [.changed(id, [.status, .revision])]
    }

    /// Publishing `revision` failed; stale reports are ignored.
    public mutating func publishFailed(_ id: ActivityID, revision: UInt32, category: FailureCategory) -> [RegistryEvent] {
        guard let activity = activities[id], activity.isCurrent, activity.record.revision == revision else { return [] }
        activities[id]?.status = .failed(category)
        var fields: Set<ActivityField> = [.status]
        if activity.lastError != category { fields.insert(.lastError) }
        activities[id]?.lastError = category
        return [.changed(id, fields)]
    }

    /// A failure that does not change the status (e.g. WillSave timed out): recorded in LastError.
    public mutating func recordFailure(_ id: ActivityID, category: FailureCategory) -> [RegistryEvent] {
        guard let activity = activities[id], activity.lastError != category else { return [] }
        activities[id]?.lastError = category
        return [.changed(id, [.lastError])]
    }

    /// A snapshot was committed for `id`: a current activity is advertised again with it.
    public mutating func attachDocument(_ id: ActivityID, by uid: UInt32, _ snapshot: AttachedDocument) throws(RegistryError) -> [RegistryEvent] {
        let activity = try activity(id, for: uid)
        activities[id]?.document = ActivityDocument(snapshot: snapshot, editedSinceSnapshot: false)
        return [.changed(id, [.document])] + (activity.isCurrent ? republish(id) : [])
    }

    /// The app edited the document: the advert is withdrawn until the next snapshot.
    public mutating func documentEdited(_ id: ActivityID, by uid: UInt32) throws(RegistryError) -> [RegistryEvent] {
        let activity = try activity(id, for: uid)
        guard let document = activity.document else { throw .invalidArguments("no document is attached") }
        guard !document.editedSinceSnapshot else { return [] }
        activities[id]?.document?.editedSinceSnapshot = true
        return activity.isCurrent ? republish(id) : []
    }

    /// The snapshot a FetchDocument may be served from: the user's current activity's, unless edited since.
    public func documentForTransfer(uid: UInt32) -> AttachedDocument? {
        guard let id = currentByUser[uid], let document = activities[id]?.document, !document.editedSinceSnapshot else { return nil }
        return document.snapshot
    }

    // MARK: Internals

    private mutating func republish(_ id: ActivityID) -> [RegistryEvent] {
        guard var activity = activities[id] else { return [] }
        let revision = (activity.record.revision &+ 1) & AdvertBody.maxRevision
        activity.record.revision = revision
        var fields: Set<ActivityField> = [.revision]
        if activity.status != .preparing { fields.insert(.status) }
        activity.status = .preparing
        activities[id] = activity
        // Edited since its snapshot: nothing on the air until a fresh one is committed (a new
        // revision, so a late report of the old advert cannot mark it published).
        if activity.document?.editedSinceSnapshot == true { return [.changed(id, fields), .withdraw(uid: activity.owner.uid)] }
        return [.changed(id, fields), .publish(id, revision: revision)]
    }

    private mutating func resignUnchecked(_ id: ActivityID) -> [RegistryEvent] {
        guard var activity = activities[id], activity.isCurrent else { return [] }
        activity.isCurrent = false
        var fields: Set<ActivityField> = [.current]
        if activity.status != .idle { fields.insert(.status) }
        activity.status = .idle
        activities[id] = activity
        if currentByUser[activity.owner.uid] == id { currentByUser[activity.owner.uid] = nil }
        return [.changed(id, fields)]
    }

    private mutating func remove(_ id: ActivityID) -> [RegistryEvent] {
        guard let activity = activities.removeValue(forKey: id) else { return [] }
        var events: [RegistryEvent] = []
        if currentByUser[activity.owner.uid] == id {
            currentByUser[activity.owner.uid] = nil
            events.append(.withdraw(uid: activity.owner.uid))
        }
        events.append(.removed(id))
        return events
    }

    static func makeRecord(type: String, title: String, userInfo: [String: PropertyValue], webpageURL: String?,
                           version: Int64, revision: UInt32) throws(RegistryError) -> ActivityRecord {
        do {
            return try ActivityRecord(activityType: type, title: title, userInfo: userInfo, webpageURL: webpageURL,
                                      version: version, revision: revision)
        } catch {
            throw RegistryError(error)
        }
    }
}

extension RegistryError {
    /// Maps core validation errors; the field names come from ActivityRecord, never the values.
    init(_ error: WireError) {
        switch error {
        case .payloadTooLarge(let limit, let actual):
            self = .payloadTooLarge("value is \(actual) bytes, limit \(limit)")
        case .tooDeep(let limit):
            self = .invalidArguments("userInfo nests deeper than \(limit)")
        case .malformed(let what):
            self = .invalidArguments("invalid \(what)")
        default:
            self = .invalidArguments("invalid activity")
        }
    }
}
