// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import Foundation
import Testing

extension RealBrowserTests {
    @Suite("A page's video handed from Firefox ESR on one daemon to Firefox ESR on another", .serialized,
           .enabled(if: FileManager.default.isExecutableFile(atPath: firefoxPath), "needs Debian's firefox-esr (scripts/install-deps)"))
    struct BrowserMediaFirefoxTests {
        /// Firefox's autoplay setting: allowed, as Chromium's flag in BrowserMediaChromiumTests.
        static let autoplay = #"user_pref("media.autoplay.default", 0);"#

        @Test("alpha's video at 42 s and playing in Firefox: beta's Firefox opens the page and its extension puts the video where alpha's is; alpha's pauses")
        func theVideoContinuesAtAlphasTime() async throws {
            let daemons = try await PairedDaemons()
            defer { daemons.stop() }
            let www = daemons.bus.directory.appendingPathComponent("www")
            let server = try await PageServer(directory: www)
            try MediaTestPages.write(into: www)
            let page = server.base + "/video.html"

            let reader = #"user_pref("general.useragent.override", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0 \#(PageServer.scrollingAgent)");"#
            let alphaBrowser = try await HeadlessFirefox(busAddress: daemons.bus.address, busName: daemons.alpha.busName, directory: daemons.bus.directory,
                                                         pages: [page], preferences: [reader, Self.autoplay])
            defer { alphaBrowser.kill() }
            let alpha = try daemons.connect(daemons.alpha)
            defer { alpha.close() }
            // Firefox starts slowly on a loaded machine (a fresh profile, the extension installed on first run).
            _ = try await awaitValue("alpha publishes the page with its video playing from 42 s", timeout: .seconds(180)) {
                guard let path = try await alpha.currentActivityPath() else { return nil as PageMedia? }
                let info = try await alpha.activity(at: path)
                guard info.webpageURL == page, let media = pageMedia(info), media.playing, media.position >= MediaTestPages.startsAt - 0.5 else { return nil }
                return media
            }

            let betaBrowser = try await HeadlessFirefox(busAddress: daemons.bus.address, busName: daemons.beta.busName, directory: daemons.bus.directory,
                                                        pages: ["about:blank"], preferences: [Self.autoplay])
            defer { betaBrowser.kill() }
            let beta = try daemons.connect(daemons.beta)
            defer { beta.close() }
            _ = try await awaitValue("beta's host registered", timeout: .seconds(180)) {
                try await beta.handledTypes().contains("org.baton.web-browsing") ? true : nil
            }
            let alphaPath = try #require(try await alpha.currentActivityPath())
            let sample = try #require(pageMedia(try await alpha.activity(at: alphaPath)))

            #expect(try await beta.continueFromMember("alpha", type: "org.baton.web-browsing") == "delivered")
            let continued = try await awaitValue("beta's extension opens the page and puts its video at alpha's time", timeout: .seconds(180)) {
                guard let path = try await beta.currentActivityPath() else { return nil as PageMedia? }
                let info = try await beta.activity(at: path)
                guard info.webpageURL == page, let media = pageMedia(info), media.playing, media.position >= MediaTestPages.startsAt else { return nil }
                return media
            }
            #expect(abs(continued.position - sample.position(at: continued.positionTime)) <= BrowserMediaChromiumTests.tolerance,
                    "beta at \(continued.position) s, alpha would be at \(sample.position(at: continued.positionTime)) s")
            let report = try await awaitValue("beta's page reports its video playing after the seek") {
                MediaTestPages.reports(in: server).last { $0.who == "beta" && !$0.paused && $0.time >= MediaTestPages.startsAt }
            }
            #expect(abs(report.time - sample.position(at: report.now)) <= BrowserMediaChromiumTests.tolerance,
                    "beta's video.currentTime \(report.time) s, alpha would be at \(sample.position(at: report.now)) s")

            _ = try await awaitValue("alpha's page reports its video paused") {
                MediaTestPages.reports(in: server).last { $0.who == "alpha" }?.paused == true ? true : nil
            }
        }
    }
}
