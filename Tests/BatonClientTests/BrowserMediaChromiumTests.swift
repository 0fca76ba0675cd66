// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import Foundation
import Testing

/// Test media made here: a page whose `<video>` plays a ten-minute tone the page writes itself as
/// WAV bytes (a blob: nothing downloaded, no media file from anywhere), and the same kind of WAV
/// as a bare file. In a browser whose user agent has `PageServer.scrollingAgent` (the user on
/// alpha) the page's video starts at 42 s by itself; elsewhere it waits at 0 unless someone
/// (the extension) moves it. Every second the page reports its video to the server:
/// `/report?who=alpha|beta&t=currentTime&paused=…&now=wall clock`, read back from the request log.
enum MediaTestPages {
    static let startsAt = 42.0

    static func write(into directory: URL) throws {
        try """
            <html><head><title>Clip</title><script>
            "use strict";
            function tone(seconds) {
              const rate = 8000, count = rate * seconds, bytes = new ArrayBuffer(44 + count), view = new DataView(bytes);
              const text = (at, value) => { for (let i = 0; i < value.length; i++) view.setUint8(at + i, value.charCodeAt(i)); };
              text(0, "RIFF"); view.setUint32(4, 36 + count, true); text(8, "WAVE"); text(12, "fmt ");
              view.setUint32(16, 16, true); view.setUint16(20, 1, true); view.setUint16(22, 1, true);
              view.setUint32(24, rate, true); view.setUint32(28, rate, true); view.setUint16(32, 1, true);
              view.setUint16(34, 8, true); text(36, "data"); view.setUint32(40, count, true);
              for (let i = 0; i < count; i++) view.setUint8(44 + i, 128 + Math.round(20 * Math.sin(i / 9)));
              return new Blob([bytes], { type: "audio/wav" });
            }
            addEventListener("DOMContentLoaded", () => {
              const video = document.querySelector("video");
              const reader = navigator.userAgent.includes("\(PageServer.scrollingAgent)");
              video.src = URL.createObjectURL(tone(600));
              if (reader) {
                video.addEventListener("loadedmetadata", () => { video.currentTime = \(startsAt); video.play().catch(() => {}); }, { once: true });
              }
              setInterval(() => {
                const query = `who=${reader ? "alpha" : "beta"}&t=${video.currentTime}&paused=${video.paused}&now=${Date.now() / 1000}`;
                fetch("/report?" + query).catch(() => {});
              }, 1000);
            });
            </script></head><body><video muted></video></body></html>
            """.write(to: directory.appendingPathComponent("video.html"), atomically: true, encoding: .utf8)
    }

