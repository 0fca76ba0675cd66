// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonAPI
import BatonCore
import BatonServiceFakes
import BatonStore
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// Red-team pass on when the receiver checks versions (docs/dbus-api.md RegisterHandlerWithOptions:
/// "an activity of a version it did not declare is never given to it"): the handler that accepted
/// WillContinue gets the activity, so its declaration must be the one checked, whatever registers
/// between the WillContinue and the delivery (another app of the user starting, the app the session
/// agent launched declaring other versions than its .desktop file). Real ring, TLS and source;
/// the receiver's handlers are a fake that registers as the test says.
@Suite("BatonServiceTests: red team, versions between the check and the delivery", .serialized)
struct RedTeamVersionTimingTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-version-timing-\(UUID().uuidString)")
    static let type = "org.example.Reader.reading"

    /// alpha publishes "Chapter 3" at `version`; beta (handlers: `handlers`) hears it and has the suggestion.
    func suggested(version: Int64, handlers: FakeVersionedHandlers, prefetchAfter: Duration? = nil)
        async throws -> (a: BusLessNode, b: VersionedReceiver, suggestion: ShownSuggestion) {
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await VersionedReceiver.start(in: directory, handlers: handlers, prefetchAfter: prefetchAfter)
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(120)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        let record = try ActivityRecord(activityType: Self.type, title: "Chapter 3", userInfo: ["page": .integer(3)], webpageURL: nil, version: version)
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), record)
        try await a.ring.radio.publish(record, uid: getuid())
        b.radio.hear(try #require(a.radio.onAir))
        #expect(await eventually(timeout: .seconds(120)) { b.board.suggestions.count == 1 })
        return (a, b, try #require(b.board.suggestions.first))
    }

    func failureOf(_ attempt: () async throws(ServiceFailure) -> String) async -> ContinuationFailure? {
        do {
            _ = try await attempt()
            return nil
        } catch {
            return error.continuationFailure
        }
    }

    /// Attack: the handler /reader (version 1) accepts WillContinue; meanwhile another app of the user
    /// registers /viewer for version 7, the source's version. Before the fix the fetch named /viewer's
    /// versions and the payload was checked against /viewer, then delivered to /reader: version 7
    /// given to a handler that declared 1 only. Held now: /reader's versions go with the fetch, the
    /// source refuses, /reader hears versionUnsupported and gets nothing.
    @Test func aHandlerRegisteredDuringWillContinueDoesNotDecideForTheOneThatAccepted() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let handlers = FakeVersionedHandlers(handledType: Self.type)
        handlers.register("/reader", try ActivityVersions(pairs: [(1, 1)]))
        handlers.registerDuringWillContinue("/viewer", try ActivityVersions(pairs: [(7, 7)]))
        let (a, b, suggestion) = try await suggested(version: 7, handlers: handlers)
        let failure = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(failure == .versionUnsupported)
        #expect(handlers.deliveries.isEmpty, "delivered: \(handlers.deliveries)")
        #expect(handlers.failures == [FakeVersionedHandlers.Failure(path: "/reader", category: .versionUnsupported)])
        #expect(a.activities.transferRequests == 0, "the source refused before its app saved")
        await a.stop()
        await b.stop()
    }

    /// Attack: prefetch holds version 7, which the installed app's .desktop file declares; no handler
    /// runs, so the accept has the session agent launch the app, which registers for version 1 only.
    /// Before the fix the held payload (checked against the .desktop declaration) went to the launched
    /// handler. Held now: the launched handler's own declaration is checked; versionUnsupported.
    @Test func aPrefetchedPayloadIsCheckedAgainstTheHandlerThatWasLaunched() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let handlers = FakeVersionedHandlers(handledType: Self.type)
        handlers.installApp(declaring: try ActivityVersions(pairs: [(7, 7)]), launches: "/launched", registering: try ActivityVersions(pairs: [(1, 1)]))
        let (a, b, suggestion) = try await suggested(version: 7, handlers: handlers, prefetchAfter: .milliseconds(100))
        #expect(await eventually(timeout: .seconds(120)) { await b.continuation.isPrefetched(suggestion.path) })
        let failure = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(failure == .versionUnsupported)
        #expect(handlers.deliveries.isEmpty, "delivered: \(handlers.deliveries)")
        #expect(handlers.failures == [FakeVersionedHandlers.Failure(path: "/launched", category: .versionUnsupported)])
        #expect(b.board.suggestions.map(\.path) == [suggestion.path], "the suggestion stays: a retry asks with the handler's versions")
        await a.stop()
        await b.stop()
    }

    /// Attack: the prefetch names every user's versions (another user's handler takes 7); the user
    /// who accepts takes 1 only. Held: the held payload is not delivered from memory; the accept asks
    /// the source with that user's versions, which refuses without another save; versionUnsupported.
    @Test func aPayloadPrefetchedForAnotherUsersVersionsIsNotDeliveredOnAccept() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let handlers = FakeVersionedHandlers(handledType: Self.type)
        handlers.register("/reader", try ActivityVersions(pairs: [(1, 1)]))
        handlers.setOtherUsersVersions(try ActivityVersions(pairs: [(7, 7)]))
        let (a, b, suggestion) = try await suggested(version: 7, handlers: handlers, prefetchAfter: .milliseconds(100))
        #expect(await eventually(timeout: .seconds(120)) { await b.continuation.isPrefetched(suggestion.path) })
        #expect(a.activities.transferRequests == 1, "the prefetch asked the source's app once")
        let failure = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(failure == .versionUnsupported)
        #expect(handlers.deliveries.isEmpty)
        #expect(handlers.failures == [FakeVersionedHandlers.Failure(path: "/reader", category: .versionUnsupported)])
        #expect(a.activities.transferRequests == 1, "the accept's fetch was refused before a second save")
        #expect(await a.transfer.versionsRefused == 1)
        await a.stop()
        await b.stop()
    }
}

/// A receiving daemon's ring side without a bus, its handlers a FakeVersionedHandlers.
struct VersionedReceiver {
    let ring: RingService
    let pairing: PairingService
    let radio: FakeRadio
    let transfer: TransferService
    let continuation: ContinuationService
    let board: FakeSuggestionBoard

    static func start(in directory: URL, handlers: FakeVersionedHandlers, prefetchAfter: Duration?) async throws -> VersionedReceiver {
        let radio = FakeRadio()
        let ring = try RingService(store: RingStore(directory: StateDirectory(path: directory.appendingPathComponent("beta").path)),
                                   radio: radio, clock: SystemWallClock(),
                                   configuration: .init(deviceName: "beta", listenHost: "127.0.0.1"), log: { _ in })
        await ring.start()
        let pairing = PairingService(ring: ring, discovery: nil, clock: SystemWallClock(), limits: PairingLimits(), log: { _ in })
        let transfer = try await TransferService.start(ring: ring, activities: handlers,
                                                       configuration: .init(listenHost: "127.0.0.1", bluetooth: false), log: { _ in })
        let board = FakeSuggestionBoard()
        let continuation = ContinuationService(ring: ring, transfer: transfer, activities: handlers, board: board,
                                               configuration: .init(prefetchAfter: prefetchAfter), log: { _ in })
        await continuation.start()
        return VersionedReceiver(ring: ring, pairing: pairing, radio: radio, transfer: transfer, continuation: continuation, board: board)
    }

    func stop() async {
        await continuation.stop()
        await transfer.stop()
        await pairing.stop()
        await ring.stop()
    }
}
