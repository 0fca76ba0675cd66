// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import Foundation
import Testing
@testable import BatonService

/// Issue 13: a suggestion that stays near is fetched ahead, kept in memory, delivered on accept
/// only while it is still the suggested revision and fresh, and dropped when stale.
@Suite("BatonServiceTests: prefetch", .serialized)
struct PrefetchTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-\(UUID().uuidString)")
    let type = "org.example.Reader.reading"

    func suggested(_ configuration: ContinuationService.Configuration) async throws -> (a: BusLessNode, b: BusLessNode, suggestion: ShownSuggestion) {
        try await suggestedChapter(in: directory, type: type, continuation: configuration)
    }

    /// Prefetched: accept delivers the state captured at prefetch time with no FetchActivity, and
    /// the source hears WasContinued through a separate ActivityContinued.
    @Test func aPrefetchedSuggestionIsDeliveredFromMemoryAndTheSourceHearsWasContinued() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion) = try await suggested(.init(prefetchAfter: .milliseconds(100)))
        #expect(await eventually(timeout: .seconds(5)) { await b.continuation.isPrefetched(suggestion.path) })
        // Suggestion1.Title: known once fetched ahead, and the board was told.
        #expect(await b.continuation.title(ofSuggestionAt: suggestion.path) == "Chapter 3")
        #expect(b.board.titles[suggestion.path] == "Chapter 3")
        // The source's state changes without a new advert (as an app with NeedsSave does): what was
        // prefetched is what is delivered (the revision is the same; the accept sends no FetchActivity).
        let later = try ActivityRecord(activityType: type, title: "Chapter 3, later", userInfo: ["page": .integer(9)], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), later)
        let channels = await a.transfer.acceptedChannels
        #expect(try await b.continuation.take(suggestion.path, uid: getuid()) == "delivered")
        #expect(b.activities.delivered.map(\.record.title) == ["Chapter 3"])
        #expect(b.activities.delivered.first?.record.userInfo["page"] == .integer(3))
        #expect(await eventually(timeout: .seconds(5)) { a.activities.continuedDevices == ["beta"] })
        #expect(await a.transfer.acceptedChannels == channels + 1, "only the ActivityContinued report reached the source")
        #expect(b.board.suggestions.isEmpty)
        #expect(!(await b.continuation.isPrefetched(suggestion.path)))
        #expect(await b.continuation.title(ofSuggestionAt: suggestion.path) == "")
        await a.stop()
        await b.stop()
    }

    @Test func aPrefetchedActivityIsDeliveredEvenIfTheSourceIsGoneMeanwhile() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion) = try await suggested(.init(prefetchAfter: .milliseconds(100)))
        #expect(await eventually(timeout: .seconds(5)) { await b.continuation.isPrefetched(suggestion.path) })
        await a.transfer.stop()
        #expect(try await b.continuation.take(suggestion.path, uid: getuid()) == "delivered")
        #expect(b.activities.delivered.map(\.record.title) == ["Chapter 3"])
        await a.stop()
        await b.stop()
    }

    /// Too old at accept: fetched afresh (here the source is gone, so the accept is unreachable).
    @Test func aStalePrefetchIsNotDelivered() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion) = try await suggested(.init(prefetchAfter: .milliseconds(50), prefetchMaxAge: .milliseconds(200)))
        #expect(await eventually(timeout: .seconds(5)) { await b.continuation.isPrefetched(suggestion.path) })
        try await Task.sleep(for: .milliseconds(300))
        await a.transfer.stop()
        await #expect(throws: ServiceFailure.self) { _ = try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(b.activities.delivered.isEmpty)
        await a.stop()
        await b.stop()
    }

    /// A newer advert replaces the suggestion: the old prefetch is dropped, the new revision is delivered.
    @Test func aNewerRevisionDropsThePrefetch() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion) = try await suggested(.init(prefetchAfter: .milliseconds(100)))
        #expect(await eventually(timeout: .seconds(5)) { await b.continuation.isPrefetched(suggestion.path) })
        let newer = try ActivityRecord(activityType: type, title: "Chapter 4", userInfo: [:], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), newer)
        try await a.ring.radio.publish(newer, uid: getuid())
        b.radio.hear(try #require(a.radio.onAir))
        #expect(await eventually(timeout: .seconds(5)) { b.board.suggestions.first?.path != suggestion.path && b.board.suggestions.count == 1 })
        #expect(!(await b.continuation.isPrefetched(suggestion.path)))
        let next = try #require(b.board.suggestions.first)
        #expect(try await b.continuation.take(next.path, uid: getuid()) == "delivered")
        #expect(b.activities.delivered.map(\.record.title) == ["Chapter 4"])
        await a.stop()
        await b.stop()
    }

    @Test func noPrefetchWhenDisabled() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion) = try await suggested(.init(prefetchAfter: nil))
        let channels = await a.transfer.acceptedChannels
        try await Task.sleep(for: .milliseconds(300))
        #expect(!(await b.continuation.isPrefetched(suggestion.path)))
        #expect(await a.transfer.acceptedChannels == channels)
        await a.stop()
        await b.stop()
    }
}
