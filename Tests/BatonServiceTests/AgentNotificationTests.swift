// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// A minimal org.freedesktop.Notifications server for tests, in python3-dbus (a separate process,
/// so its signals come from the name's real owner as a desktop's would). It records Notify and
/// CloseNotification, and its test-only method Invoke(id, key) emits ActionInvoked then
/// NotificationClosed(id, 2), as dunst does when the user clicks.
let testNotificationServerScript = """
import dbus, dbus.service, dbus.mainloop.glib, json, signal, sys
from gi.repository import GLib
# The test process spawns us from a thread that blocks signals; take SIGTERM back.
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
IFACE = 'org.freedesktop.Notifications'
class TestNotificationServer(dbus.service.Object):
    def __init__(self):
        super().__init__(bus, '/org/freedesktop/Notifications')
        self.calls, self.next_id = [], 1
    @dbus.service.method(IFACE, in_signature='', out_signature='as')
    def GetCapabilities(self):
        return sys.argv[2].split(',') if sys.argv[2] else []
    @dbus.service.method(IFACE, in_signature='', out_signature='ssss')
    def GetServerInformation(self):
        return ('baton-test-notification-server', 'baton', '0', '1.2')
    @dbus.service.method(IFACE, in_signature='susssasa{sv}i', out_signature='u')
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
        nid = int(replaces) or self.next_id
        if not replaces: self.next_id += 1
        self.calls.append({'call': 'Notify', 'id': nid, 'replaces': int(replaces), 'app': str(app), 'summary': str(summary),
                           'body': str(body), 'actions': [str(a) for a in actions],
                           'hints': {str(k): str(v) for k, v in hints.items()}})
        return nid
    @dbus.service.method(IFACE, in_signature='u', out_signature='')
    def CloseNotification(self, nid):
        self.calls.append({'call': 'CloseNotification', 'id': int(nid)})
        self.NotificationClosed(nid, 3)
    @dbus.service.signal(IFACE, signature='us')
    def ActionInvoked(self, nid, key): pass
    @dbus.service.signal(IFACE, signature='uu')
    def NotificationClosed(self, nid, reason): pass
    @dbus.service.method('org.baton.test.NotificationServer', in_signature='us', out_signature='')
    def Invoke(self, nid, key):
        self.ActionInvoked(nid, key)
        self.NotificationClosed(nid, 2)
    @dbus.service.method('org.baton.test.NotificationServer', in_signature='', out_signature='s')
    def Calls(self):
        return json.dumps(self.calls)
server = TestNotificationServer()
name = dbus.service.BusName(IFACE, bus)
loop = GLib.MainLoop()
bus.call_on_disconnection(lambda connection: loop.quit())
loop.run()
"""

/// The test notification server process on `bus`.
final class TestNotificationServer: @unchecked Sendable {
    private let process = Process()
    let connection: DBusConnection

    init(bus: TestBus, capabilities: [String] = ["actions", "body"]) async throws {
        let script = bus.directory.appendingPathComponent("test-notification-server.py")
        try testNotificationServerScript.write(to: script, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script.path, bus.address, capabilities.joined(separator: ",")]
        try launch(process)
        connection = try DBusConnection(bus: .address(bus.address))
        let owned = await eventually(timeout: .seconds(10)) { [connection] in
            (try? await connection.nameHasOwner(NotificationServerClient.busName)) == true
        }
        #expect(owned, "the test notification server did not start")
    }

    struct Call: Sendable {
        var name: String
        var id: UInt32
        var replaces: UInt32
        var summary: String
        var body: String
        var actions: [String]
        var hints: [String: String]
    }

    func calls() async throws -> [Call] {
        let reply = try await connection.call(destination: NotificationServerClient.busName, path: NotificationServerClient.path,
                                              interface: "org.baton.test.NotificationServer", method: "Calls")
        let json = try #require(reply.first?.stringValue)
        let list = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
        return list.map {
            Call(name: $0["call"] as? String ?? "", id: UInt32($0["id"] as? Int ?? 0), replaces: UInt32($0["replaces"] as? Int ?? 0),
                 summary: $0["summary"] as? String ?? "", body: $0["body"] as? String ?? "", actions: $0["actions"] as? [String] ?? [],
                 hints: $0["hints"] as? [String: String] ?? [:])
        }
    }

