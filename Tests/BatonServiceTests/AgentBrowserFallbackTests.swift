// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonDBus
import BatonTestBus
import Foundation
import Testing
@testable import BatonService

/// Issue 13, "Open in browser" through the real baton-agent: beta has no app for alpha's type,
/// only the activity's https URL can serve. The agent (a separate process, GIO as in a session)
/// shows "Open in browser"; the click opens the URL with the session's default https handler (a
/// test handler chosen in mimeapps.list, as a desktop's browser is) and alpha hears WasContinued.
@Suite("BatonServiceTests: the browser fallback through baton-agent", .serialized)
struct AgentBrowserFallbackTests {
    @Test func anUnhandledTypeWithAURLOpensInTheDefaultBrowserAndTheSourceHearsWasContinued() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await HandoffNode.start(bus, name: "alpha"), b = try await HandoffNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        try await pair(a.node, b.node, client: client)
        let server = try await TestNotificationServer(bus: bus)
        defer { server.stop() }

        // The session's default https handler: a test "browser" that writes down what it opens.
        let data = bus.directory.appendingPathComponent("session-data")
        let config = bus.directory.appendingPathComponent("session-config")
        let applications = data.appendingPathComponent("applications")
        for directory in [applications, config] { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
        let opened = bus.directory.appendingPathComponent("opened-url").path
        let browser = bus.directory.appendingPathComponent("test-browser.sh")
        try "#!/bin/sh\nprintf '%s' \"$1\" > \(opened)\n".write(to: browser, atomically: true, encoding: .utf8)
        chmod(browser.path, 0o755)
        try """
            [Desktop Entry]
            Type=Application
            Name=Test Browser
            Exec=\(browser.path) %u
            MimeType=x-scheme-handler/http;x-scheme-handler/https;
            NoDisplay=true
            """.write(to: applications.appendingPathComponent("org.example.TestBrowser.desktop"), atomically: true, encoding: .utf8)
        try "[Default Applications]\nx-scheme-handler/https=org.example.TestBrowser.desktop\nx-scheme-handler/http=org.example.TestBrowser.desktop\n"
            .write(to: config.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8)
        let agent = try SessionAgentProcess(busAddress: bus.address, daemonBusName: b.node.busName, dataDirectory: data.path,
                                            configDirectory: config.path)
        defer { agent.stop() }
        #expect(await eventually(timeout: .seconds(15)) { await b.node.handlers.hasAgent(uid: getuid()) })

        let source = try FakeSourceApp(bus: bus)
        defer { source.connection.close() }
        let before = a.radio.lastAdvert
        try await source.publish(on: a.node)
        #expect(await eventually(timeout: .seconds(15)) { a.radio.lastAdvert != before })
        b.radio.hear(try #require(a.radio.lastAdvert))
        #expect(try await eventually(timeout: .seconds(15)) { try await server.calls().contains { $0.name == "Notify" } })
        let notify = try #require(try await server.calls().first { $0.name == "Notify" })
        #expect(notify.summary == "Open ‘a web page’ from alpha in the browser")
        #expect(notify.actions.contains("browser"))

        try await server.invoke(id: notify.id, key: "default")
        #expect(await eventually(timeout: .seconds(15)) { (try? String(contentsOfFile: opened, encoding: .utf8)) == "https://example.org/book#2" })
        #expect(await eventually(timeout: .seconds(15)) { source.wasContinued == ["beta"] })
        #expect(try await eventually(timeout: .seconds(10)) { try await server.calls().contains { $0.name == "CloseNotification" && $0.id == notify.id } })
        await a.node.stop()
        await b.node.stop()
    }
}
