// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonDBus
import BatonTestBus
import Foundation
import Testing

/// The suites that start real browsers, one suite at a time (the trait reaches nested suites):
/// each starts one to three browsers, heavy on a small shared machine, and several at once would
/// slow the timing-sensitive suites that run beside them.
@Suite(.serialized) enum RealBrowserTests {}

/// Two machines on one host: two real `batond` processes (alpha and beta) on one private bus, TLS
/// on 127.0.0.1, no radio and no DNS-SD, paired through Pairing1 exactly as bt-pair does. With no
/// radio beta never hears alpha's advert: Ring1.Continue (the by-hand continuation, as in the
/// service's TransferTests) stands in for accepting the suggestion; the lab runs the over-the-air
/// path (WebPageLabTests).
final class PairedDaemons: @unchecked Sendable {
    struct Member {
        let name: String
        let busName: String
        let log: URL
        let process: Process
    }

    let bus: TestBus
    let alpha: Member
    let beta: Member

    init() async throws {
        bus = try TestBus()
        do {
            alpha = try Self.start("alpha", on: bus)
            beta = try Self.start("beta", on: bus)
        } catch {
            bus.stop()
            throw error
        }
        do {
            try await pair()
        } catch {
            stop()
            throw error
        }
    }

    private static func start(_ name: String, on bus: TestBus) throws -> Member {
        let busName = "org.baton.Test\(name.capitalized)\(UInt32.random(in: 0...UInt32.max))"
        let state = bus.directory.appendingPathComponent("state-\(name)")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let log = bus.directory.appendingPathComponent("batond-\(name).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Built.executable("batond"))
        process.arguments = ["--bus-address", bus.address, "--bus-name", busName, "--state-dir", state.path, "--no-radio", "--no-avahi",
                             "--listen", "127.0.0.1", "--name", name]
        var environment = ProcessInfo.processInfo.environment
        // No .desktop files from this machine: the only handlers are the test's.
        environment["XDG_DATA_HOME"] = bus.directory.appendingPathComponent("data-\(name)").path
        environment["XDG_DATA_DIRS"] = bus.directory.appendingPathComponent("data-dirs-\(name)").path
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: log)
        try launch(process)
        return Member(name: name, busName: busName, log: log, process: process)
    }

    func connect(_ member: Member) throws -> BatonConnection {
        try BatonConnection(bus: .address(bus.address), busName: member.busName)
    }

    func log(_ member: Member) -> String { (try? String(contentsOf: member.log, encoding: .utf8)) ?? "" }

    /// alpha accepts, beta dials 127.0.0.1 and its user types the code alpha shows, alpha's the second
    /// code beta then shows; both commit.
    private func pair() async throws {
        let probe = try DBusConnection(bus: .address(bus.address))
        defer { probe.close() }
        for member in [alpha, beta] {
            try await eventually(timeout: .seconds(120), "\(member.name) on the bus") { try await probe.nameHasOwner(member.busName) }
        }
        let a = try connect(alpha), b = try connect(beta)
        defer {
            a.close()
            b.close()
        }
        let accepting = try await a.acceptPairing(AcceptOptions(host: "127.0.0.1"))
        let offer = try await a.pairingSession(at: accepting)
        let dialling = try await b.pair(with: "127.0.0.1:\(offer.port)", options: PairOptions(sessionID: offer.sessionID))
        func state(_ connection: BatonConnection, _ path: String) async throws -> String { try await connection.pairingSession(at: path).state }
        try await eventually(timeout: .seconds(120), "alpha shows a code") { try await state(a, accepting) == "confirming" }
        let code = try await a.pairingSession(at: accepting).code
        try await b.confirmPairingCode(at: dialling, code: code)
        // beta then shows the second code; alpha's user types it.
        try await eventually(timeout: .seconds(120), "beta shows the second code") { try await b.pairingSession(at: dialling).code.count == 6 }
        try await a.confirmPairingCode(at: accepting, code: try await b.pairingSession(at: dialling).code)
        for (connection, path) in [(a, accepting), (b, dialling)] {
            try await eventually(timeout: .seconds(120), "reviewing") { try await state(connection, path) == "reviewing" }
            try await connection.commitPairing(at: path)
        }
        for (connection, path) in [(a, accepting), (b, dialling)] {
            try await eventually(timeout: .seconds(120), "paired") { try await state(connection, path) == "paired" }
        }
    }

    func stop() {
        for process in [alpha.process, beta.process] where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            // Bounded, and no run loop: this may run on a cooperative thread.
            for _ in 0..<200 where process.isRunning { usleep(10_000) }
        }
        bus.stop()
    }

    deinit { stop() }
}

