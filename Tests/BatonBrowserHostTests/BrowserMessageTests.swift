// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBrowserHost
import BatonClient
import BatonCore
import Foundation
import Testing

private func decode(_ json: String, now: Double = 1000) throws -> BrowserMessage { try BrowserMessage.decode(Array(json.utf8), now: now) }

@Suite("BatonBrowserHostTests: what the extension says and what the host answers")
struct BrowserMessageTests {
    @Test func aWebPageBecomesTheCurrentPage() throws {
        let message = try decode(#"{"kind":"current","title":"Docs","url":"https://example.org/a?b#c","scrollX":0,"scrollY":812.5}"#)
        #expect(message == .current(BrowserPage(title: "Docs", url: URL(string: "https://example.org/a?b#c")!, scrollX: 0, scrollY: 812.5)))
    }

    @Test(arguments: ["file:///home/me/secret.pdf", "chrome://settings", "about:blank", "data:text/html,hi",
                      "javascript:alert(1)", "chrome-extension://abc/page.html", "moz-extension://x/y"])
    func onlyHTTPAndHTTPSPagesArePublished(url: String) {
        #expect(throws: BrowserMessageError.notAWebPage) { _ = try decode(#"{"kind":"current","title":"t","url":"\#(url)"}"#) }
    }

    @Test func malformedMessagesAreRefusedWithAReason() {
        #expect(throws: BrowserMessageError.notJSON) { _ = try BrowserMessage.decode([0xff, 0x00]) }
        #expect(throws: BrowserMessageError.notJSON) { _ = try decode(#"{"title":"no kind"}"#) }
        #expect(throws: BrowserMessageError.unknownKind("explode")) { _ = try decode(#"{"kind":"explode"}"#) }
        #expect(throws: BrowserMessageError.notAWebPage) { _ = try decode(#"{"kind":"current","title":"no url"}"#) }
        let long = "https://example.org/" + String(repeating: "a", count: BrowserPage.maximumURLLength)
        #expect(throws: BrowserMessageError.urlTooLong) { _ = try decode(#"{"kind":"current","url":"\#(long)"}"#) }
    }

    @Test func longTitlesAreCutAndBadScrollValuesDropped() throws {
        let title = String(repeating: "é", count: 1000)
        let message = try decode(#"{"kind":"current","title":"\#(title)","url":"http://example.org/","scrollX":-4,"scrollY":-0.5}"#)
        guard case .current(let page) = message else { Issue.record("not a page: \(message)"); return }
        #expect(page.title.count == BrowserPage.maximumTitleLength)
        #expect(page.scrollX == nil)
        #expect(page.scrollY == nil)
    }

    @Test func anUntitledPageIsTitledWithItsURL() throws {
        #expect(try decode(#"{"kind":"current","title":"","url":"https://example.org/x"}"#)
            == .current(BrowserPage(title: "https://example.org/x", url: URL(string: "https://example.org/x")!, scrollX: nil, scrollY: nil)))
    }

    @Test func resignNeedsNothingElse() throws {
        #expect(try decode(#"{"kind":"resign"}"#) == .resign)
    }

    @Test func aContinuedPageOpensWithItsScrollPosition() throws {
        let continued = ContinuedActivity(activityType: webBrowsingActivityType, title: "Docs", userInfo: ["scrollY": .double(812.5), "scrollX": .integer(3)],
                                          webpageURL: URL(string: "https://example.org/a"), version: 0, device: "laptop")
        let request = try #require(BrowserHostSession.openRequest(for: continued, now: 1000, askedAt: 999))
        #expect(request == BrowserOpenRequest(url: "https://example.org/a", scrollX: 3, scrollY: 812.5))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(request.encoded())) as? [String: Any])
        #expect(json["kind"] as? String == "open")
        #expect(json["url"] as? String == "https://example.org/a")
        #expect(json["scrollY"] as? Double == 812.5)
    }

    @Test func aContinuedActivityWithoutAWebPageOpensNothing() {
        let noURL = ContinuedActivity(activityType: webBrowsingActivityType, title: "x", userInfo: [:], webpageURL: nil, version: 0, device: "d")
        #expect(BrowserHostSession.openRequest(for: noURL, now: 1000, askedAt: 999) == nil)
        let file = ContinuedActivity(activityType: webBrowsingActivityType, title: "x", userInfo: [:],
                                     webpageURL: URL(string: "file:///etc/passwd"), version: 0, device: "d")
        #expect(BrowserHostSession.openRequest(for: file, now: 1000, askedAt: 999) == nil)
    }

    // MARK: Media (docs/media.md, "Browser media")

    @Test func thePagesMediaIsSampledWhenTheMessageComes() throws {
        let message = try decode(#"{"kind":"current","title":"Clip","url":"https://example.org/v","mediaTime":42.5,"mediaPlaying":true,"mediaRate":1.5,"mediaDuration":600}"#,
                                 now: 1_700_000_000)
        guard case .current(let page) = message else { Issue.record("not a page: \(message)"); return }
        #expect(page.media == PageMedia(position: 42.5, positionTime: 1_700_000_000, rate: 1.5, playing: true, length: 600))
        #expect(page.userInfo == ["mediaPosition": .double(42.5), "mediaPositionTime": .double(1_700_000_000), "mediaRate": .double(1.5),
                                  "mediaPlaying": .boolean(true), "mediaLength": .double(600)])
    }

    @Test func mediaDefaultsAndBrokenNumbers() throws {
        // A rate left out is 1, a playing state left out is paused, a duration left out (or null: a live stream) is none.
        guard case .current(let page) = try decode(#"{"kind":"current","url":"https://example.org/v","mediaTime":3,"mediaDuration":null}"#) else {
            Issue.record("not a page"); return
        }
        #expect(page.media == PageMedia(position: 3, positionTime: 1000, rate: 1, playing: false))
        // Numbers out of bounds: the page is published without media.
        for bad in [#""mediaTime":-1"#, #""mediaTime":1e10"#, #""mediaTime":1,"mediaRate":99"#, #""mediaTime":1,"mediaRate":-2"#] {
            guard case .current(let page) = try decode(#"{"kind":"current","url":"https://example.org/v",\#(bad)}"#) else {
                Issue.record("not a page: \(bad)"); continue
            }
            #expect(page.media == nil, "\(bad)")
            #expect(page.url.absoluteString == "https://example.org/v")
        }
        // Without mediaTime nothing else counts; a wrong type is not a message of ours.
        guard case .current(let plain) = try decode(#"{"kind":"current","url":"https://example.org/v","mediaPlaying":true}"#) else {
            Issue.record("not a page"); return
        }
        #expect(plain.media == nil)
        for bad in [#""mediaTime":"42""#, #""mediaPlaying":1"#, #""mediaRate":true"#, #""mediaDuration":"600""#] {
            #expect(throws: BrowserMessageError.notJSON, "\(bad)") { _ = try decode(#"{"kind":"current","url":"https://example.org/v",\#(bad)}"#) }
        }
    }

    private func continued(_ url: String, _ info: [String: PropertyValue]) -> ContinuedActivity {
        ContinuedActivity(activityType: webBrowsingActivityType, title: "Clip", userInfo: info, webpageURL: URL(string: url), version: 0, device: "laptop")
    }

    /// The sample was taken at the pull (WillSave, the source's clock 5000); the handoff took 2 s here.
    private let playing = PageMedia(position: 100, positionTime: 5000, rate: 1, playing: true, length: 600)

    @Test func aSiteThatTakesATimeOpensAtTheSeekTarget() throws {
        let request = try #require(BrowserHostSession.openRequest(for: continued("https://www.youtube.com/watch?v=abc&t=5", playing.userInfo),
                                                                  now: 5002.5, askedAt: 5000.5))
        #expect(request == BrowserOpenRequest(url: "https://www.youtube.com/watch?v=abc&t=102", scrollX: nil, scrollY: nil))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(request.encoded())) as? [String: Any])
        #expect(json["mediaTime"] == nil)
    }

    @Test func anyOtherPageIsSeekedByTheExtension() throws {
        var info = playing.userInfo
        info["scrollY"] = .double(300)
        // The other machine's clock is 60 s ahead: the handoff's own 2 s bound the target.
        let request = try #require(BrowserHostSession.openRequest(for: continued("https://example.org/video.html", info), now: 5062, askedAt: 5060))
        #expect(request == BrowserOpenRequest(url: "https://example.org/video.html", scrollX: nil, scrollY: 300, mediaTime: 102, mediaPlaying: true, mediaRate: 1))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(request.encoded())) as? [String: Any])
        #expect(json["mediaTime"] as? Double == 102)
        #expect(json["mediaPlaying"] as? Bool == true)
        var paused = playing
        paused.playing = false
        let still = try #require(BrowserHostSession.openRequest(for: continued("https://example.org/video.html", paused.userInfo), now: 5062, askedAt: 5060))
        #expect(still.mediaTime == 100)
        #expect(still.mediaPlaying == false)
    }

    @Test func brokenMediaOpensThePageWithoutIt() throws {
        var info = playing.userInfo
        info["mediaPosition"] = .double(-3)
        let lines = LogLines()
        let request = try #require(BrowserHostSession.openRequest(for: continued("https://www.youtube.com/watch?v=abc", info), now: 5002, askedAt: 5000,
                                                                  log: lines.append))
        #expect(request == BrowserOpenRequest(url: "https://www.youtube.com/watch?v=abc", scrollX: nil, scrollY: nil))
        #expect(lines.text.contains("media position cannot be read"))
    }
}

/// Log lines a test collects.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var text: String { lock.withLock { lines.joined(separator: "\n") } }
}
