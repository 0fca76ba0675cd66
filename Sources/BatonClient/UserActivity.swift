// SPDX-License-Identifier: LGPL-2.1-or-later
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BatonAPI
import BatonCore
import BatonDBus
import Synchronization

/// Told about an activity's life on the daemon side. Held weakly by `UserActivity`, like
/// NSUserActivity's delegate. Calls arrive on any thread, hence `Sendable`: use an actor or a
/// class with protected state.
public protocol UserActivityDelegate: AnyObject, Sendable {
    /// The activity's state is about to leave this machine (only when `needsSave` is set). Bring
    /// the activity up to date here by setting its properties; whatever it holds when this returns
    /// is sent. The daemon waits at most about 2 seconds for the answer.
    func userActivityWillSave(_ activity: UserActivity) async
    /// The activity was continued on another device, named `device`.
    func userActivityWasContinued(_ activity: UserActivity, on device: String) async
}

extension UserActivityDelegate {
    public func userActivityWillSave(_ activity: UserActivity) async {}
    public func userActivityWasContinued(_ activity: UserActivity, on device: String) async {}
}

/// What an app does, published through `batond` so that a nearby device can continue it.
///
/// Modelled on NSUserActivity: set `title`, `userInfo` and the rest, then `becomeCurrent()`. Property
/// changes are local until the next `becomeCurrent()`, `publish()`, or the daemon's WillSave request
/// (when `needsSave` is set), which always picks up the latest values. All members may be used from
/// any thread; daemon operations on one activity run one at a time, in call order.
public final class UserActivity: Sendable {
    public let activityType: String
    public let connection: BatonConnection

    struct Fields: Equatable, Sendable {
        var title = ""
        var userInfo: [String: PropertyValue] = [:]
        var webpageURL: URL?
        var version: Int64 = 0
        var needsSave = false
    }

    struct State: Sendable {
        var fields = Fields()
        /// What the daemon was last told, nil before CreateActivity succeeded.
        var published: Fields?
        var objectPath: String?
        var sourcePath: String?
        var isInvalidated = false
        weak var delegate: (any UserActivityDelegate)?
    }

    private let state = Mutex(State())
    private let operations = SerialOperations()

    public init(activityType: String, connection: BatonConnection) {
        self.activityType = activityType
        self.connection = connection
    }

    deinit {
        // An activity nobody holds can no longer be updated: end it rather than leave it published.
        let (objectPath, sourcePath, isInvalidated) = state.withLock { ($0.objectPath, $0.sourcePath, $0.isInvalidated) }
        guard !isInvalidated else { return }
        let connection = connection
        if let sourcePath { try? connection.dbus.unexport(path: sourcePath) }
        if let objectPath {
            Task { try? await connection.call(OrgBaton.Activity1.invalidate, at: objectPath) }
        }
    }

    // MARK: Properties (local until published)

    public var title: String {
        get { state.withLock { $0.fields.title } }
        set { state.withLock { $0.fields.title = newValue } }
    }

    public var userInfo: [String: PropertyValue] {
        get { state.withLock { $0.fields.userInfo } }
        set { state.withLock { $0.fields.userInfo = newValue } }
    }

    /// Merges `entries` into `userInfo` (new values win).
    public func addUserInfoEntries(from entries: [String: PropertyValue]) {
        state.withLock { $0.fields.userInfo.merge(entries) { _, new in new } }
    }

    /// An http or https page to open when no app can continue the activity.
    public var webpageURL: URL? {
        get { state.withLock { $0.fields.webpageURL } }
        set { state.withLock { $0.fields.webpageURL = newValue } }
    }

    /// The app's own version of the activity's format, >= 0.
    public var version: Int64 {
        get { state.withLock { $0.fields.version } }
        set { state.withLock { $0.fields.version = newValue } }
    }

    /// Ask the delegate for fresh state before the activity leaves this machine.
    public var needsSave: Bool {
        get { state.withLock { $0.fields.needsSave } }
        set { state.withLock { $0.fields.needsSave = newValue } }
    }