    /// What a user's click does: the server emits ActionInvoked (and then NotificationClosed).
    func invoke(id: UInt32, key: String) async throws {
        _ = try await connection.call(destination: NotificationServerClient.busName, path: NotificationServerClient.path,
                                      interface: "org.baton.test.NotificationServer", method: "Invoke", arguments: [.uint32(id), .string(key)])
    }

    func stop() {
        connection.close()
        // Not waitUntilExit: it can block forever inside an async test; the bus going away ends it too.
        process.terminate()
    }
}

/// Debian's dunst drawing on a private Xvfb display, serving org.freedesktop.Notifications on `bus`.
final class DunstUnderXvfb: @unchecked Sendable {
    private let xvfb = Process()
    private let dunst = Process()
    let environment: [String: String]

    static var available: Bool {
        ["/usr/bin/dunst", "/usr/bin/dunstctl", "/usr/bin/Xvfb"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    init(bus: TestBus) async throws {
        let display = ":\(Int.random(in: 300...9000))"
        xvfb.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        xvfb.arguments = [display, "-screen", "0", "800x600x24", "-nolisten", "tcp"]
        xvfb.standardError = FileHandle.nullDevice
        try launch(xvfb)
        let socket = "/tmp/.X11-unix/X" + display.dropFirst()
        #expect(await eventually(timeout: .seconds(10)) { FileManager.default.fileExists(atPath: socket) }, "Xvfb did not start")
        let configuration = bus.directory.appendingPathComponent("dunstrc")
        try "[global]\n    font = Monospace 8\n".write(to: configuration, atomically: true, encoding: .utf8)
        environment = ["DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": bus.address, "HOME": bus.directory.path, "PATH": "/usr/bin:/bin"]
        dunst.executableURL = URL(fileURLWithPath: "/usr/bin/dunst")
        dunst.arguments = ["-conf", configuration.path]
        dunst.environment = environment
        dunst.standardError = FileHandle.nullDevice
        dunst.standardOutput = FileHandle.nullDevice
        try launch(dunst)
        let connection = try DBusConnection(bus: .address(bus.address))
        defer { connection.close() }
        #expect(await eventually(timeout: .seconds(10)) { (try? await connection.nameHasOwner(NotificationServerClient.busName)) == true },
                "dunst did not take org.freedesktop.Notifications")
    }

    /// dunstctl, as a user at the desktop would run it.
    func control(_ arguments: [String]) async throws -> String {
        let result = try await runProgram("/usr/bin/dunstctl", arguments, environment: environment)
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stop() {
        // Both may have inherited blocked signals from the test's thread: SIGKILL is never blocked.
        kill(dunst.processIdentifier, SIGKILL)
        kill(xvfb.processIdentifier, SIGKILL)
    }
}

final class CollectingAgentLog: AgentLog {
    private let stored = Mutex<[String]>([])
    func log(_ line: String) { stored.withLock { $0.append(line) } }
    var lines: [String] { stored.withLock { $0 } }
}

/// Alpha publishes, beta's daemon makes a real Suggestion1, beta's agent shows it.
private struct AgentScene {
    let bus: TestBus
    let a: HandoffNode
    let b: HandoffNode
    let client: DBusConnection
    let server: TestNotificationServer?
    let dunst: DunstUnderXvfb?
    let agent: SuggestionAgent
    let log: CollectingAgentLog

    /// With `dunst`, Debian's dunst under Xvfb is the notification server instead of the test one.
    static func start(capabilities: [String] = ["actions", "body"], dunst useDunst: Bool = false,
                      betaContinuation: ContinuationService.Configuration = .init()) async throws -> AgentScene {
        let bus = try TestBus()
        let a = try await HandoffNode.start(bus, name: "alpha"), b = try await HandoffNode.start(bus, name: "beta", continuation: betaContinuation)
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a.node, b.node, client: client)
        let dunst = useDunst ? try await DunstUnderXvfb(bus: bus) : nil
        let server = useDunst ? nil : try await TestNotificationServer(bus: bus, capabilities: capabilities)
        let log = CollectingAgentLog()
        // One bus plays both roles here: batond's (system) bus and the user's session bus.
        let daemon = BatonConnection(connection: try DBusConnection(bus: .address(bus.address)), busName: b.node.busName)
        let agent = SuggestionAgent(daemon: daemon, session: try DBusConnection(bus: .address(bus.address)), logger: log)
        try await agent.start()
        return AgentScene(bus: bus, a: a, b: b, client: client, server: server, dunst: dunst, agent: agent, log: log)
    }

    /// Publishes on alpha and plays its advert to beta.
    func publishAndHear(_ source: FakeSourceApp) async throws {
        let before = a.radio.lastAdvert
        try await source.publish(on: a.node)
        #expect(await eventually(timeout: .seconds(15)) { a.radio.lastAdvert != before })
        b.radio.hear(try #require(a.radio.lastAdvert))
    }

    /// Publishes and returns the Notify the test server got.
    func publishAndAwaitNotification(_ source: FakeSourceApp) async throws -> TestNotificationServer.Call {
        let server = try #require(server)
        try await publishAndHear(source)
        #expect(try await eventually(timeout: .seconds(15)) { try await server.calls().contains { $0.name == "Notify" } }, "\(log.lines)")
        return try #require(try await server.calls().first { $0.name == "Notify" })
    }

    func stop() async {
        await agent.stop()
        server?.stop()
        dunst?.stop()
        await a.node.stop()
        await b.node.stop()
        bus.stop()
    }
}

@Suite("BatonServiceTests: baton-agent shows the daemon's suggestions as desktop notifications", .serialized)
struct AgentNotificationTests {
    @Test func clickingTheNotificationContinuesTheActivityAndClosesIt() async throws {
        let scene = try await AgentScene.start()
        let (handlerApp, handler) = try await registerHandler(on: scene.b.node, bus: scene.bus)
        defer { handlerApp.close() }
        let source = try FakeSourceApp(bus: scene.bus)
        let notify = try await scene.publishAndAwaitNotification(source)
        #expect(notify.summary == "Continue ‘Reader reading’ from alpha")
        #expect(notify.actions == ["default", "Continue", "continue", "Continue"])
        #expect(notify.hints["desktop-entry"] == "baton-agent")
        #expect(notify.replaces == 0)
        #expect(await scene.agent.notificationID(forDevice: (await scene.a.node.deviceID).shortForm) == notify.id)

        // The user clicks: the server emits ActionInvoked; the agent continues through the daemon.
        try await #require(scene.server).invoke(id: notify.id, key: "default")
        #expect(await eventually(timeout: .seconds(15)) { handler.members == ["WillContinue", "Continue"] }, "\(scene.log.lines)")
        #expect(handler.calls.last?.argument(1) == .string("Chapter 3"))
        #expect(await eventually(timeout: .seconds(15)) { source.wasContinued == ["beta"] })
        #expect(try await eventually(timeout: .seconds(10)) {
            try await #require(scene.server).calls().contains { $0.name == "CloseNotification" && $0.id == notify.id }
        })
        #expect(try await #require(scene.server).calls().filter { $0.name == "Notify" }.count == 1)
        source.connection.close()
        await scene.stop()
    }

