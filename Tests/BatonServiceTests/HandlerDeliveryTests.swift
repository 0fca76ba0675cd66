// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// Records calls made to an exported test handler.
final class CallRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [DBusMethodCall] = []
    func append(_ call: DBusMethodCall) { lock.withLock { recorded.append(call) } }
    var calls: [DBusMethodCall] { lock.withLock { recorded } }
    var members: [String] { calls.map(\.member) }
}

/// A tiny python3-dbus application: on start it registers an ActivityHandler1 for its type on the
/// session bus (the daemon passes its bus as DBUS_SESSION_BUS_ADDRESS), then logs every call.
let pythonHandlerScript = #"""
import os
import sys
import dbus
import dbus.service
import dbus.mainloop.glib
from gi.repository import GLib

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
log_path, activity_type = sys.argv[1], sys.argv[2]
# Started by D-Bus activation, the bus to use is in DBUS_STARTER_ADDRESS.
starter = os.environ.get("DBUS_STARTER_ADDRESS")
bus = dbus.bus.BusConnection(starter) if starter else dbus.SessionBus()
loop = GLib.MainLoop()

def log(*words):
    with open(log_path, "a") as f:
        f.write(" ".join(str(w) for w in words) + "\n")

class Handler(dbus.service.Object):
    @dbus.service.method("org.baton.ActivityHandler1", in_signature="ss", out_signature="b")
    def WillContinue(self, activity_type, device):
        log("WillContinue", activity_type, device)
        return True

    @dbus.service.method("org.baton.ActivityHandler1", in_signature="ssa{sv}a{sv}", out_signature="")
    def Continue(self, activity_type, title, user_info, info):
        log("Continue", activity_type, title, int(user_info["page"]), info["Device"], int(info["Version"]))
        GLib.timeout_add(300, loop.quit)

    @dbus.service.method("org.baton.ActivityHandler1", in_signature="sss", out_signature="")
    def FailedToContinue(self, activity_type, error, message):
        log("FailedToContinue", error)

class Application(dbus.service.Object):
    @dbus.service.method("org.freedesktop.Application", in_signature="a{sv}", out_signature="")
    def Activate(self, platform_data):
        log("activated")

handler = Handler(bus, "/app/handler")
if len(sys.argv) > 3:
    # DBusActivatable: own the desktop file id and answer org.freedesktop.Application there.
    application = Application(bus, "/" + sys.argv[3].replace(".", "/").replace("-", "_"))
    bus.request_name(sys.argv[3])
bus.call_blocking("org.baton", "/org/baton", "org.baton.Manager1", "RegisterHandler", "oas",
                  ["/app/handler", [activity_type]])