    /// Held weakly.
    public var delegate: (any UserActivityDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    /// The daemon's object for this activity, nil until first published.
    public var objectPath: String? { state.withLock { $0.objectPath } }

    /// False once invalidated.
    public var isValid: Bool { state.withLock { !$0.isInvalidated } }

    // MARK: Daemon operations

    /// Creates the daemon's activity (idle, not current) or sends the properties changed since.
    /// Returns the daemon's object path.
    @discardableResult
    public func publish() async throws(BatonClientError) -> String {
        try await serially { activity throws(BatonClientError) in try await activity.publishNow() }
    }

    /// Publishes the latest properties and makes this the user's current activity.
    public func becomeCurrent() async throws(BatonClientError) {
        try await serially { activity throws(BatonClientError) in
            let path = try await activity.publishNow()
            try await activity.connection.call(OrgBaton.Activity1.becomeCurrent, at: path)
        }
    }

    /// No longer current (the activity stays valid). Nothing happens if it was never published.
    public func resignCurrent() async throws(BatonClientError) {
        try await serially { activity throws(BatonClientError) in
            guard let path = activity.objectPath else { return }
            try await activity.connection.call(OrgBaton.Activity1.resignCurrent, at: path)
        }
    }

    /// Ends the activity for good: the daemon drops it and later operations throw UnknownActivity.
    /// Failures are ignored because the activity is gone either way (an unreachable daemon has
    /// already dropped it, or will when this connection closes).
    public func invalidate() async {
        try? await serially { activity throws(BatonClientError) in
            let (objectPath, sourcePath) = activity.state.withLock { state in
                state.isInvalidated = true
                return (state.objectPath, state.sourcePath)
            }
            if let objectPath {
                try? await activity.connection.call(OrgBaton.Activity1.invalidate, at: objectPath)
            }
            if let sourcePath { try? activity.connection.dbus.unexport(path: sourcePath) }
        }
    }

    /// The daemon's view of this activity (status, revision, last error...).
    public func fetchInfo() async throws(BatonClientError) -> ActivityInfo {
        guard let path = objectPath else { throw BatonClientError(.unknownActivity, "the activity has not been published") }
        return try await connection.activity(at: path)
    }

    // MARK: Internals

    private func serially<T: Sendable>(
        _ operation: @escaping @Sendable (UserActivity) async throws(BatonClientError) -> T
    ) async throws(BatonClientError) -> T {
        do {
            return try await operations.run { [self] in
                guard isValid else { throw BatonClientError(.unknownActivity, "the activity was invalidated") }
                return try await operation(self)
            }
        } catch {
            throw BatonClientError.from(error)
        }
    }

    /// Creates or updates; returns the object path. Runs inside `serially`.
    @discardableResult
    private func publishNow() async throws(BatonClientError) -> String {
        let (fields, published, existingPath) = state.withLock { ($0.fields, $0.published, $0.objectPath) }
        if let existingPath, let published {
            let changes = Self.changes(from: published, to: fields)
            if !changes.isEmpty {
                try await connection.call(OrgBaton.Activity1.update, at: existingPath, changes)
            }
            state.withLock { $0.published = fields }
            return existingPath
        }
        let sourcePath = try await exportSourceIfNeeded()
        var options: [String: DBusValue] = [
            "Version": .int64(fields.version),
            "NeedsSave": .boolean(fields.needsSave),
            "Source": .objectPath(sourcePath),
        ]
        if let url = fields.webpageURL { options["WebpageURL"] = .string(url.absoluteString) }
        let path = try await connection.call(OrgBaton.Manager1.createActivity, at: BatonConnection.managerPath,
                                             (activityType, fields.title, fields.userInfo, options))
        state.withLock { state in
            state.objectPath = path
            state.published = fields
        }
        return path
    }

    /// Activity1.Update arguments for the fields that differ.
    static func changes(from old: Fields, to new: Fields) -> [String: DBusValue] {
        var changes: [String: DBusValue] = [:]
        if old.title != new.title { changes["Title"] = .string(new.title) }
        if old.userInfo != new.userInfo { changes["UserInfo"] = PropertyValueCoding.encodeUserInfo(new.userInfo) }
        if old.webpageURL != new.webpageURL { changes["WebpageURL"] = .string(new.webpageURL?.absoluteString ?? "") }
        if old.version != new.version { changes["Version"] = .int64(new.version) }
        if old.needsSave != new.needsSave { changes["NeedsSave"] = .boolean(new.needsSave) }
        return changes
    }

    private func exportSourceIfNeeded() async throws(BatonClientError) -> String {
        if let existing = state.withLock({ $0.sourcePath }) { return existing }
        let path = connection.makeObjectPath("source")
        let interface = ActivitySourceObject(activity: self).interface
        try await translatingErrors { try await connection.dbus.export([interface], at: path) }
        state.withLock { $0.sourcePath = path }
        return path
    }

    /// The WillSave answer: the current fields, after the delegate had its say. Not serialised with
    /// other operations, because the daemon may ask while one of them is waiting for it.
    func willSaveAnswer() async -> [String: DBusValue] {
        if let delegate { await delegate.userActivityWillSave(self) }
        let (fields, published) = state.withLock { ($0.fields, $0.published) }
        var answer: [String: DBusValue] = [
            "Title": .string(fields.title),
            "UserInfo": PropertyValueCoding.encodeUserInfo(fields.userInfo),
            "Version": .int64(fields.version),
        ]
        if let url = fields.webpageURL {
            answer["WebpageURL"] = .string(url.absoluteString)
        } else if published?.webpageURL != nil {
            answer["WebpageURL"] = .string("")
        }
        return answer
    }

    func wasContinued(on device: String) async {
        await delegate?.userActivityWasContinued(self, on: device)
    }
}

/// The exported org.baton.ActivitySource1 object of one activity.
struct ActivitySourceObject: Sendable {
    /// Weak: the exported object must not keep an abandoned activity alive.
    weak var activity: UserActivity?

    private func checkedActivity(_ call: DBusMethodCall) async throws(DBusError) -> UserActivity {
        guard let activity else { throw DBusError(name: BatonErrorName.unknownActivity, message: "the activity is gone") }
        try await activity.connection.requireDaemon(call)
        if let path = activity.objectPath, call.arguments.first?.objectPathValue != path {
            throw DBusError(name: BatonErrorName.unknownActivity, message: "this source belongs to \(path)")
        }
        return activity
    }

    var interface: DBusInterface {
        let object = self
        return DBusInterface(OrgBaton.ActivitySource1.name, methods: [
            DBusMethod(OrgBaton.ActivitySource1.willSave) { call in
                let activity = try await object.checkedActivity(call)
                return OrgBaton.ActivitySource1.willSave.encodeReply(await activity.willSaveAnswer())
            },
            DBusMethod(OrgBaton.ActivitySource1.wasContinued) { call in
                let activity = try await object.checkedActivity(call)
                let (_, device) = try decodedArguments(OrgBaton.ActivitySource1.wasContinued, call)
                await activity.wasContinued(on: device)
                return []
            },
        ])
    }
}

/// Runs async operations one after another, in the order they were submitted.
actor SerialOperations {
    private var tail: Task<Void, Never>?

    func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = tail
        let task = Task<T, any Error> {
            await previous?.value
            return try await operation()
        }
        tail = Task { _ = try? await task.value }
        return try await task.value
    }
}
