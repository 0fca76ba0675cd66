// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import Foundation
import Testing
@testable import BatonService

/// Issue 13: an activity no local handler takes but with a webpage URL is offered as "open in
/// browser"; taking it hands the URL to the caller and the source hears WasContinued.
@Suite("BatonServiceTests: browser fallback", .serialized)
struct BrowserFallbackTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("browser-\(UUID().uuidString)")

    func published(_ record: ActivityRecord) async throws -> (a: BusLessNode, b: BusLessNode) {
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta", handled: ["org.example.Other"])
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), record)
        try await a.ring.radio.publish(record, uid: getuid())
        b.radio.hear(try #require(a.radio.onAir))
        return (a, b)
    }

    @Test func anUnhandledActivityWithAURLIsOfferedForTheBrowserAndItsURLGoesToTheCaller() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = "https://example.org/dune?page=2"
        let (a, b) = try await published(try ActivityRecord(activityType: "org.example.Reader.reading", title: "Dune, page 2",
                                                            userInfo: [:], webpageURL: url, version: 1))
        #expect(await eventually(timeout: .seconds(10)) { b.board.suggestions.count == 1 })
        let suggestion = try #require(b.board.suggestions.first)
        #expect(suggestion.fallback == "browser" && suggestion.activityType.isEmpty && suggestion.hasWebpageURL)
        // No handler: Continue refuses (nothing is fetched), the suggestion stays.
        await #expect(throws: ServiceFailure.self) { _ = try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(b.board.suggestions.count == 1)
        #expect(try await b.continuation.continueInBrowser(suggestion.path, uid: getuid()) == url)
        #expect(b.activities.delivered.isEmpty, "a browser continuation reached an app handler")
        #expect(await eventually(timeout: .seconds(5)) { a.activities.continuedDevices == ["beta"] })
        #expect(b.board.suggestions.isEmpty)
        await a.stop()
        await b.stop()
    }

    @Test func anUnhandledActivityWithoutAURLIsNotOffered() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b) = try await published(try ActivityRecord(activityType: "org.example.Reader.reading", title: "Dune",
                                                            userInfo: [:], webpageURL: nil, version: 1))
        try await Task.sleep(for: .milliseconds(300))
        #expect(b.board.suggestions.isEmpty)
        await a.stop()
        await b.stop()
    }

    @Test func onlyWebAddressesGoToABrowser() {
        for good in ["https://example.org/", "http://example.org/a?b=c", "HTTPS://Example.org"] {
            #expect(ContinuationService.isWebAddress(good), "\(good)")
        }
        for bad in ["file:///etc/passwd", "https://", "https:///path", "javascript:alert(1)", "https://a b", "smb://host/share", "x-scheme://h"] {
            #expect(!ContinuationService.isWebAddress(bad), "\(bad)")
        }
    }
}
