// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import Foundation
import Synchronization
import Testing

/// A web page's media time between two real daemons and the built `baton-browser-host` on each,
/// the test playing both browsers (docs/media.md, "Browser media"). No browser is started: the
/// headless Chromium tests (BrowserMediaChromiumTests) drive the extension itself.
@Suite("A page's media time through baton-browser-host on two daemons", .serialized)
struct BrowserMediaHostTests {
    private func now() -> Double { Date().timeIntervalSince1970 }

    /// The value of query parameter `name` in `url`.
    private func query(_ name: String, in url: String) -> String? {
        URLComponents(string: url)?.queryItems?.first { $0.name == name }?.value
    }

    @Test("a YouTube page leaves at the position of the pull: beta's host opens it with t= at that position plus the handoff; alpha's host asks its browser to pause")
    func youTubeTimeTravelsInTheURL() async throws {
        let daemons = try await PairedDaemons()
        defer { daemons.stop() }
        let alphaLog = daemons.bus.directory.appendingPathComponent("alpha-host.log")
        let alphaBrowser = try FakeBrowser(busAddress: daemons.bus.address, busName: daemons.alpha.busName, directory: daemons.bus.directory, log: alphaLog)
        defer { alphaBrowser.kill() }
        let alpha = try daemons.connect(daemons.alpha)
        defer { alpha.close() }

        let page = "https://www.youtube.com/watch?v=abc&t=5"
        let reported = now()
        try alphaBrowser.send(#"{"kind":"current","title":"Talk","url":"\#(page)","mediaTime":100.4,"mediaPlaying":true,"mediaRate":1,"mediaDuration":3600}"#)
        let published = try await awaitValue("alpha publishes the page with its media") {
            guard let path = try await alpha.currentActivityPath() else { return nil as ActivityInfo? }
            let info = try await alpha.activity(at: path)
            return info.userInfo?["mediaPosition"] == nil ? nil : info
        }
        #expect(published.userInfo?["mediaPosition"] == .double(100.4))
        #expect(published.userInfo?["mediaPlaying"] == .boolean(true))
        #expect(published.userInfo?["mediaLength"] == .double(3600))
        let sampled = try #require({ if case .double(let time)? = published.userInfo?["mediaPositionTime"] { time } else { nil } }())
        #expect(sampled >= reported - 1 && sampled <= now() + 1)
        // The published page already carries the time for a browser without the extension.
        #expect(published.webpageURL == "https://www.youtube.com/watch?v=abc&t=100")

        // The video plays on while the user walks over: the position must be the one at the pull,
        // which only WillSave gives (the sample above is 3 s old by then).
        try await Task.sleep(for: .seconds(3))
        let betaBrowser = try FakeBrowser(busAddress: daemons.bus.address, busName: daemons.beta.busName, directory: daemons.bus.directory)
        defer { betaBrowser.kill() }
        let beta = try daemons.connect(daemons.beta)
        defer { beta.close() }
        _ = try await awaitValue("beta's host registered") { try await beta.handledTypes().contains("org.baton.web-browsing") ? true : nil }

        #expect(try await beta.continueFromMember("alpha", type: "org.baton.web-browsing") == "delivered")
        let delivered = now()
        let open = try await awaitValue("beta's host asks its browser to open the page") { betaBrowser.received.messages.first }
        let url = try #require(open["url"] as? String)
        let t = try #require(query("t", in: url).flatMap(Double.init), "\(url)")
        #expect(url.hasPrefix("https://www.youtube.com/watch?v=abc&t="))
        #expect(t >= 100.4 + 3 - 1, "t=\(t): the position at the pull, 3 s after the sample")
        #expect(t <= 100.4 + (delivered - sampled) + 1, "t=\(t): never ahead of alpha's position now")
        #expect(open["mediaTime"] == nil, "the URL carries the time: nothing for the page to seek")

        let pause = try await awaitValue("alpha's host asks its browser to pause the page's media") {
            alphaBrowser.received.messages.first { $0["kind"] as? String == "pause" }
        }
        #expect(pause.count == 1)
        let log = (try? String(contentsOf: alphaLog, encoding: .utf8)) ?? ""
        #expect(log.contains("the page was continued on beta"))
    }

    @Test("any other page: the time goes in the open request for the extension to seek; a paused page is not paused again, and media-pause-source = off is obeyed")
    func otherPagesAreSeekedByTheExtension() async throws {
        let daemons = try await PairedDaemons()
        defer { daemons.stop() }
        let alphaLog = daemons.bus.directory.appendingPathComponent("alpha-host.log")
        let alphaBrowser = try FakeBrowser(busAddress: daemons.bus.address, busName: daemons.alpha.busName, directory: daemons.bus.directory, log: alphaLog)
        defer { alphaBrowser.kill() }
        let alpha = try daemons.connect(daemons.alpha)
        defer { alpha.close() }
        let betaBrowser = try FakeBrowser(busAddress: daemons.bus.address, busName: daemons.beta.busName, directory: daemons.bus.directory)
        defer { betaBrowser.kill() }
        let beta = try daemons.connect(daemons.beta)
        defer { beta.close() }
        _ = try await awaitValue("beta's host registered") { try await beta.handledTypes().contains("org.baton.web-browsing") ? true : nil }

        // Paused at 50 s: opened paused at 50 s, whatever the time the handoff took.
        try alphaBrowser.send(#"{"kind":"current","title":"Lecture","url":"https://example.org/lecture.html","scrollY":200,"mediaTime":50,"mediaPlaying":false,"mediaRate":1}"#)
        let published = try await awaitValue("alpha publishes the paused page") {
            guard let path = try await alpha.currentActivityPath() else { return nil as ActivityInfo? }
            let info = try await alpha.activity(at: path)
            return info.userInfo?["mediaPosition"] == .double(50) ? info : nil
        }
        #expect(published.webpageURL == "https://example.org/lecture.html", "no time in a URL that takes none")
        #expect(try await beta.continueFromMember("alpha", type: "org.baton.web-browsing") == "delivered")
        let open = try await awaitValue("beta's host asks its browser to open the page") { betaBrowser.received.messages.first }
        #expect(open["url"] as? String == "https://example.org/lecture.html")
        #expect(open["scrollY"] as? Double == 200)
        #expect(open["mediaTime"] as? Double == 50)
        #expect(open["mediaPlaying"] as? Bool == false)
        #expect(open["mediaRate"] as? Double == 1)

        // Playing, with pausing turned off by the user: the host says why it does not pause.
        let config = try #require(alphaBrowser.process.environment?["XDG_CONFIG_HOME"])
        try "browser = on\nmedia-pause-source = off\n".write(toFile: config + "/baton/publishers.conf", atomically: true, encoding: .utf8)
        let before = now()
        try alphaBrowser.send(#"{"kind":"current","title":"Lecture","url":"https://example.org/lecture.html","mediaTime":60,"mediaPlaying":true,"mediaRate":2}"#)
        _ = try await awaitValue("alpha publishes the page playing") {
            guard let path = try await alpha.currentActivityPath() else { return nil as Bool? }
            return try await alpha.activity(at: path).userInfo?["mediaPlaying"] == .boolean(true) ? true : nil
        }
        #expect(try await beta.continueFromMember("alpha", type: "org.baton.web-browsing") == "delivered")
        let after = now()
        let second = try await awaitValue("a second open request") { betaBrowser.received.messages.count >= 2 ? betaBrowser.received.messages[1] : nil }
        let target = try #require(second["mediaTime"] as? Double)
        #expect(target >= 60 && target <= 60 + 2 * (after - before) + 0.5, "\(target)")
        #expect(second["mediaPlaying"] as? Bool == true)
        #expect(second["mediaRate"] as? Double == 2)
        _ = try await awaitValue("alpha's host says it does not pause") {
            ((try? String(contentsOf: alphaLog, encoding: .utf8)) ?? "").contains("not pausing the page's media (media-pause-source = off)") ? true : nil
        }
        #expect(!alphaBrowser.received.messages.contains { $0["kind"] as? String == "pause" })
    }

    @Test("without the extension on beta, the page that leaves carries the time of the pull in its WebpageURL (what the browser fallback opens)")
    func theWebpageURLCarriesThePullsTime() async throws {
        let daemons = try await PairedDaemons()
        defer { daemons.stop() }
        let alphaBrowser = try FakeBrowser(busAddress: daemons.bus.address, busName: daemons.alpha.busName, directory: daemons.bus.directory)
        defer { alphaBrowser.kill() }
        let alpha = try daemons.connect(daemons.alpha)
        defer { alpha.close() }
        try alphaBrowser.send(#"{"kind":"current","title":"Talk","url":"https://vimeo.com/76979871","mediaTime":30,"mediaPlaying":true,"mediaRate":1}"#)
        let sampled = try await awaitValue("alpha publishes the page with its media") { () -> Double? in
            guard let path = try await alpha.currentActivityPath() else { return nil }
            let info = try await alpha.activity(at: path)
            guard info.webpageURL == "https://vimeo.com/76979871#t=30s", case .double(let time)? = info.userInfo?["mediaPositionTime"] else { return nil }
            return time
        }
        try await Task.sleep(for: .seconds(3))

        // beta's only handler for pages is the test's: what it gets is what batond fetched from alpha,
        // the same WebpageURL Suggestion1.ContinueInBrowser hands to the agent's fallback.
        let beta = try daemons.connect(daemons.beta)
        defer { beta.close() }
        let received = Mutex<ContinuedActivity?>(nil)
        _ = try await beta.registerHandler(for: ["org.baton.web-browsing"]) { continued in received.withLock { $0 = continued } }
        #expect(try await beta.continueFromMember("alpha", type: "org.baton.web-browsing") == "delivered")
        let delivered = now()
        let continued = try await awaitValue("beta's handler gets the page") { received.withLock { $0 } }
        let url = try #require(continued.webpageURL?.absoluteString)
        #expect(url.hasPrefix("https://vimeo.com/76979871#t="))
        let seconds = try #require(Double(url.dropFirst("https://vimeo.com/76979871#t=".count).dropLast()), "\(url)")
        #expect(seconds >= 32 && seconds <= 30 + (delivered - sampled) + 1, "\(url): alpha's position at the pull, 3 s after the sample")
        let media = try #require(try PageMedia(userInfo: continued.userInfo))
        #expect(media.positionTime >= sampled + 3 - 0.5, "the sample moved to the pull")
        #expect(abs(media.position - (30 + media.positionTime - sampled)) < 0.01)
        #expect(media.playing)
    }
}
