// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// The order in which the activities hand publications and withdrawals to the radio, without a
/// bus: the registry's order, whatever the radio's speed (issue 25: no task decides it).
@Suite("BatonServiceTests: publications reach the radio in the registry's order")
struct PublicationOrderTests {
    /// A radio that takes its time before it looks at a publication, and keeps the same book the
    /// real radio keeps.
    final class SlowPublisher: ActivityPublisher {
        let book = Mutex(PublicationBook())
        let calls = Mutex<[String]>([])
        let publishDelay: Duration

        init(publishDelay: Duration) { self.publishDelay = publishDelay }

        func publish(_ record: ActivityRecord, uid: UInt32) async throws(RadioError) -> PublishReceipt {
            try? await Task.sleep(for: publishDelay)
            calls.withLock { $0.append("publish \(uid) \(record.title)") }
            _ = book.withLock { $0.publish(record, uid: uid) }
            return PublishReceipt(advertRevision: UInt32(calls.withLock { $0.count }), radio: nil)
        }

        func withdraw(uid: UInt32) async {
            calls.withLock { $0.append("withdraw \(uid)") }
            _ = book.withLock { $0.withdraw(uid: uid) }
        }
    }

    final class NoBus: ActivityObjects, SourceCalls {
        func activityAdded(_ id: ActivityID) async throws {}
        func activityRemoved(_ id: ActivityID) {}
        func activityChanged(_ activity: Activity, fields: Set<ActivityField>) {}
        func editSessionChanged(_ activity: Activity, owner: String) {}
        func willSave(_ activity: Activity, source: String) async -> WillSaveAnswer { .failed(.sourceGone) }
        func wasContinued(_ activity: Activity, source: String, device: String) async -> Bool { true }
    }

    final class Log: ServiceLog {
        func log(_ line: String) {}
    }

    static func activities(_ publisher: SlowPublisher) -> Activities {
        let bus = NoBus()
        return Activities(configuration: ServiceConfiguration(), publisher: publisher, objects: bus, sources: bus,
                          documents: Documents(logger: Log()), logger: Log())
    }

    @Test func aResignationRightAfterBecomeCurrentIsCarriedOutAfterThePublication() async throws {
        let publisher = SlowPublisher(publishDelay: .milliseconds(300))
        let activities = Self.activities(publisher)
        let id = try await activities.createActivity(sender: ":1.1", uid: 1000, type: "org.example.Reader.reading", title: "Chapter 1",
                                                     userInfo: [:], options: ActivityOptions())
        try await activities.transition(id, uid: 1000) { registry, id, uid throws(RegistryError) in try registry.becomeCurrent(id, by: uid) }
        try await activities.transition(id, uid: 1000) { registry, id, uid throws(RegistryError) in try registry.resign(id, by: uid) }
        await activities.publisherQueueDrained()
        #expect(publisher.calls.withLock { $0 } == ["publish 1000 Chapter 1", "withdraw 1000"])
        #expect(publisher.book.withLock { $0.current } == nil, "the advert does not keep a resigned activity")
    }

    @Test func twoUsersPublicationsAndAWithdrawalKeepTheirOrder() async throws {
        let publisher = SlowPublisher(publishDelay: .milliseconds(100))
        let activities = Self.activities(publisher)
        var ids: [ActivityID] = []
        for uid: UInt32 in [1000, 1001] {
            ids.append(try await activities.createActivity(sender: ":1.\(uid)", uid: uid, type: "org.example.Reader.reading", title: "u\(uid)",
                                                           userInfo: [:], options: ActivityOptions()))
        }
        for id in ids {
            try await activities.transition(id, uid: id.uid) { registry, id, uid throws(RegistryError) in try registry.becomeCurrent(id, by: uid) }
        }
        try await activities.transition(ids[0], uid: 1000) { registry, id, uid throws(RegistryError) in try registry.resign(id, by: uid) }
        await activities.publisherQueueDrained()
        #expect(publisher.calls.withLock { $0 } == ["publish 1000 u1000", "publish 1001 u1001", "withdraw 1000"])
        #expect(publisher.book.withLock { $0.current?.uid } == 1001, "the newest publication stands for the advert")
        #expect(await activities.registry.activities[ids[1]]?.status == .published)
    }
}
