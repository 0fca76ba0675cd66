// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import BatonTestBus
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

let chromiumPath = "/usr/bin/chromium"

/// A headless Debian Chromium with the Baton extension unpacked from browser/extension and the
/// native messaging manifest in its profile, pointing at the built host on the fixture's bus.
final class HeadlessChromium: @unchecked Sendable {
    let profile: URL
    let process = Process()
    /// What the host wrote to stderr (the browser would forward it to its own log).
    let hostLog: URL

    convenience init(daemon: DaemonFixture, incognito: Bool, firstPages: [String]) throws {
        try self.init(busAddress: daemon.bus.address, busName: daemon.busName, directory: daemon.bus.directory,
                      incognito: incognito, firstPages: firstPages)
    }

    /// `extraArguments` go to Chromium (e.g. a user agent the test pages recognise).
    init(busAddress: String, busName: String, directory: URL, incognito: Bool = false, firstPages: [String],
         extraArguments: [String] = []) throws {
        profile = directory.appendingPathComponent("chromium-\(UUID().uuidString)")
        hostLog = profile.appendingPathComponent("host.log")
        let hosts = profile.appendingPathComponent("NativeMessagingHosts")
        try FileManager.default.createDirectory(at: hosts, withIntermediateDirectories: true)
        // Browsers pass no environment of ours: a wrapper names the fixture's bus.
        let wrapper = profile.appendingPathComponent("host.sh")
        try """
            #!/bin/sh
            export BATON_BUS='\(busAddress)' BATON_BUS_NAME='\(busName)'
            export XDG_CONFIG_HOME='\(try publisherConfig(in: directory, browser: true))'
            exec '\(try Built.executable("baton-browser-host"))' "$@" 2>>'\(hostLog.path)'
            """.write(to: wrapper, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: wrapper.path)
        let tree = Built.packageRoot.appendingPathComponent("browser")
        let manifest = try String(contentsOf: tree.appendingPathComponent("native-messaging/org.baton.browser_host.chromium.json"), encoding: .utf8)
        try manifest.replacingOccurrences(of: "/usr/bin/baton-browser-host", with: wrapper.path)
            .write(to: hosts.appendingPathComponent("org.baton.browser_host.json"), atomically: true, encoding: .utf8)

        process.executableURL = URL(fileURLWithPath: chromiumPath)
        process.arguments = ["--headless=new", "--no-sandbox", "--no-first-run", "--user-data-dir=\(profile.path)",
                             "--disable-features=DisableLoadExtensionCommandLineSwitch",
                             "--load-extension=\(tree.appendingPathComponent("extension").path)", "--remote-debugging-port=0"]
            + extraArguments + (incognito ? ["--incognito"] : []) + firstPages
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try launch(process)
    }

    var hostLogText: String { (try? String(contentsOf: hostLog, encoding: .utf8)) ?? "" }

    /// The DevTools HTTP endpoint (Chromium writes its port into the profile). Chromium's start is
    /// not what is tested: beside two busy builds it took over 45 s, so it gets 3 minutes.
    func devTools() async throws -> String {
        let file = profile.appendingPathComponent("DevToolsActivePort")
        let port = try await awaitValue("DevTools port", timeout: .seconds(180)) {
            (try? String(contentsOf: file, encoding: .utf8))?.split(separator: "\n").first.map(String.init)
        }
        return "http://127.0.0.1:\(port)"
    }

    /// Opens `url` in a new tab (which becomes the active one); returns the tab's DevTools id.
    func open(_ url: String) async throws -> String {
        let data = try await devToolsRequest("PUT", "/json/new?" + url)
        let target = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try #require(target["id"] as? String)
    }

    func activate(_ id: String) async throws {
        _ = try await devToolsRequest("GET", "/json/activate/" + id)
    }

