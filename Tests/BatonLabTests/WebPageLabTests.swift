// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// The browser's side of `baton-browser-host` in the lab (the VM has no browser): the test writes
/// native messaging frames to the host's stdin and reads the host's frames from its stdout.
final class LabBrowserHost: @unchecked Sendable {
    let process = Process()
    private let stdin = ChildPipe(), stdout = ChildPipe()
    private let bytes = Mutex<[UInt8]>([])
    let log: URL

    init(lab: DaemonPair, daemon: String) throws {
        let config = lab.directory.appendingPathComponent("config-\(daemon)")
        try FileManager.default.createDirectory(at: config.appendingPathComponent("baton"), withIntermediateDirectories: true)
        try "browser = on\n".write(to: config.appendingPathComponent("baton/publishers.conf"), atomically: true, encoding: .utf8)
        log = lab.directory.appendingPathComponent("host-\(daemon).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: product("baton-browser-host"))
        process.arguments = ["chrome-extension://ncnikhcegemmombopokkmfofiobceefk/"]
        process.environment = ["BATON_BUS": lab.address, "BATON_BUS_NAME": "org.baton.\(daemon)", "XDG_CONFIG_HOME": config.path,
                               "PATH": "/usr/bin:/bin"]
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = try FileHandle(forWritingTo: log)
        try launch(process)
        let handle = stdout.fileHandleForReading
        Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                self.bytes.withLock { $0.append(contentsOf: data) }
            }
        }.start()
    }

    /// One message from the extension, framed as the browser frames it.
    func send(_ json: String) throws {
        let body = Array(json.utf8)
        try stdin.fileHandleForWriting.write(contentsOf: withUnsafeBytes(of: UInt32(body.count)) { Array($0) } + body)
    }

    /// The host's complete frames so far, as JSON objects.
    var received: [[String: Any]] {
        let buffer = bytes.withLock { $0 }
        var messages: [[String: Any]] = [], start = 0
        while buffer.count - start >= 4 {
            let length = Int(buffer[start..<(start + 4)].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
            guard buffer.count - start - 4 >= length else { break }
            messages.append((try? JSONSerialization.jsonObject(with: Data(buffer[(start + 4)..<(start + 4 + length)]))) as? [String: Any] ?? [:])
            start += 4 + length
        }
        return messages
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    func stop() { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// Issue 16's web-page flow on real bluetoothd: alpha's page (published by baton-browser-host,
/// the test playing the browser) goes over the air; beta, with no handler for web pages, offers
/// it as "Open in browser" and its session agent opens the URL with the default browser (a test
/// https handler); then, with a baton-browser-host on beta, a newer page is delivered to that host
/// as an `open` request with alpha's scroll position. alpha's host hears WasContinued each time.
@Suite(.serialized, .enabled(if: Lab.isInside, "needs the BlueZ lab VM (LAB_VM=1)"))
struct WebPageLabTests {
    @Test(.enabled(if: TwoDaemonsLabTests.desktopAvailable, "needs dunst, dunstctl and Xvfb (scripts/install-deps)"))
    func aPageFromAlphasBrowserOpensOnBetaOverTheAir() async throws {
        let lab = try DaemonPair()
        defer { lab.stop() }
        let twoDaemons = TwoDaemonsLabTests()
        try lab.start(name: "alpha", adapter: "hci0")
        // Suggestions stay while the test takes its steps (the default 10 s away hysteresis could withdraw one).
        try lab.start(name: "beta", adapter: "hci1", extraArguments: ["--away-after", "300"])
        #expect(await lab.eventually(10) { (try? await lab.cli("bt-pair", "beta", ["list"]))?.0 == 0 })
        try await twoDaemons.pairOverTCP(lab)

        // beta's session: dunst on Xvfb, baton-agent, a test default browser for https.
        let desktop = try await LabDesktopSession(lab: lab)
        defer { desktop.stop() }
        let opened = lab.directory.appendingPathComponent("opened-url").path
        try twoDaemons.writeTestBrowser(in: lab.directory, recordingTo: opened)
        func dunstctl(_ arguments: [String]) async -> String { await desktop.dunstctl(arguments) }
        try #require(desktop.answering, "dunst did not start:\n\(desktop.problems.joined(separator: "\n"))")
        _ = try desktop.spawn(product("baton-agent"), ["--bus", lab.address, "--bus-name", "org.baton.beta"],
                                      log: lab.directory.appendingPathComponent("agent.log").path)

        // alpha's browser reads a page, scrolled down.
        let alphaHost = try LabBrowserHost(lab: lab, daemon: "alpha")
        defer { alphaHost.stop() }
        let logs = { "alpha host:\n\(alphaHost.logText)\nbeta:\n\(lab.log("beta"))\nagent:\n\(lab.log("agent"))\nalpha:\n\(lab.log("alpha"))" }
        try alphaHost.send(#"{"kind":"current","title":"Dune, chapter 2","url":"https://example.org/dune#2","scrollX":0,"scrollY":1500}"#)

        // (a) No handler for web pages on beta: the notification offers the browser; dunst clicks it.
        let shown = await lab.eventually(40) { await dunstctl(["count", "displayed"]) == "1" }
        // When beta's radio heard nothing of alpha (seen once in CI), what both radios said.
        let radios = shown ? "" : ((try? await lab.radioReport()) ?? "")
        #expect(shown, "\(logs())\n\(radios)")
        _ = await dunstctl(["action", "0"])
        #expect(await lab.eventually(20) { (try? String(contentsOfFile: opened, encoding: .utf8)) == "https://example.org/dune#2" }, "\(logs())")
        #expect(await dunstctl(["history"]).contains("in the browser"))
        #expect(await lab.eventually(15) { alphaHost.logText.components(separatedBy: "the page was continued on beta").count == 2 }, "\(logs())")

        // (b) beta's browser runs the extension: its host is the handler and gets the page with its scroll position.
        let betaHost = try LabBrowserHost(lab: lab, daemon: "beta")
        defer { betaHost.stop() }
        #expect(await lab.eventually(10) {
            ((try? await lab.cli("baton", "beta", ["--json", "handled-types"]))?.1 ?? "").contains("org.baton.web-browsing")
        }, "\(logs())")
        let taken = Set(try await suggestionPaths(lab))
        try alphaHost.send(#"{"kind":"current","title":"Dune, chapter 3","url":"https://example.org/dune#3","scrollX":0,"scrollY":2400}"#)
        var offered: String?
        #expect(await lab.eventually(40) {
            offered = ((try? await suggestionPaths(lab)) ?? []).first { !taken.contains($0) }
            return offered != nil
        }, "\(logs())")
        let suggestion = try #require(offered)
        let (status, reply, error) = try await runTool("/usr/bin/dbus-send", ["--bus=\(lab.address)", "--print-reply", "--reply-timeout=60000",
                                                                             "--dest=org.baton.beta", suggestion, "org.baton.Suggestion1.Continue"])
        #expect(status == 0 && reply.contains("delivered"), "\(reply)\(error)\n\(logs())")
        #expect(await lab.eventually(10) { !betaHost.received.isEmpty }, "\(logs())")
        let open = try #require(betaHost.received.first)
        #expect(open["kind"] as? String == "open")
        #expect(open["url"] as? String == "https://example.org/dune#3")
        #expect(open["scrollX"] as? Double == 0)
        #expect(open["scrollY"] as? Double == 2400)
        #expect(await lab.eventually(15) { alphaHost.logText.components(separatedBy: "the page was continued on beta").count == 3 }, "\(logs())")
        // The browser that opened the first page is still the only one that did.
        #expect((try? String(contentsOfFile: opened, encoding: .utf8)) == "https://example.org/dune#2")
    }

    /// Every Suggestion1 object beta shows.
    func suggestionPaths(_ lab: DaemonPair) async throws -> [String] {
        let (_, out, _) = try await runTool("/usr/bin/dbus-send", ["--bus=\(lab.address)", "--print-reply", "--dest=org.baton.beta",
            "/org/baton", "org.freedesktop.DBus.ObjectManager.GetManagedObjects"])
        return out.components(separatedBy: "object path \"").dropFirst().compactMap { $0.split(separator: "\"").first.map(String.init) }
            .filter { $0.hasPrefix("/org/baton/suggestion/") }
    }
}