log("registered")
GLib.timeout_add(20000, loop.quit)
loop.run()
"""#

@Suite("BatonServiceTests: handlers, .desktop files and delivery", .serialized)
struct HandlerDeliveryTests {
    func record(_ type: String, title: String = "Chapter 9") throws -> ActivityRecord {
        try ActivityRecord(activityType: type, title: title, userInfo: ["page": .integer(9)], webpageURL: "https://e.org/b", version: 4)
    }

    @Test func deliversToAHandlerRegisteredByARunningApp() async throws {
        try await withService { fixture in
            let recorder = CallRecorder()
            let app = try fixture.connect()
            defer { app.close() }
            let accepted = try InterfaceFiles.interface("org.baton.ActivityHandler1") { call in
                recorder.append(call)
                return call.member == "WillContinue" ? [.boolean(true)] : []
            }
            try await app.export([accepted], at: "/reader")
            _ = try await app.manager("RegisterHandler", [.objectPath("/reader"), .stringArray(["org.example.Reader.reading"])])
            #expect(try await fixture.client.manager("GetHandledTypes") == [.stringArray(["org.example.Reader.reading"])])

            let outcome = await fixture.handlers.deliver(activity: try record("org.example.Reader.reading"), from: "Laptop", to: getuid())
            #expect(outcome == .delivered)
            #expect(recorder.members == ["WillContinue", "Continue"])
            let continueCall = try #require(recorder.calls.first { $0.member == "Continue" })
            #expect(continueCall.arguments[0] == .string("org.example.Reader.reading"))
            #expect(continueCall.arguments[1] == .string("Chapter 9"))
            #expect(continueCall.arguments[2].asDictionary?["page"] == .int64(9))
            let info = try #require(continueCall.arguments[3].asDictionary)
            #expect(info == ["WebpageURL": .string("https://e.org/b"), "Version": .int64(4), "Device": .string("Laptop")])

            // Another user's handler is never used.
            let incoming1 = try record("org.example.Reader.reading")
            #expect(await fixture.handlers.deliver(activity: incoming1, from: "Laptop", to: getuid() &+ 1) == .noHandler)
            let incoming2 = try record("org.example.Unknown.kind")
            #expect(await fixture.handlers.deliver(activity: incoming2, from: "Laptop", to: getuid()) == .noHandler)
        }
    }

    @Test func declinedAndFailingHandlers() async throws {
        try await withService { fixture in
            let recorder = CallRecorder()
            let app = try fixture.connect()
            defer { app.close() }
            let decliner = try InterfaceFiles.interface("org.baton.ActivityHandler1") { call in
                recorder.append(call)
                return call.member == "WillContinue" ? [.boolean(false)] : []
            }
            let failer = try InterfaceFiles.interface("org.baton.ActivityHandler1") { call in
                recorder.append(call)
                switch call.member {
                case "WillContinue": return [.boolean(true)]
                case "Continue": throw DBusError.failed("cannot open")
                default: return []
                }
            }
            try await app.export([decliner], at: "/decliner")
            try await app.export([failer], at: "/failer")
            _ = try await app.manager("RegisterHandler", [.objectPath("/decliner"), .stringArray(["org.example.No.thanks"])])
            _ = try await app.manager("RegisterHandler", [.objectPath("/failer"), .stringArray(["org.example.Broken.app"])])
            let incoming3 = try record("org.example.No.thanks")
            #expect(await fixture.handlers.deliver(activity: incoming3, from: "Phone", to: getuid()) == .declined)
            let incoming4 = try record("org.example.Broken.app")
            #expect(await fixture.handlers.deliver(activity: incoming4, from: "Phone", to: getuid()) == .failed)
            #expect(recorder.members == ["WillContinue", "WillContinue", "Continue", "FailedToContinue"])
            let failure = try #require(recorder.calls.last)
            // The handler refused what it had accepted: the category, then "category: detail".
            #expect(failure.arguments[1] == .string("cancelled"))
            #expect(failure.arguments[2] == .string("cancelled: the handler did not accept the activity"))
            let status = await fixture.service.status()
            #expect(status.errors.map(\.category) == [.handlerFailed])
        }
    }

    @Test func launchesAnInstalledAppFromItsDesktopFileAndDelivers() async throws {
        let dataDirectory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-xdg-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDirectory) }
        let applications = dataDirectory.appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        let script = dataDirectory.appendingPathComponent("handler.py")
        try pythonHandlerScript.write(to: script, atomically: true, encoding: .utf8)
        let logFile = dataDirectory.appendingPathComponent("calls.log")
        let desktop = """
            [Desktop Entry]
            Type=Application
            Name=Python Reader
            Exec=/usr/bin/python3 "\(script.path)" "\(logFile.path)" org.example.Py.reading %U
            X-Baton-ActivityTypes=org.example.Py.reading;org.example.Py.other;

            [Desktop Action extra]
            X-Baton-ActivityTypes=org.example.Ignored.action;
            """
        try desktop.write(to: applications.appendingPathComponent("org.example.PyReader.desktop"), atomically: true, encoding: .utf8)

        var options = FixtureOptions()
        options.dataDirectories = [dataDirectory.path]
        try await withService(options) { fixture in
            let handled = try #require(try await fixture.client.manager("GetHandledTypes").first?.stringArrayValue)
            #expect(handled == ["org.example.Py.other", "org.example.Py.reading"])
            // batond starts nothing itself: the user's session agent launches the app through GIO.
            let agent = try SessionAgentProcess(busAddress: fixture.bus.address, dataDirectory: dataDirectory.path)
            defer { agent.stop() }
            #expect(await eventually(timeout: .seconds(15)) { await fixture.handlers.hasAgent(uid: getuid()) })
            let outcome = await fixture.handlers.deliver(activity: try record("org.example.Py.reading", title: "From Python"),
                                                        from: "Desk", to: getuid())
            #expect(outcome == .delivered)
            let log = try String(contentsOf: logFile, encoding: .utf8)
            #expect(log.components(separatedBy: "\n").filter { !$0.isEmpty } == [
                "registered", "WillContinue org.example.Py.reading Desk", "Continue org.example.Py.reading From Python 9 Desk 4",
            ])
            #expect(fixture.log.lines.contains { $0.contains("the session agent launched org.example.PyReader.desktop") })
        }
    }

    // dbus-broker leaves activation to systemd (dbus-broker-launch asks it to start the service's
    // unit); the test machine runs no systemd, so on dbus-broker nothing could be activated here.
    @Test(.disabled(if: TestBus.Daemon.default == .broker, "dbus-broker activates through systemd, which this machine does not run"))
    func activatesADBusActivatableAppAndDelivers() async throws {
        let dataDirectory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-xdg-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDirectory) }
        let applications = dataDirectory.appendingPathComponent("applications")
        let services = dataDirectory.appendingPathComponent("services")
        for directory in [applications, services] { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
        let script = dataDirectory.appendingPathComponent("handler.py")
        try pythonHandlerScript.write(to: script, atomically: true, encoding: .utf8)
        let logFile = dataDirectory.appendingPathComponent("calls.log")
        // No Exec line the daemon could run: only D-Bus activation can start it.
        try """
            [Desktop Entry]
            Type=Application
            Name=Activated Reader
            DBusActivatable=true
            X-Baton-ActivityTypes=org.example.Act.reading;
            """.write(to: applications.appendingPathComponent("org.example.PyActivated.desktop"), atomically: true, encoding: .utf8)
        try """
            [D-BUS Service]
            Name=org.example.PyActivated
            Exec=/usr/bin/python3 \(script.path) \(logFile.path) org.example.Act.reading org.example.PyActivated
            """.write(to: services.appendingPathComponent("org.example.PyActivated.service"), atomically: true, encoding: .utf8)

        var options = FixtureOptions()
        options.dataDirectories = [dataDirectory.path]
        options.serviceDirectory = services.path
        try await withService(options) { fixture in
            let agent = try SessionAgentProcess(busAddress: fixture.bus.address, dataDirectory: dataDirectory.path)
            defer { agent.stop() }
            #expect(await eventually(timeout: .seconds(15)) { await fixture.handlers.hasAgent(uid: getuid()) })
            let outcome = await fixture.handlers.deliver(activity: try record("org.example.Act.reading", title: "Activated"),
                                                        from: "Desk", to: getuid())
            #expect(outcome == .delivered)
            let lines = Set(try String(contentsOf: logFile, encoding: .utf8).components(separatedBy: "\n").filter { !$0.isEmpty })
            #expect(lines.isSuperset(of: ["activated", "registered", "WillContinue org.example.Act.reading Desk",
                                          "Continue org.example.Act.reading Activated 9 Desk 4"]), "\(lines)")
        }
    }

    @Test func anAppThatNeverRegistersIsALaunchFailure() async throws {
        let dataDirectory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-xdg-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDirectory) }
        let applications = dataDirectory.appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        try "[Desktop Entry]\nType=Application\nName=Mute\nExec=/bin/true %f\nX-Baton-ActivityTypes=org.example.Mute.app\n"
            .write(to: applications.appendingPathComponent("mute.desktop"), atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nType=Application\nName=Missing\nExec=/nonexistent/program\nX-Baton-ActivityTypes=org.example.Missing.app\n"
            .write(to: applications.appendingPathComponent("missing.desktop"), atomically: true, encoding: .utf8)
        var options = FixtureOptions()
        options.dataDirectories = [dataDirectory.path]
        options.handlerWait = .milliseconds(500)
        try await withService(options) { fixture in
            let agent = try SessionAgentProcess(busAddress: fixture.bus.address, dataDirectory: dataDirectory.path)
            defer { agent.stop() }
            #expect(await eventually(timeout: .seconds(15)) { await fixture.handlers.hasAgent(uid: getuid()) })
            let incoming5 = try record("org.example.Mute.app")
            #expect(await fixture.handlers.deliver(activity: incoming5, from: "D", to: getuid()) == .launchFailed)
            let incoming6 = try record("org.example.Missing.app")
            #expect(await fixture.handlers.deliver(activity: incoming6, from: "D", to: getuid()) == .launchFailed)
            #expect(await fixture.service.status().errors.map(\.category) == [.launchFailed])
            #expect(await fixture.service.status().errors.first?.count == 2)
        }
    }
}

extension HandlerDeliveryTests {
    /// Without a session agent nobody can start the installed app: the outcome says so
    /// ("no-agent"), the error log records no-agent, and GetStatus tells the user.
    @Test func withoutASessionAgentAnInstalledAppIsNotStartedAndTheStatusSaysSo() async throws {
        let dataDirectory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-xdg-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDirectory) }
        let applications = dataDirectory.appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        let marker = dataDirectory.appendingPathComponent("started").path
        try "[Desktop Entry]\nType=Application\nName=Touch\nExec=/usr/bin/touch \(marker)\nX-Baton-ActivityTypes=org.example.Touch.app\n"
            .write(to: applications.appendingPathComponent("touch.desktop"), atomically: true, encoding: .utf8)
        var options = FixtureOptions()
        options.dataDirectories = [dataDirectory.path]
        try await withService(options) { fixture in
            #expect(await fixture.handlers.deliver(activity: try record("org.example.Touch.app"), from: "D", to: getuid()) == .noAgent)
            #expect(await fixture.service.status().errors.map(\.category) == [.noAgent])
            #expect(!FileManager.default.fileExists(atPath: marker))
            let status = try #require(try await fixture.client.manager("GetStatus").first?.asDictionary)
            #expect(status["SessionAgent"] == .boolean(false))
            #expect(fixture.log.lines.contains { $0.contains("no session agent runs for user \(getuid())") })

            // An agent that leaves the bus is forgotten at once.
            let agentConnection = try fixture.connect()
            _ = try await agentConnection.manager("RegisterAgent", [.objectPath("/org/baton/Agent")])
            let withAgent = try #require(try await fixture.client.manager("GetStatus").first?.asDictionary)
            #expect(withAgent["SessionAgent"] == .boolean(true))
            agentConnection.close()
            #expect(await eventually { await !fixture.handlers.hasAgent(uid: getuid()) })
            await expectError(ErrorName.invalidArguments) { _ = try await fixture.client.manager("RegisterAgent", [.objectPath("/")]) }
        }
    }
}

@Suite("BatonServiceTests: desktop entries, Exec lines and options")
struct DesktopAndOptionsTests {
    @Test func desktopEntryParsing() {
        let entry = XDGDesktopEntryScanner.parse("""
            # comment
            [Desktop Entry]
            Name=Reader
            Exec=reader --open\\s%u
            DBusActivatable=true
            X-Baton-ActivityTypes=org.example.Reader.reading;bad type;org.example.Reader.editing
            [Other Group]
            Exec=ignored
            """, id: "org.example.Reader")
        #expect(entry == DesktopEntry(id: "org.example.Reader", activityTypes: ["org.example.Reader.reading", "org.example.Reader.editing"],
                                      dbusActivatable: true, exec: "reader --open %u"))
        #expect(XDGDesktopEntryScanner.parse("[Desktop Entry]\nExec=x\n", id: "none") == nil)
        #expect(XDGDesktopEntryScanner.parse("[Desktop Entry]\nHidden=true\nX-Baton-ActivityTypes=a.b\n", id: "hidden") == nil)
    }

    @Test func scannerHonoursPrecedenceAndSubdirectories() throws {
        let root = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-scan-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let home = root.appendingPathComponent("home/applications")
        let system = root.appendingPathComponent("system/applications/vendor")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: system, withIntermediateDirectories: true)
        try "[Desktop Entry]\nExec=home\nX-Baton-ActivityTypes=org.e.Home.t\n".write(to: home.appendingPathComponent("vendor-app.desktop"), atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nExec=system\nX-Baton-ActivityTypes=org.e.System.t\n".write(to: system.appendingPathComponent("app.desktop"), atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nExec=other\nX-Baton-ActivityTypes=org.e.Other.t\n".write(to: system.appendingPathComponent("other.desktop"), atomically: true, encoding: .utf8)
        let scanner = XDGDesktopEntryScanner(environment: ["XDG_DATA_HOME": root.path + "/home", "XDG_DATA_DIRS": root.path + "/system:relative/ignored"])
        #expect(scanner.dataDirectories == [root.path + "/home", root.path + "/system"])
        let entries = scanner.entries()
        #expect(entries.map(\.id) == ["vendor-app", "vendor-other"])
        #expect(entries.map(\.exec) == ["home", "other"])
    }


    @Test func daemonOptions() throws {
        let environment = ["XDG_STATE_HOME": "/home/u/.local/state"]
        guard case .run(let session) = try DaemonOptions.parse(["--session", "--no-radio", "--save-timeout", "0.5", "--adapter", "hci1"],
                                                              environment: environment) else {
            Issue.record("expected run")
            return
        }
        #expect(session.bus == .session && !session.radioEnabled && session.saveTimeout == .milliseconds(500))
        #expect(session.stateDirectory == "/home/u/.local/state/baton" && session.adapter == "hci1" && session.busName == "org.baton")
        guard case .run(let system) = try DaemonOptions.parse([], environment: [:]) else {
            Issue.record("expected run")
            return
        }
        #expect(system.bus == .system && system.stateDirectory == "/var/lib/baton" && system.radioEnabled)
        guard case .run(let custom) = try DaemonOptions.parse(["--bus-address", "unix:path=/x", "--bus-name", "org.baton.Test2",
                                                               "--state-dir", "/tmp/s"], environment: [:]) else {
            Issue.record("expected run")
            return
        }
        #expect(custom.bus == .address("unix:path=/x") && custom.busName == "org.baton.Test2" && custom.stateDirectory == "/tmp/s")
        // The base-directory specification's default when XDG_STATE_HOME is unset or relative (issue 26).
        for stateHome in [nil, "relative/state"] {
            var environment = ["HOME": "/home/v"]
            environment["XDG_STATE_HOME"] = stateHome
            guard case .run(let fallback) = try DaemonOptions.parse(["--session"], environment: environment) else {
                Issue.record("expected run")
                return
            }
            #expect(fallback.stateDirectory == "/home/v/.local/state/baton", "\(environment)")
        }
        #expect(try DaemonOptions.parse(["--version"], environment: [:]) == .showVersion)
        #expect(try DaemonOptions.parse(["--help"], environment: [:]) == .showHelp)
        let bad: [[String]] = [
            ["--session"], ["--bogus"], ["--session", "--system"], ["--state-dir"], ["--state-dir", "relative"],
            ["--save-timeout", "0"], ["--save-timeout", "nan"], ["--save-timeout", "100"], ["--adapter", "eth0"],
            ["--bus-name", "nodots"], ["--bus-name", ":1.2"], ["--bus-name", "org.9bad"],
        ]
        for arguments in bad {
            #expect(throws: DaemonOptions.UsageError.self, "\(arguments)") { _ = try DaemonOptions.parse(arguments, environment: [:]) }
        }
    }
}

/// Issue 13: a handler declares the activity versions it accepts (RegisterHandlerWithOptions
/// "Versions", X-Baton-ActivityVersions); the continuation refuses any other version.
@Suite("BatonServiceTests: handler versions", .serialized)
struct HandlerVersionTests {
    func ranges(_ pairs: [(Int64, Int64)]) -> DBusValue {
        .propertyDictionary(["Versions": .array(elementSignature: "(xx)", pairs.map { .structure([.int64($0.0), .int64($0.1)]) })])
    }

    @Test func aRegisteredHandlerAcceptsOnlyTheVersionsItDeclared() async throws {
        try await withService { fixture in
            let app = try fixture.connect()
            defer { app.close() }
            let type = "org.example.Reader.reading"
            #expect(await fixture.handlers.acceptsVersion(7, type: type, uid: getuid()), "no handler: nothing to refuse")
            _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/v1"), .stringArray([type]), ranges([(1, 2), (5, 5)])])
            for (version, accepted) in [(Int64(0), false), (1, true), (2, true), (3, false), (5, true), (6, false)] {
                #expect(await fixture.handlers.acceptsVersion(version, type: type, uid: getuid()) == accepted, "version \(version)")
            }
            // The newest handler for the type decides; a plain RegisterHandler declares nothing (all versions).
            _ = try await app.manager("RegisterHandler", [.objectPath("/all"), .stringArray([type])])
            #expect(await fixture.handlers.acceptsVersion(3, type: type, uid: getuid()))

            for bad: DBusValue in [ranges([(3, 1)]), ranges([]), .propertyDictionary(["Versions": .stringArray(["1"])]),
                                   .propertyDictionary(["Colour": .string("red")]),
                                   ranges(Array(repeating: (1, 1), count: ActivityVersions.maxRanges + 1))] {
                await expectError(ErrorName.invalidArguments) {
                    _ = try await app.manager("RegisterHandlerWithOptions", [.objectPath("/bad"), .stringArray([type]), bad])
                }
            }
        }
    }

    @Test func anInstalledAppDeclaresItsVersionsInItsDesktopFile() async throws {
        let dataDirectory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-xdg-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dataDirectory) }
        let applications = dataDirectory.appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        try "[Desktop Entry]\nType=Application\nName=V\nExec=v\nX-Baton-ActivityTypes=org.example.V.t;\nX-Baton-ActivityVersions=2;4-6;\n"
            .write(to: applications.appendingPathComponent("v.desktop"), atomically: true, encoding: .utf8)
        // A version list that cannot be read drops the entry rather than accept every version.
        try "[Desktop Entry]\nType=Application\nName=W\nExec=w\nX-Baton-ActivityTypes=org.example.W.t;\nX-Baton-ActivityVersions=6-4;\n"
            .write(to: applications.appendingPathComponent("w.desktop"), atomically: true, encoding: .utf8)
        var options = FixtureOptions()
        options.dataDirectories = [dataDirectory.path]
        try await withService(options) { fixture in
            for (version, accepted) in [(Int64(1), false), (2, true), (3, false), (4, true), (6, true), (7, false)] {
                #expect(await fixture.handlers.acceptsVersion(version, type: "org.example.V.t", uid: getuid()) == accepted, "version \(version)")
            }
            let handled = try await fixture.client.manager("GetHandledTypes")
            #expect(handled == [.stringArray(["org.example.V.t"])])
        }
        let entry = try #require(XDGDesktopEntryScanner.parse("[Desktop Entry]\nX-Baton-ActivityTypes=a.b;\nX-Baton-ActivityVersions=3;\n", id: "x"))
        let three = try ActivityVersions(ranges: [3...3])
        #expect(entry.versions == three)
    }
}

extension DBusMethodCall {
    /// Argument `index`, nil when the call has fewer: a failed expectation, not a crash of the
    /// whole test process (a loaded run once delivered another call than the one awaited).
    func argument(_ index: Int) -> DBusValue? { arguments.indices.contains(index) ? arguments[index] : nil }
}