    /// One DevTools HTTP call, through Python's urllib (python3 is a test dependency already).
    func devToolsRequest(_ method: String, _ path: String) async throws -> Data {
        let script = "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(urllib.request.Request(sys.argv[1], method=sys.argv[2])).read().decode())"
        let result = try await runTool("/usr/bin/python3", ["-c", script, try await devTools() + path, method])
        guard result.status == 0 else { throw FixtureError.timedOut("DevTools \(method) \(path): \(result.stderr)") }
        return Data(result.stdout.utf8)
    }

    /// The browser closing normally (SIGTERM, as a session logout does), waited for without holding a
    /// thread of the shared pool (it can take seconds).
    func quit() async {
        if process.isRunning { process.terminate() }
        _ = await waitForExit(process, timeout: .seconds(10))
    }

    /// For a test that ends early (a defer): SIGKILL, nothing to wait for.
    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }
}

/// A local web server with two titled pages, and a long one that scrolls itself down to
/// `PageServer.scrolledY` in a browser whose user agent contains `PageServer.scrollingAgent` (the
/// user reading on alpha; the same page elsewhere stays at the top unless someone scrolls it).
final class PageServer: @unchecked Sendable {
    static let scrollingAgent = "BatonTestReader"
    static let scrolledY = 1234
    let process = Process()
    let base: String
    /// The server's request log (one line per request, on its stderr).
    let requestLog: URL

    init(directory: URL) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, title) in [("one", "Page One"), ("two", "Page Two")] {
            try "<html><head><title>\(title)</title></head><body style=\"height:4000px\">\(name)</body></html>"
                .write(to: directory.appendingPathComponent("\(name).html"), atomically: true, encoding: .utf8)
        }
        try """
            <html><head><title>Long Read</title><script>
            addEventListener("load", () => { if (navigator.userAgent.includes("\(Self.scrollingAgent)")) scrollTo(0, \(Self.scrolledY)) })
            </script></head><body style="height:6000px">long</body></html>
            """.write(to: directory.appendingPathComponent("long.html"), atomically: true, encoding: .utf8)
        let portFile = directory.appendingPathComponent("port")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        // Byte ranges too (a browser seeks in a media file only where the server serves them).
        process.arguments = ["-c", """
            import functools, http.server, io, os, re, sys
            class Handler(http.server.SimpleHTTPRequestHandler):
                def send_head(self):
                    wanted = re.fullmatch(r"bytes=(\\d+)-(\\d*)", self.headers.get("Range", ""))
                    path = self.translate_path(self.path)
                    if not wanted or not os.path.isfile(path):
                        return super().send_head()
                    size = os.path.getsize(path)
                    start, end = int(wanted[1]), min(int(wanted[2] or size - 1), size - 1)
                    if start >= size:
                        self.send_error(416)
                        return None
                    with open(path, "rb") as file:
                        file.seek(start)
                        body = file.read(end - start + 1)
                    self.send_response(206)
                    self.send_header("Content-Type", self.guess_type(path))
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Accept-Ranges", "bytes")
                    self.end_headers()
                    return io.BytesIO(body)
            handler = functools.partial(Handler, directory=sys.argv[1])
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            open(sys.argv[2], "w").write(str(server.server_address[1]))
            server.serve_forever()
            """, directory.path, portFile.path]
        requestLog = directory.appendingPathComponent("requests.log")
        _ = FileManager.default.createFile(atPath: requestLog.path, contents: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: requestLog)
        try launch(process)
        // The file exists a moment before the port is in it: only a whole number counts.
        let port = try await awaitValue("web server") { (try? String(contentsOf: portFile, encoding: .utf8)).flatMap { Int($0) } }
        base = "http://127.0.0.1:\(port)"
    }

    /// Whether a browser asked for `path` (e.g. "/two.html").
    func wasRequested(_ path: String) -> Bool {
        ((try? String(contentsOf: requestLog, encoding: .utf8)) ?? "").contains("\"GET \(path) ")
    }

    // SIGKILL: python3 started by Foundation's Process inherits a mask with SIGTERM blocked.
    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

