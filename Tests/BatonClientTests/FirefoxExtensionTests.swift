// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import BatonTestBus
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

let firefoxPath = "/usr/bin/firefox-esr"

/// A headless Firefox ESR with the Baton extension installed from the tree: a fresh profile whose
/// user.js allows unsigned extensions (ESR honours it, release builds do not) and enables
/// extensions found in the profile's own `extensions` folder, where the test puts an .xpi zipped
/// from browser/extension and named by its gecko id. The native messaging manifest goes where
/// Firefox looks for a user's, `~/.mozilla/native-messaging-hosts/`, with HOME pointed into the test.
final class HeadlessFirefox: @unchecked Sendable {
    let home: URL
    let process = Process()
    let hostLog: URL

    /// `pages`: Firefox's command line after the profile, e.g. a URL, or `--private-window URL`.
    convenience init(daemon: DaemonFixture, pages: [String]) async throws {
        try await self.init(busAddress: daemon.bus.address, busName: daemon.busName, directory: daemon.bus.directory, pages: pages)
    }

    /// `preferences`: more `user.js` lines (e.g. a user agent the test pages recognise).
    init(busAddress: String, busName: String, directory: URL, pages: [String], preferences: [String] = []) async throws {
        home = directory.appendingPathComponent("firefox-\(UUID().uuidString)")
        hostLog = home.appendingPathComponent("host.log")
        let profile = home.appendingPathComponent("profile"), hosts = home.appendingPathComponent(".mozilla/native-messaging-hosts")
        for folder in [profile.appendingPathComponent("extensions"), hosts] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        let wrapper = home.appendingPathComponent("host.sh")
        try """
            #!/bin/sh
            export BATON_BUS='\(busAddress)' BATON_BUS_NAME='\(busName)'
            export XDG_CONFIG_HOME='\(try publisherConfig(in: directory, browser: true))'
            exec '\(try Built.executable("baton-browser-host"))' "$@" 2>>'\(hostLog.path)'
            """.write(to: wrapper, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: wrapper.path)
        let tree = Built.packageRoot.appendingPathComponent("browser")
        let manifest = try String(contentsOf: tree.appendingPathComponent("native-messaging/org.baton.browser_host.firefox.json"), encoding: .utf8)
        try manifest.replacingOccurrences(of: "/usr/bin/baton-browser-host", with: wrapper.path)
            .write(to: hosts.appendingPathComponent("org.baton.browser_host.json"), atomically: true, encoding: .utf8)

        let xpi = profile.appendingPathComponent("extensions/browser-host@baton.org.xpi")
        let zip = try await runTool("/usr/bin/python3", ["-c", """
            import os, sys, zipfile
            with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as archive:
                for name in sorted(os.listdir(sys.argv[1])):
                    archive.write(os.path.join(sys.argv[1], name), name)
            """, tree.appendingPathComponent("extension").path, xpi.path])
        guard zip.status == 0 else { throw FixtureError.timedOut("zipping the extension: \(zip.stderr)") }
        try """
            user_pref("xpinstall.signatures.required", false);
            user_pref("extensions.autoDisableScopes", 0);
            user_pref("extensions.enabledScopes", 15);
            user_pref("browser.shell.checkDefaultBrowser", false);
            user_pref("datareporting.policy.dataSubmissionEnabled", false);
            user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
            user_pref("browser.startup.homepage_override.mstone", "ignore");
            user_pref("app.update.enabled", false);

            """.appending(preferences.joined(separator: "\n")).write(to: profile.appendingPathComponent("user.js"), atomically: true, encoding: .utf8)

        // Started through python3 to clear the signal mask: Foundation's Process passes on the
        // spawning thread's, where SIGTERM is blocked, and Firefox (unlike Chromium) never
        // unblocks it, so it would not quit on SIGTERM.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
                             firefoxPath, "--headless", "--no-remote", "--profile", profile.path] + pages
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("XDG_") && $0.key != "DISPLAY" }
        environment["HOME"] = home.path
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try launch(process)
    }

    /// Firefox closing normally (SIGTERM, as a session logout does), waited for without holding a
    /// thread of the shared pool (it can take seconds).
    func quit() async {
        if process.isRunning { process.terminate() }
        _ = await waitForExit(process, timeout: .seconds(20))
    }

    /// For a test that ends early (a defer): SIGKILL, nothing to wait for.
    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }
}

extension RealBrowserTests {
    @Suite("The browser extension in a headless Firefox ESR", .serialized,
           .enabled(if: FileManager.default.isExecutableFile(atPath: firefoxPath), "needs Debian's firefox-esr (scripts/install-deps)"))
    struct FirefoxExtensionTests {
        @Test("the same extension source publishes Firefox's page with its title and URL; quitting Firefox ends it")
        func firefoxPublishesThePageAndQuittingEndsIt() async throws {
            try await withDaemon { daemon in
                let connection = try daemon.connect()
                defer { connection.close() }
                let server = try await PageServer(directory: daemon.bus.directory.appendingPathComponent("www"))
                let browser = try await HeadlessFirefox(daemon: daemon, pages: [server.base + "/one.html"])
                defer { browser.kill() }

                // Firefox starts slowly on a loaded machine (a fresh profile, the extension installed on first run).
                let path = try await awaitValue("Firefox's page current", timeout: .seconds(120)) {
                    guard let path = try await connection.currentActivityPath(),
                          try await connection.activity(at: path).title == "Page One" else { return nil as String? }
                    return path
                }
                let info = try await connection.activity(at: path)
                #expect(info.activityType == "org.baton.web-browsing")
                #expect(info.webpageURL == server.base + "/one.html")
                // The content script runs in Firefox too: the scroll position comes with the page.
                _ = try await awaitValue("scroll position") {
                    try await connection.activity(at: path).userInfo?["scrollY"] == .double(0) ? true : nil
                }
                #expect(try await connection.activities().count == 1)

                await browser.quit()
                #expect(!browser.process.isRunning)
                _ = try await awaitValue("activity ended with Firefox") { try await connection.activities().isEmpty ? true : nil }
            }
        }

        @Test("a private window publishes nothing, though the extension runs in that Firefox")
        func privateWindowPublishesNothing() async throws {
            try await withDaemon { daemon in
                let connection = try daemon.connect()
                defer { connection.close() }
                let server = try await PageServer(directory: daemon.bus.directory.appendingPathComponent("www"))
                // A normal window too: Firefox starts no extension for a session of private windows only.
                // The private one opens last and keeps the focus.
                let browser = try await HeadlessFirefox(daemon: daemon, pages: [server.base + "/one.html", "--private-window", server.base + "/two.html"])
                defer { browser.kill() }

                // Control: the extension runs and has started its host (which registered as handler)...
                _ = try await awaitValue("the extension's host registered", timeout: .seconds(120)) {
                    try await connection.handledTypes().contains("org.baton.web-browsing") ? true : nil
                }
                // ...and the private window did load its page.
                _ = try await awaitValue("the private page loaded", timeout: .seconds(120)) { server.wasRequested("/two.html") ? true : nil }
                // Watched for a while: the extension may not run in private windows and never reports one.
                let deadline = ContinuousClock.now + .seconds(4)
                var seen: [String] = []
                while ContinuousClock.now < deadline {
                    seen += try await connection.activities().map { "\($0.title ?? "") \($0.webpageURL ?? "")" }
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(seen.allSatisfy { !$0.contains("Page Two") && !$0.contains("/two.html") }, "published: \(Set(seen))")
            }
        }
    }
}
