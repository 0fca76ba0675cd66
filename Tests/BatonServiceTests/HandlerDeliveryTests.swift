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

            let outcome = await fixture.service.deliver(activity: try record("org.example.Reader.reading"), from: "Laptop", to: getuid())
            #expect(outcome == .delivered)
            #expect(recorder.members == ["WillContinue", "Continue"])
            let continueCall = try #require(recorder.calls.last)
            #expect(continueCall.arguments[0] == .string("org.example.Reader.reading"))
            #expect(continueCall.arguments[1] == .string("Chapter 9"))
            #expect(continueCall.arguments[2].asDictionary?["page"] == .int64(9))
            let info = try #require(continueCall.arguments[3].asDictionary)
            #expect(info == ["WebpageURL": .string("https://e.org/b"), "Version": .int64(4), "Device": .string("Laptop")])

            // Another user's handler is never used.
            let incoming1 = try record("org.example.Reader.reading")
            #expect(await fixture.service.deliver(activity: incoming1, from: "Laptop", to: getuid() &+ 1) == .noHandler)
            let incoming2 = try record("org.example.Unknown.kind")
            #expect(await fixture.service.deliver(activity: incoming2, from: "Laptop", to: getuid()) == .noHandler)
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
            #expect(await fixture.service.deliver(activity: incoming3, from: "Phone", to: getuid()) == .declined)
            let incoming4 = try record("org.example.Broken.app")
            #expect(await fixture.service.deliver(activity: incoming4, from: "Phone", to: getuid()) == .failed)
            #expect(recorder.members == ["WillContinue", "WillContinue", "Continue", "FailedToContinue"])
            let failure = try #require(recorder.calls.last)
            #expect(failure.arguments[1] == .string("org.baton.Error.Failed"))
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
            let outcome = await fixture.service.deliver(activity: try record("org.example.Py.reading", title: "From Python"),
                                                        from: "Desk", to: getuid())
            #expect(outcome == .delivered)
            let log = try String(contentsOf: logFile, encoding: .utf8)
            #expect(log.components(separatedBy: "\n").filter { !$0.isEmpty } == [
                "registered", "WillContinue org.example.Py.reading Desk", "Continue org.example.Py.reading From Python 9 Desk 4",
            ])
            #expect(fixture.log.lines.contains { $0.contains("launched org.example.PyReader") })
        }
    }

    @Test func activatesADBusActivatableAppAndDelivers() async throws {
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
            let outcome = await fixture.service.deliver(activity: try record("org.example.Act.reading", title: "Activated"),
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
        try "[Desktop Entry]\nExec=/bin/true %f\nX-Baton-ActivityTypes=org.example.Mute.app\n"
            .write(to: applications.appendingPathComponent("mute.desktop"), atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nExec=/nonexistent/program\nX-Baton-ActivityTypes=org.example.Missing.app\n"
            .write(to: applications.appendingPathComponent("missing.desktop"), atomically: true, encoding: .utf8)
        var options = FixtureOptions()
        options.dataDirectories = [dataDirectory.path]
        options.handlerWait = .milliseconds(500)
        try await withService(options) { fixture in
            let incoming5 = try record("org.example.Mute.app")
            #expect(await fixture.service.deliver(activity: incoming5, from: "D", to: getuid()) == .launchFailed)
            let incoming6 = try record("org.example.Missing.app")
            #expect(await fixture.service.deliver(activity: incoming6, from: "D", to: getuid()) == .launchFailed)
            #expect(await fixture.service.status().errors.map(\.category) == [.launchFailed])
            #expect(await fixture.service.status().errors.first?.count == 2)
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

    @Test func execLineFieldCodesAndQuoting() {
        #expect(ExecLine.arguments("app %U") == ["app"])
        #expect(ExecLine.arguments("app --name=%c -f %f %i %k 100%%") == ["app", "--name=", "-f", "100%"])
        #expect(ExecLine.arguments("\"/opt/My App/bin\" \"a \\\"quoted\\\" arg\"") == ["/opt/My App/bin", "a \"quoted\" arg"])
        #expect(ExecLine.arguments("app \"\"") == ["app", ""])
        #expect(ExecLine.arguments("app \"unterminated") == nil)
        #expect(ExecLine.arguments("app %z") == nil)
        #expect(ExecLine.arguments("%U") == nil)
        #expect(ExecLine.arguments("") == nil)
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