    /// A ten-minute 8 kHz 8-bit mono WAV of a tone, written here byte by byte, as `clip.wav`.
    static func writeClip(into directory: URL) throws {
        let rate = 8000, count = rate * 600
        var bytes: [UInt8] = []
        bytes.reserveCapacity(44 + count)
        func text(_ value: String) { bytes += Array(value.utf8) }
        func le32(_ value: Int) { bytes += (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        func le16(_ value: Int) { bytes += (0..<2).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        text("RIFF"); le32(36 + count); text("WAVE"); text("fmt "); le32(16); le16(1); le16(1); le32(rate); le32(rate); le16(1); le16(8)
        text("data"); le32(count)
        for index in 0..<count { bytes.append(UInt8(128 + Int((20 * sin(Double(index) / 9)).rounded()))) }
        try Data(bytes).write(to: directory.appendingPathComponent("clip.wav"))
    }

    /// What the pages reported, oldest first.
    struct Report {
        var who: String
        var time: Double
        var paused: Bool
        var now: Double
    }

    static func reports(in server: PageServer) -> [Report] {
        let log = (try? String(contentsOf: server.requestLog, encoding: .utf8)) ?? ""
        return log.split(separator: "\n").compactMap { line in
            guard let start = line.range(of: "\"GET /report?"), let end = line.range(of: " HTTP/", range: start.upperBound..<line.endIndex),
                  let items = URLComponents(string: "/report?" + line[start.upperBound..<end.lowerBound])?.queryItems else { return nil }
            func value(_ name: String) -> String? { items.first { $0.name == name }?.value }
            guard let who = value("who"), let time = value("t").flatMap(Double.init), let now = value("now").flatMap(Double.init) else { return nil }
            return Report(who: who, time: time, paused: value("paused") == "true", now: now)
        }
    }
}

/// A media sample read from an activity's userInfo (docs/media.md, "Browser media").
func pageMedia(_ info: ActivityInfo) -> PageMedia? {
    (try? PageMedia(userInfo: info.userInfo ?? [:])) ?? nil
}

extension RealBrowserTests {
    @Suite("A page's video handed from Chromium on one daemon to Chromium on another", .serialized,
           .enabled(if: FileManager.default.isExecutableFile(atPath: chromiumPath), "needs Debian's chromium (scripts/install-deps)"))
    struct BrowserMediaChromiumTests {
        /// Neither browser may refuse to start the tone (the page's video is muted, which browsers
        /// allow anyway; the flag keeps the test about Baton).
        static let autoplay = "--autoplay-policy=no-user-gesture-required"
        /// How far beta's video may be from where alpha's would be had it played on: the seek
        /// target's own error is the handoff's bound; this adds the page's and the browser's lag.
        static let tolerance = 2.0

        @Test("alpha's video at 42 s and playing: beta's Chromium opens the page and its extension puts the video where alpha's is; alpha's pauses")
        func theVideoContinuesAtAlphasTime() async throws {
            let daemons = try await PairedDaemons()
            defer { daemons.stop() }
            let www = daemons.bus.directory.appendingPathComponent("www")
            let server = try await PageServer(directory: www)
            try MediaTestPages.write(into: www)
            let page = server.base + "/video.html"

            let alphaBrowser = try HeadlessChromium(busAddress: daemons.bus.address, busName: daemons.alpha.busName, directory: daemons.bus.directory,
                                                    firstPages: ["about:blank"],
                                                    extraArguments: ["--user-agent=Chromium \(PageServer.scrollingAgent)", Self.autoplay])
            defer { alphaBrowser.kill() }
            let alpha = try daemons.connect(daemons.alpha)
            defer { alpha.close() }
            _ = try await alphaBrowser.open(page)
            let playing = try await awaitValue("alpha publishes the page with its video playing from 42 s", timeout: .seconds(180)) {
                guard let path = try await alpha.currentActivityPath() else { return nil as ActivityInfo? }
                let info = try await alpha.activity(at: path)
                guard let media = pageMedia(info), media.playing, media.position >= MediaTestPages.startsAt - 0.5 else { return nil }
                return info
            }
            #expect(playing.webpageURL == page, "a page that takes no time in its URL is published as it is")
            #expect(playing.title == "Clip")
            let alphaMedia = try #require(pageMedia(playing))
            #expect(alphaMedia.length == 600)
            #expect(alphaMedia.rate == 1)

            let betaBrowser = try HeadlessChromium(busAddress: daemons.bus.address, busName: daemons.beta.busName, directory: daemons.bus.directory,
                                                   firstPages: ["about:blank"], extraArguments: [Self.autoplay])
            defer { betaBrowser.kill() }
            let beta = try daemons.connect(daemons.beta)
            defer { beta.close() }
            _ = try await awaitValue("beta's host registered", timeout: .seconds(180)) {
                try await beta.handledTypes().contains("org.baton.web-browsing") ? true : nil
            }
            // Where alpha's video is at any moment had it played on (its sample, on this host's one clock).
            let alphaPath = try #require(try await alpha.currentActivityPath())
            let sample = try #require(pageMedia(try await alpha.activity(at: alphaPath)))
            func alphaWouldBe(at time: Double) -> Double { sample.position(at: time) }

            #expect(try await beta.continueFromMember("alpha", type: "org.baton.web-browsing") == "delivered")
            let continued = try await awaitValue("beta's extension opens the page and puts its video at alpha's time", timeout: .seconds(180)) {
                guard let path = try await beta.currentActivityPath() else { return nil as ActivityInfo? }
                let info = try await beta.activity(at: path)
                guard info.webpageURL == page, let media = pageMedia(info), media.playing, media.position >= MediaTestPages.startsAt else { return nil }
                return info
            }
            let betaMedia = try #require(pageMedia(continued))
            #expect(abs(betaMedia.position - alphaWouldBe(at: betaMedia.positionTime)) <= Self.tolerance,
                    "beta at \(betaMedia.position) s, alpha would be at \(alphaWouldBe(at: betaMedia.positionTime)) s")
            // The URL beta opened is the page's own: the time went in the open request.
            let tabs = String(decoding: try await betaBrowser.devToolsRequest("GET", "/json/list"), as: UTF8.self)
            #expect(tabs.contains("\"url\": \"\(page)\""), "\(tabs)")

            // beta's page itself says where its video is, playing, on this host's wall clock.
            let report = try await awaitValue("beta's page reports its video playing after the seek") {
                MediaTestPages.reports(in: server).last { $0.who == "beta" && !$0.paused && $0.time >= MediaTestPages.startsAt }
            }
            #expect(abs(report.time - alphaWouldBe(at: report.now)) <= Self.tolerance,
                    "beta's video.currentTime \(report.time) s, alpha would be at \(alphaWouldBe(at: report.now)) s")

            // alpha paused on WasContinued: its extension reports the video paused, and so does its page.
            let paused = try await awaitValue("alpha's video paused") {
                guard let path = try await alpha.currentActivityPath(), let media = pageMedia(try await alpha.activity(at: path)), !media.playing else {
                    return nil as PageMedia?
                }
                return media
            }
            #expect(paused.position >= sample.position)
            _ = try await awaitValue("alpha's page reports its video paused") {
                MediaTestPages.reports(in: server).last { $0.who == "alpha" }?.paused == true ? true : nil
            }
            #expect(alphaBrowser.hostLogText.contains("the page was continued on beta"))
        }
    
        @Test("a bare media file: the URL beta's Chromium opens carries the time (#t=), and its media document starts there")
        func aMediaFileOpensAtTheTimeInItsURL() async throws {
            let daemons = try await PairedDaemons()
            defer { daemons.stop() }
            let www = daemons.bus.directory.appendingPathComponent("www")
            let server = try await PageServer(directory: www)
            try MediaTestPages.writeClip(into: www)
            let file = server.base + "/clip.wav"

            // alpha's browser plays the file from 42 s (its own URL has the media fragment).
            let alphaBrowser = try HeadlessChromium(busAddress: daemons.bus.address, busName: daemons.alpha.busName, directory: daemons.bus.directory,
                                                    firstPages: ["about:blank"], extraArguments: [Self.autoplay])
            defer { alphaBrowser.kill() }
            let alpha = try daemons.connect(daemons.alpha)
            defer { alpha.close() }
            // DevTools takes the page in its query: the fragment goes escaped.
            _ = try await alphaBrowser.open(file + "%23t=42")
            let playing = try await awaitValue("alpha publishes the file playing from 42 s", timeout: .seconds(180)) {
                guard let path = try await alpha.currentActivityPath() else { return nil as ActivityInfo? }
                let info = try await alpha.activity(at: path)
                guard let media = pageMedia(info), media.playing, media.position >= MediaTestPages.startsAt - 0.5 else { return nil }
                return info
            }
            let sample = try #require(pageMedia(playing))
            #expect(playing.webpageURL == "\(file)#t=\(Int(sample.position))", "the published URL has the time of the sample")

            let betaBrowser = try HeadlessChromium(busAddress: daemons.bus.address, busName: daemons.beta.busName, directory: daemons.bus.directory,
                                                   firstPages: ["about:blank"], extraArguments: [Self.autoplay])
            defer { betaBrowser.kill() }
            let beta = try daemons.connect(daemons.beta)
            defer { beta.close() }
            _ = try await awaitValue("beta's host registered", timeout: .seconds(180)) {
                try await beta.handledTypes().contains("org.baton.web-browsing") ? true : nil
            }
            let asked = Date().timeIntervalSince1970
            #expect(try await beta.continueFromMember("alpha", type: "org.baton.web-browsing") == "delivered")
            let delivered = Date().timeIntervalSince1970

            // The tab beta opened: the file with #t= at alpha's position at the pull plus the handoff.
            let opened = try await awaitValue("beta's browser has the file open") { () -> String? in
                let data = try await betaBrowser.devToolsRequest("GET", "/json/list")
                let tabs = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
                return tabs.compactMap { $0["url"] as? String }.first { $0.hasPrefix(file + "#t=") }
            }
            let seconds = try #require(Double(opened.dropFirst(file.count + 3)), "\(opened)")
            #expect(seconds >= (sample.position(at: asked) - 1).rounded(.down), "\(opened): not before alpha's position when beta asked")
            #expect(seconds <= sample.position(at: delivered), "\(opened): not after alpha's position when it was delivered")

            // The media document starts there: beta's extension publishes it at that position or later.
            let continued = try await awaitValue("beta publishes the file near alpha's time", timeout: .seconds(180)) {
                guard let path = try await beta.currentActivityPath() else { return nil as PageMedia? }
                let info = try await beta.activity(at: path)
                guard info.webpageURL?.hasPrefix(file) == true, let media = pageMedia(info), media.position >= seconds - 0.5 else { return nil }
                return media
            }
            // It lags alpha by the page's load, which a time in a URL cannot include, and is never ahead.
            #expect(continued.position <= sample.position(at: continued.positionTime) + 0.5,
                    "beta at \(continued.position) s, alpha would be at \(sample.position(at: continued.positionTime)) s")
        }
    }
}
