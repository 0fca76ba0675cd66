// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBrowserHost
import BatonClient
import BatonCore
import Foundation
import Testing

private func decode(_ json: String) throws -> BrowserMessage { try BrowserMessage.decode(Array(json.utf8)) }

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
        let request = try #require(BrowserHostSession.openRequest(for: continued))
        #expect(request == BrowserOpenRequest(url: "https://example.org/a", scrollX: 3, scrollY: 812.5))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(request.encoded())) as? [String: Any])
        #expect(json["kind"] as? String == "open")
        #expect(json["url"] as? String == "https://example.org/a")
        #expect(json["scrollY"] as? Double == 812.5)
    }

    @Test func aContinuedActivityWithoutAWebPageOpensNothing() {
        let noURL = ContinuedActivity(activityType: webBrowsingActivityType, title: "x", userInfo: [:], webpageURL: nil, version: 0, device: "d")
        #expect(BrowserHostSession.openRequest(for: noURL) == nil)
        let file = ContinuedActivity(activityType: webBrowsingActivityType, title: "x", userInfo: [:],
                                     webpageURL: URL(string: "file:///etc/passwd"), version: 0, device: "d")
        #expect(BrowserHostSession.openRequest(for: file) == nil)
    }
}