    @Test func theSuggestionGoingClosesTheNotification() async throws {
        let scene = try await AgentScene.start(capabilities: ["body"])
        let (handlerApp, _) = try await registerHandler(on: scene.b.node, bus: scene.bus)
        defer { handlerApp.close() }
        let source = try FakeSourceApp(bus: scene.bus)
        let notify = try await scene.publishAndAwaitNotification(source)
        // This server has no actions: the body says the command instead.
        #expect(notify.actions.isEmpty)
        let path = try #require(try await suggestions(on: scene.b.node, client: scene.client).keys.first)
        #expect(notify.body.contains("baton continue \(path)"))

        // Alpha's app quits: alpha goes back to presence, beta hears it, the suggestion goes.
        source.connection.close()
        #expect(await eventually(timeout: .seconds(15)) { await scene.a.node.ring.radio.currentPublication() == nil })
        try await Task.sleep(for: .milliseconds(100))
        scene.b.radio.hear(try #require(scene.a.radio.lastAdvert))
        #expect(try await eventually(timeout: .seconds(15)) {
            try await #require(scene.server).calls().contains { $0.name == "CloseNotification" && $0.id == notify.id }
        }, "\(scene.log.lines)")
        await scene.stop()
    }

    @Test(.enabled(if: DunstUnderXvfb.available))
    func dunstShowsTheSuggestionAndItsActionContinues() async throws {
        let scene = try await AgentScene.start(dunst: true)
        let dunst = try #require(scene.dunst)
        let (handlerApp, handler) = try await registerHandler(on: scene.b.node, bus: scene.bus)
        defer { handlerApp.close() }
        let source = try FakeSourceApp(bus: scene.bus)
        try await scene.publishAndHear(source)
        let device = (await scene.a.node.deviceID).shortForm
        #expect(await eventually(timeout: .seconds(15)) { await scene.agent.notificationID(forDevice: device) != nil }, "\(scene.log.lines)")
        // Read back from dunst itself: it is on screen.
        #expect(try await eventually(timeout: .seconds(10)) { try await dunst.control(["count", "displayed"]) == "1" })

        // dunstctl action: dunst invokes the "default" action and sends ActionInvoked to the agent.
        _ = try await dunst.control(["action", "0"])
        #expect(await eventually(timeout: .seconds(15)) { handler.members == ["WillContinue", "Continue"] }, "\(scene.log.lines)")
        #expect(await eventually(timeout: .seconds(15)) { source.wasContinued == ["beta"] })
        #expect(try await eventually(timeout: .seconds(10)) { try await dunst.control(["count", "displayed"]) == "0" })
        source.connection.close()
        await scene.stop()
    }

    /// Issue 13 through the client library: a handler that accepts versions 2-3 only is asked
    /// WillContinue, then hears FailedToContinue "versionUnsupported" for alpha's version 0; it is
    /// never given the activity and the source is not told it was continued.
    @Test func aVersionTheHandlerDidNotDeclareIsRefusedWithItsCategory() async throws {
        let scene = try await AgentScene.start()
        let app = BatonConnection(connection: try DBusConnection(bus: .address(scene.bus.address)), busName: scene.b.node.busName)
        defer { app.close() }
        let heard = Mutex<[String]>([])
        let failures = Mutex<[BatonClientError]>([])
        _ = try await app.registerHandler(for: ["org.example.Reader.reading"], versions: try ActivityVersions(pairs: [(2, 3)]),
                                          willContinue: { _, _ in heard.withLock { $0.append("WillContinue") }; return true },
                                          continue: { _ in heard.withLock { $0.append("Continue") } },
                                          didFailToContinue: { _, error in
                                              heard.withLock { $0.append("FailedToContinue") }
                                              failures.withLock { $0.append(error) }
                                          })
        let source = try FakeSourceApp(bus: scene.bus)
        let notify = try await scene.publishAndAwaitNotification(source)
        try await #require(scene.server).invoke(id: notify.id, key: "default")
        #expect(await eventually(timeout: .seconds(15)) { heard.withLock { $0 } == ["WillContinue", "FailedToContinue"] }, "\(scene.log.lines)")
        let failure = try #require(failures.withLock { $0.first })
        #expect(failure.continuationFailure == .versionUnsupported, "\(failure)")
        #expect(failure.message.hasPrefix("versionUnsupported: "))
        #expect(await eventually(timeout: .seconds(10)) { scene.log.lines.contains { $0.contains("versionUnsupported") } },
                "the agent's Continue reports the category: \(scene.log.lines)")
        // Issue 26: the person who clicked is told why, in a notification of its own.
        #expect(try await eventually(timeout: .seconds(15)) {
            try await #require(scene.server).calls().contains { $0.name == "Notify" && $0.summary == "Could not continue here" }
        }, "\(scene.log.lines)")
        let server = try #require(scene.server)
        let notice = try #require(try await server.calls().first { $0.name == "Notify" && $0.summary == "Could not continue here" })
        #expect(notice.body.contains("cannot read the version") && !notice.body.contains("org.baton"), "\(notice.body)")
        #expect(notice.hints["desktop-entry"] == "baton-agent" && notice.actions.isEmpty)
        try await Task.sleep(for: .milliseconds(300))
        #expect(source.wasContinued.isEmpty)
        // Refused by alpha from the versions beta's fetch named, before its app was asked to save.
        #expect(source.willSaveCount == 0, "the source's app got WillSave for a version nobody here accepts")
        #expect(heard.withLock { $0 } == ["WillContinue", "FailedToContinue"])
        source.connection.close()
        await scene.stop()
    }

    /// Suggestion1.Title arrives once beta fetched the activity ahead: the agent replaces its
    /// notification in place with the activity's own title.
    @Test func theTitleFetchedAheadReplacesTheNotificationInPlace() async throws {
        let scene = try await AgentScene.start(betaContinuation: .init(prefetchAfter: .milliseconds(200)))
        let (handlerApp, _) = try await registerHandler(on: scene.b.node, bus: scene.bus)
        defer { handlerApp.close() }
        let source = try FakeSourceApp(bus: scene.bus)
        let first = try await scene.publishAndAwaitNotification(source)
        #expect(first.summary == "Continue ‘Reader reading’ from alpha")
        let server = try #require(scene.server)
        #expect(try await eventually(timeout: .seconds(15)) { try await server.calls().filter { $0.name == "Notify" }.count == 2 }, "\(scene.log.lines)")
        let second = try #require(try await server.calls().last { $0.name == "Notify" })
        // The source app's WillSave ran for the prefetch: its saved title is the one shown.
        #expect(second.summary == "Continue ‘Chapter 3’ from alpha")
        #expect(second.replaces == first.id)
        let path = try #require(try await suggestions(on: scene.b.node, client: scene.client).keys.first)
        let title = try await scene.client.call(destination: scene.b.node.busName, path: path, interface: "org.freedesktop.DBus.Properties",
                                                method: "Get", arguments: [.string("org.baton.Suggestion1"), .string("Title")])
        #expect(title.first?.variantValue == .string("Chapter 3"))
        // An account that is not a ring user (nobody: not root, not in group baton) reads no title,
        // by Get, GetAll or GetManagedObjects; the change was signalled without the value.
        let foreign = try await runAsNobody(script: Self.suggestionTitleReader, in: scene.bus.directory,
                                            arguments: [scene.bus.address, scene.b.node.busName, path])
        #expect(foreign["title"] == "" && foreign["getall"] == "" && foreign["managed"] == "", "\(foreign)")
        source.connection.close()
        await scene.stop()
    }

    static let suggestionTitleReader = #"""
    import sys
    import dbus
    address, name, path = sys.argv[1], sys.argv[2], sys.argv[3]
    bus = dbus.bus.BusConnection(address)
    def step(label, call):
        try:
            print("%s=%s" % (label, call()), flush=True)
        except dbus.exceptions.DBusException as error:
            print("%s=%s" % (label, error.get_dbus_name()), flush=True)
    properties = "org.freedesktop.DBus.Properties"
    step("title", lambda: bus.call_blocking(name, path, properties, "Get", "ss", ["org.baton.Suggestion1", "Title"]))
    step("getall", lambda: bus.call_blocking(name, path, properties, "GetAll", "s", ["org.baton.Suggestion1"])["Title"])
    step("managed", lambda: bus.call_blocking(name, "/org/baton", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", "", [])[path]["org.baton.Suggestion1"]["Title"])
    """#
}