extension RealBrowserTests {
    @Suite("The browser extension in a headless Chromium", .serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: chromiumPath)))
    struct ChromiumExtensionTests {
        @Test("opening a page publishes it, switching tabs updates it, closing the browser ends it")
        func pagesFollowTheActiveTab() async throws {
            try await withDaemon { daemon in
                let connection = try daemon.connect()
                defer { connection.close() }
                let server = try await PageServer(directory: daemon.bus.directory.appendingPathComponent("www"))
                let browser = try HeadlessChromium(daemon: daemon, incognito: false, firstPages: ["about:blank"])
                defer { browser.kill() }

                let first = try await browser.open(server.base + "/one.html")
                // Headless focus is loose (see the incognito control below): the tab is activated
                // again every few seconds until it is current. The failure says what was last seen.
                var activated = ContinuousClock.now
                var lastSeen = "no current activity"
                let path: String
                do {
                    path = try await awaitValue("page one current") {
                        if ContinuousClock.now - activated > .seconds(5) {
                            try await browser.activate(first)
                            activated = ContinuousClock.now
                        }
                        // The title may come first and the scroll with the content script's next report.
                        guard let path = try await connection.currentActivityPath() else { return nil as String? }
                        let info = try await connection.activity(at: path)
                        lastSeen = "title \(info.title ?? "nil"), userInfo \(String(describing: info.userInfo))"
                        return info.title == "Page One" && info.userInfo?["scrollY"] != nil ? path : nil
                    }
                } catch {
                    Issue.record("last seen: \(lastSeen); page one requested: \(server.wasRequested("/one.html"))")
                    throw error
                }
                var info = try await connection.activity(at: path)
                #expect(info.activityType == "org.baton.web-browsing")
                #expect(info.webpageURL == server.base + "/one.html")
                #expect(info.userInfo?["scrollY"] == .double(0))

                _ = try await browser.open(server.base + "/two.html")
                info = try await awaitValue("page two current") {
                    let info = try await connection.activity(at: path)
                    return info.title == "Page Two" ? info : nil
                }
                #expect(info.webpageURL == server.base + "/two.html")

                try await browser.activate(first)
                _ = try await awaitValue("back to page one") { try await connection.activity(at: path).title == "Page One" ? true : nil }
                #expect(try await connection.activities().count == 1)

                await browser.quit()
                _ = try await awaitValue("activity ended with the browser") { try await connection.activities().isEmpty ? true : nil }
            }
        }

        @Test("an incognito window publishes nothing")
        func incognitoPublishesNothing() async throws {
            try await withDaemon { daemon in
                let connection = try daemon.connect()
                defer { connection.close() }
                let server = try await PageServer(directory: daemon.bus.directory.appendingPathComponent("www"))
                let browser = try HeadlessChromium(daemon: daemon, incognito: true, firstPages: [server.base + "/one.html"])
                defer { browser.kill() }
                // The command-line page opens in the incognito window (headless takes one); give the extension time to (wrongly) report it.
                try await Task.sleep(for: .seconds(4))
                let published = try await connection.activities()
                #expect(published.isEmpty, "published: \(published.map { "\($0.title ?? "") \($0.webpageURL ?? "")" })")

                // Control: DevTools opens tabs in the normal profile, and those do publish, so the
                // extension and its host were working in this browser all along.
                let two = try await browser.open(server.base + "/two.html")
                // Headless focus is loose: which window is "focused" after a DevTools open depends on
                // timing, so the control activates its tab again every few seconds until it publishes.
                var activated = ContinuousClock.now
                do {
                    _ = try await awaitValue("normal window publishes") {
                        if ContinuousClock.now - activated > .seconds(3) {
                            try await browser.activate(two)
                            activated = ContinuousClock.now
                        }
                        return try await connection.activities().first { $0.title == "Page Two" }
                    }
                } catch {
                    // Seen once in a loaded host run: what the host and the browser's tabs were then.
                    let tabs = (try? await browser.devToolsRequest("GET", "/json/list")).map { String(decoding: $0, as: UTF8.self) } ?? "(no answer)"
                    Issue.record("\(error)\nhost log:\n\(browser.hostLogText)\ntabs:\n\(tabs)")
                }
            }
        }
    }
}
