// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing
@testable import BatonService

@Suite("BatonServiceTests: ActivityRegistry state machine")
struct RegistryTests {
    let alice = ActivityOwner(uid: 1000, connection: ":1.1")
    let aliceOther = ActivityOwner(uid: 1000, connection: ":1.2")
    let bob = ActivityOwner(uid: 1001, connection: ":1.3")

    func create(_ registry: inout ActivityRegistry, _ owner: ActivityOwner, title: String = "t",
                options: ActivityOptions = ActivityOptions()) throws -> ActivityID {
        try registry.create(owner: owner, type: "org.example.App.kind", title: title, userInfo: [:], options: options).0
    }

    @Test func createAssignsPathsAndStartsIdle() throws {
        var registry = ActivityRegistry()
        let (id, events) = try registry.create(owner: alice, type: "org.example.App.kind", title: "hello",
                                               userInfo: ["n": .integer(1)], options: ActivityOptions(webpageURL: "https://a.b/c", version: 7))
        #expect(events == [.added(id)])
        #expect(id.objectPath == "/org/baton/activity/u1000_1")
        #expect(ActivityID(objectPath: id.objectPath) == id)
        let activity = try registry.activity(id, for: 1000)
        #expect(activity.status == .idle && !activity.isCurrent && activity.lastError == nil)
        #expect(activity.record.version == 7 && activity.record.webpageURL == "https://a.b/c" && activity.record.revision == 0)
        let second = try create(&registry, bob)
        #expect(second.objectPath == "/org/baton/activity/u1001_2")
    }