extension RealBrowserTests {
    @Suite("A web page handed from Chromium on one daemon to another", .serialized,
           .enabled(if: FileManager.default.isExecutableFile(atPath: chromiumPath), "needs Debian's chromium (scripts/install-deps)"))
    struct BrowserHandoffTests {
        /// alpha's Chromium reads the long page, scrolled down by its reader; the page becomes alpha's
        /// current activity with its scroll position.
        private func readOnAlpha(_ daemons: PairedDaemons, _ server: PageServer) async throws -> HeadlessChromium {
            let browser = try HeadlessChromium(busAddress: daemons.bus.address, busName: daemons.alpha.busName, directory: daemons.bus.directory,
                                               firstPages: ["about:blank"], extraArguments: ["--user-agent=Chromium \(PageServer.scrollingAgent)"])
            let alpha = try daemons.connect(daemons.alpha)
            defer { alpha.close() }
            _ = try await browser.open(server.base + "/long.html")
            // Chromium names a tab by its URL until the page's <title> is parsed; the extension
            // publishes again when the title changes (tabs.onUpdated), so on a loaded machine the
            // scrolled page may come first under its URL and its title a moment later.
            let published = try await awaitValue("alpha publishes the scrolled page under its title") {
                guard let path = try await alpha.currentActivityPath() else { return nil as ActivityInfo? }
                let info = try await alpha.activity(at: path)
                return info.userInfo?["scrollY"] == .double(Double(PageServer.scrolledY)) && info.title == "Long Read" ? info : nil
            }
            #expect(published.activityType == "org.baton.web-browsing")
            #expect(published.title == "Long Read")
            #expect(published.webpageURL == server.base + "/long.html")
            return browser
        }

        @Test("beta's host is asked to open alpha's page at alpha's scroll position; alpha's host hears WasContinued")
        func continuationReachesTheHostOnTheOtherDaemon() async throws {
            let daemons = try await PairedDaemons()
            defer { daemons.stop() }
            let server = try await PageServer(directory: daemons.bus.directory.appendingPathComponent("www"))
            let alphaBrowser = try await readOnAlpha(daemons, server)
            defer { alphaBrowser.kill() }

            // beta's browser, played by the test: its host registers for web pages there.
            let betaBrowser = try FakeBrowser(busAddress: daemons.bus.address, busName: daemons.beta.busName, directory: daemons.bus.directory)
            defer { betaBrowser.kill() }
            let beta = try daemons.connect(daemons.beta)
            defer { beta.close() }
            _ = try await awaitValue("beta's host registered") { try await beta.handledTypes().contains("org.baton.web-browsing") ? true : nil }

            let outcome = try await beta.continueFromMember("alpha", type: "org.baton.web-browsing")
            #expect(outcome == "delivered", "beta:\n\(daemons.log(daemons.beta))\nalpha:\n\(daemons.log(daemons.alpha))")
            let open = try await awaitValue("beta's host asks its browser to open the page") { betaBrowser.received.messages.first }
            #expect(open["kind"] as? String == "open")
            #expect(open["url"] as? String == server.base + "/long.html")
            #expect(open["scrollX"] as? Double == 0)
            #expect(open["scrollY"] as? Double == Double(PageServer.scrolledY))
            #expect(betaBrowser.received.messages.count == 1)

            // alpha's source is its browser's host: it logs the WasContinued the daemon sent it.
            _ = try await awaitValue("alpha's host hears WasContinued") {
                alphaBrowser.hostLogText.contains("the page was continued on beta") ? true : nil
            }
        }

        @Test("the extension in beta's Chromium opens the continued page and restores alpha's scroll position")
        func theExtensionOnBetaRestoresTheScrollPosition() async throws {
            let daemons = try await PairedDaemons()
            defer { daemons.stop() }
            let server = try await PageServer(directory: daemons.bus.directory.appendingPathComponent("www"))
            let alphaBrowser = try await readOnAlpha(daemons, server)
            defer { alphaBrowser.kill() }

            // beta's Chromium scrolls the page only if the extension restores the position: its user
            // agent is not the one the page scrolls itself for.
            let betaBrowser = try HeadlessChromium(busAddress: daemons.bus.address, busName: daemons.beta.busName,
                                                   directory: daemons.bus.directory, firstPages: ["about:blank"])
            defer { betaBrowser.kill() }
            let beta = try daemons.connect(daemons.beta)
            defer { beta.close() }
            _ = try await awaitValue("beta's host registered") { try await beta.handledTypes().contains("org.baton.web-browsing") ? true : nil }

            #expect(try await beta.continueFromMember("alpha", type: "org.baton.web-browsing") == "delivered")
            // beta's extension publishes the tab it opened, as any page read there: at alpha's position.
            let reopened = try await awaitValue("beta shows the page scrolled where alpha's was", timeout: .seconds(120)) {
                guard let path = try await beta.currentActivityPath() else { return nil as ActivityInfo? }
                let info = try await beta.activity(at: path)
                return info.webpageURL == server.base + "/long.html" && info.userInfo?["scrollY"] == .double(Double(PageServer.scrolledY)) ? info : nil
            }
            #expect(reopened.title == "Long Read")
            _ = try await awaitValue("alpha's host hears WasContinued") {
                alphaBrowser.hostLogText.contains("the page was continued on beta") ? true : nil
            }
        }
    }
}