    @Test(arguments: ["", "nodots", ".leading", "trailing.", "a..b", "sp ace.x", "ünï.code", String(repeating: "a.", count: 65)])
    func createRefusesBadTypes(_ type: String) {
        var registry = ActivityRegistry()
        #expect(throws: RegistryError.self) {
            _ = try registry.create(owner: alice, type: type, title: "", userInfo: [:], options: ActivityOptions())
        }
        #expect(registry.activities.isEmpty)
    }

    @Test func createRefusesBadFieldsWithTheRightError() {
        var registry = ActivityRegistry()
        func attempt(title: String = "t", userInfo: [String: PropertyValue] = [:], options: ActivityOptions = ActivityOptions()) -> RegistryError? {
            do {
                _ = try registry.create(owner: alice, type: "org.example.App.kind", title: title, userInfo: userInfo, options: options)
                return nil
            } catch {
                return error
            }
        }
        if case .payloadTooLarge = attempt(title: String(repeating: "x", count: 257)) {} else { Issue.record("long title") }
        #expect(attempt(title: String(repeating: "x", count: 256)) == nil)
        if case .payloadTooLarge = attempt(options: ActivityOptions(webpageURL: "https://x.org/" + String(repeating: "a", count: 2_048))) {} else {
            Issue.record("long URL")
        }
        for url in ["ftp://x.org", "https://", "http://a b.org", "javascript:alert(1)"] {
            if case .invalidArguments = attempt(options: ActivityOptions(webpageURL: url)) {} else { Issue.record("URL \(url)") }
        }
        if case .invalidArguments = attempt(options: ActivityOptions(version: -1)) {} else { Issue.record("negative version") }
        if case .payloadTooLarge = attempt(userInfo: ["b": .bytes(Array(repeating: 0, count: 70_000))]) {} else { Issue.record("large userInfo") }
        var deep: PropertyValue = .integer(1)
        for _ in 0..<16 { deep = .array([deep]) }
        if case .invalidArguments = attempt(userInfo: ["d": deep]) {} else { Issue.record("deep userInfo") }
        if case .invalidArguments = attempt(userInfo: ["nan": .double(.nan)]) {} else { Issue.record("NaN") }
        #expect(registry.activities.count == 1)
    }

    @Test func perUserLimitCountsOnlyThatUser() throws {
        var registry = ActivityRegistry()
        for _ in 0..<ActivityRegistry.maxActivitiesPerUser { _ = try create(&registry, alice) }
        #expect(throws: RegistryError.limitExceeded("at most 64 activities per user")) { _ = try create(&registry, aliceOther) }
        _ = try create(&registry, bob)
        let someone = try #require(registry.activities.keys.first { $0.uid == 1000 })
        _ = try registry.invalidate(someone, by: 1000)
        _ = try create(&registry, alice)
    }

    @Test func otherUsersAreRefusedAndUnknownIsUnknown() throws {
        var registry = ActivityRegistry()
        let id = try create(&registry, alice)
        #expect(throws: RegistryError.notPermitted) { _ = try registry.becomeCurrent(id, by: 1001) }
        #expect(throws: RegistryError.notPermitted) { _ = try registry.update(id, by: 1001, changes: ActivityChanges(title: "x")) }
        #expect(throws: RegistryError.notPermitted) { _ = try registry.invalidate(id, by: 1001) }
        #expect(throws: RegistryError.notPermitted) { _ = try registry.resign(id, by: 1001) }
        let missing = ActivityID(uid: 1000, serial: 99)
        #expect(throws: RegistryError.unknownActivity) { _ = try registry.becomeCurrent(missing, by: 1000) }
        // Same user, other connection: allowed (ownership is per user).
        _ = try registry.update(id, by: aliceOther.uid, changes: ActivityChanges(title: "y"))
    }

    @Test func oneCurrentPerUserAndRevisionsCount() throws {
        var registry = ActivityRegistry()
        let a = try create(&registry, alice)
        let b = try create(&registry, aliceOther)
        let c = try create(&registry, bob)
        #expect(try registry.becomeCurrent(a, by: 1000) == [.changed(a, [.current]), .changed(a, [.revision, .status]), .publish(a, revision: 1)])
        _ = try registry.becomeCurrent(c, by: 1001)
        let events = try registry.becomeCurrent(b, by: 1000)
        #expect(events == [.changed(a, [.current, .status]), .changed(b, [.current]), .changed(b, [.revision, .status]),
                           .publish(b, revision: 1)])
        #expect(registry.currentActivity(of: 1000) == b)
        #expect(registry.currentActivity(of: 1001) == c)
        #expect(try registry.activity(a, for: 1000).status == .idle)
        // Becoming current again while preparing or published changes nothing (no new revision on the air).
        #expect(try registry.becomeCurrent(b, by: 1000) == [])
        _ = registry.published(b, revision: 1)
        #expect(try registry.becomeCurrent(b, by: 1000) == [])
        // After a failed publish it tries again, with a new revision.
        _ = registry.publishFailed(b, revision: 1, category: .radioUnavailable)
        #expect(try registry.becomeCurrent(b, by: 1000) == [.changed(b, [.revision, .status]), .publish(b, revision: 2)])
    }

    @Test func publishedAndFailedReportsIgnoreStaleRevisions() throws {
        var registry = ActivityRegistry()
        let a = try create(&registry, alice)
        _ = try registry.becomeCurrent(a, by: 1000)
        _ = try registry.update(a, by: 1000, changes: ActivityChanges(title: "new"))
        #expect(try registry.activity(a, for: 1000).record.revision == 2)
        #expect(registry.published(a, revision: 1).isEmpty)
        #expect(registry.publishFailed(a, revision: 1, category: .advertRejected).isEmpty)
        #expect(registry.published(a, revision: 2) == [.changed(a, [.status])])
        #expect(try registry.activity(a, for: 1000).status == .published)
        #expect(registry.published(a, revision: 2).isEmpty)
        _ = try registry.update(a, by: 1000, changes: ActivityChanges(version: 4))
        #expect(registry.publishFailed(a, revision: 3, category: .advertRejected) == [.changed(a, [.status, .lastError])])
        let failed = try registry.activity(a, for: 1000)
        #expect(failed.status == .failed(.advertRejected) && failed.lastError == .advertRejected)
        _ = try registry.resign(a, by: 1000)
        #expect(registry.published(a, revision: 3).isEmpty)
    }

    @Test func updateValidatesEverythingBeforeChangingAnything() throws {
        var registry = ActivityRegistry()
        let a = try create(&registry, alice, title: "before", options: ActivityOptions(webpageURL: "https://a.org"))
        #expect(throws: RegistryError.self) {
            _ = try registry.update(a, by: 1000, changes: ActivityChanges(title: "after", webpageURL: .some("not a url")))
        }
        #expect(try registry.activity(a, for: 1000).record.title == "before")
        let events = try registry.update(a, by: 1000, changes: ActivityChanges(title: "after", webpageURL: .some(nil), needsSave: true))
        #expect(events == [.changed(a, [.title, .webpageURL, .needsSave])])
        let after = try registry.activity(a, for: 1000)
        #expect(after.record.title == "after" && after.record.webpageURL == nil && after.needsSave)
        // No-op updates emit nothing; NeedsSave alone does not re-publish a current activity.
        #expect(try registry.update(a, by: 1000, changes: ActivityChanges(title: "after")).isEmpty)
        _ = try registry.becomeCurrent(a, by: 1000)
        #expect(try registry.update(a, by: 1000, changes: ActivityChanges(needsSave: false)) == [.changed(a, [.needsSave])])
    }

    @Test func resignAndInvalidate() throws {
        var registry = ActivityRegistry()
        let a = try create(&registry, alice)
        #expect(try registry.resign(a, by: 1000).isEmpty)
        _ = try registry.becomeCurrent(a, by: 1000)
        #expect(try registry.resign(a, by: 1000) == [.changed(a, [.current, .status]), .withdraw(uid: 1000)])
        #expect(registry.currentActivity(of: 1000) == nil)
        _ = try registry.becomeCurrent(a, by: 1000)
        #expect(try registry.invalidate(a, by: 1000) == [.withdraw(uid: 1000), .removed(a)])
        #expect(registry.activities.isEmpty && registry.currentActivity(of: 1000) == nil)
        #expect(throws: RegistryError.unknownActivity) { _ = try registry.invalidate(a, by: 1000) }
    }

    @Test func ownerVanishedRemovesOnlyThatConnectionsActivities() throws {
        var registry = ActivityRegistry()
        let a1 = try create(&registry, alice)
        let a2 = try create(&registry, alice)
        let other = try create(&registry, aliceOther)
        let b = try create(&registry, bob)
        _ = try registry.becomeCurrent(a2, by: 1000)
        #expect(registry.ownerVanished(connection: ":1.1") == [.removed(a1), .withdraw(uid: 1000), .removed(a2)])
        #expect(Set(registry.activities.keys) == [other, b])
        #expect(registry.ownerVanished(connection: ":1.1").isEmpty)
    }

    @Test func recordFailureSetsLastErrorOnce() throws {
        var registry = ActivityRegistry()
        let a = try create(&registry, alice)
        #expect(registry.recordFailure(a, category: .sourceTimeout) == [.changed(a, [.lastError])])
        #expect(registry.recordFailure(a, category: .sourceTimeout).isEmpty)
        #expect(try registry.activity(a, for: 1000).status == .idle)
    }

    @Test(arguments: ["/org/baton/activity/u1000", "/org/baton/activity/x1_2", "/org/baton/activity/u1_2/x", "/org/baton/activity/u01_2",
                      "/org/baton/activity/u1_", "/org/baton/other/u1_2", "/org/baton/activity/u99999999999_1"])
    func activityPathParsingRefusesJunk(_ path: String) {
        #expect(ActivityID(objectPath: path) == nil)
    }
}

@Suite("BatonServiceTests: ErrorLog")
struct ErrorLogTests {
    @Test func repeatsAreCountedAndTheLogIsBounded() {
        var log = ErrorLog()
        log.record(.sourceTimeout, at: 10)
        log.record(.sourceTimeout, at: 11)
        #expect(log.records == [ErrorRecord(time: 11, category: .sourceTimeout, count: 2)])
        log.record(.radioUnavailable, at: 12)
        log.record(.sourceTimeout, at: 13)
        #expect(log.records.map(\.category) == [.sourceTimeout, .radioUnavailable, .sourceTimeout])
        for index in 0..<40 { log.record(index.isMultiple(of: 2) ? .handlerFailed : .launchFailed, at: Int64(100 + index)) }
        #expect(log.records.count == ErrorLog.capacity)
        #expect(log.records.last == ErrorRecord(time: 139, category: .launchFailed, count: 1))
        #expect(log.records.first?.time == 108)
    }

    @Test func failureCategoriesMapOneToOne() {
        for failure in FailureCategory.allCases { #expect(ErrorCategory(failure).rawValue == failure.rawValue) }
    }
}
