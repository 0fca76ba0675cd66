// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// A python3-dbus client run as `nobody`. Prints one `step=result` line per step: the D-Bus error
/// name on failure, a short value on success.
let foreignClientScript = #"""
import sys
import dbus
import dbus.service
import dbus.mainloop.glib
from gi.repository import GLib

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
address, foreign_path = sys.argv[1], sys.argv[2]
bus = dbus.bus.BusConnection(address)

def step(name, call):
    try:
        value = call()
        print("%s=%s" % (name, value), flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s" % (name, error.get_dbus_name()), flush=True)

def activity(path, method, *args):
    return bus.call_blocking("org.baton", path, "org.baton.Activity1", method, "a{sv}" if args else "", list(args))

def prop(path, name):
    return bus.call_blocking("org.baton", path, "org.freedesktop.DBus.Properties", "Get", "ss", ["org.baton.Activity1", name])

step("type", lambda: prop(foreign_path, "Type"))
step("status", lambda: prop(foreign_path, "Status"))
step("title", lambda: prop(foreign_path, "Title"))
step("getall", lambda: bus.call_blocking("org.baton", foreign_path, "org.freedesktop.DBus.Properties", "GetAll", "s", ["org.baton.Activity1"]))
step("update", lambda: activity(foreign_path, "Update", {"Title": "hijacked"}))
step("become", lambda: activity(foreign_path, "BecomeCurrent"))
step("resign", lambda: activity(foreign_path, "ResignCurrent"))
step("payload", lambda: activity(foreign_path, "GetPayload"))
step("invalidate", lambda: activity(foreign_path, "Invalidate"))
step("own", lambda: bus.request_name("org.baton", dbus.bus.NAME_FLAG_DO_NOT_QUEUE))

class Source(dbus.service.Object):
    @dbus.service.method("org.baton.ActivitySource1", in_signature="o", out_signature="a{sv}")
    def WillSave(self, path):
        return {"Title": "saved by nobody"}

source = Source(bus, "/nobody/source")
mine = bus.call_blocking("org.baton", "/org/baton", "org.baton.Manager1", "CreateActivity", "ssa{sv}a{sv}",
                         ["org.example.Nobody.app", "draft", {}, {"NeedsSave": True, "Source": dbus.ObjectPath("/nobody/source")}])
print("created=%s" % mine, flush=True)
step("owner", lambda: prop(mine, "Owner"))
step("current", lambda: bus.call_blocking("org.baton", "/org/baton", "org.baton.Manager1", "GetCurrentActivity", "", []))

loop = GLib.MainLoop()
def got_payload(payload):
    print("saved=%s" % payload["Title"], flush=True)
    loop.quit()
def payload_failed(error):
    print("saved=%s" % error.get_dbus_name(), flush=True)
    loop.quit()
bus.call_async("org.baton", mine, "org.baton.Activity1", "GetPayload", "", [], got_payload, payload_failed)
GLib.timeout_add(10000, loop.quit)
loop.run()
"""#

/// Runs `script` with /usr/bin/python3 as user nobody; returns its `step=result` lines as a dictionary.
func runAsNobody(script: String, in directory: URL, arguments: [String]) async throws -> [String: String] {
    let scriptURL = directory.appendingPathComponent("client-\(UUID().uuidString).py")
    try script.write(to: scriptURL, atomically: true, encoding: .utf8)
    chmod(scriptURL.path, 0o644)
    let (status, output, errors) = try await runTool(
        "/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", scriptURL.path] + arguments,
        environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"])
    #expect(status == 0, "python client failed: \(errors)")
    var results: [String: String] = [:]
    for line in output.split(separator: "\n") {
        guard let equals = line.firstIndex(of: "=") else { continue }
        results[String(line[..<equals])] = String(line[line.index(after: equals)...])
    }
    return results
}

let nobodyUID: UInt32 = 65_534

@Suite("BatonServiceTests: other Unix users", .serialized)
struct ForeignUserTests {
    func checkIsolation(_ fixture: ServiceFixture, expectOwnRefused: Bool) async throws {
        let path = try await fixture.client.createActivity(title: "root's secret")
        _ = try await fixture.client.activity(path, "BecomeCurrent")
        let results = try await runAsNobody(script: foreignClientScript, in: fixture.bus.directory, arguments: [fixture.bus.address, path])
        #expect(results["type"] == "org.example.Reader.reading")
        #expect(results["status"] == "published" || results["status"] == "preparing")
        for step in ["title", "getall", "update", "become", "resign", "payload", "invalidate"] {
            #expect(results[step] == ErrorName.notPermitted, "\(step): \(results[step] ?? "missing")")
        }
        if expectOwnRefused {
            #expect(results["own"] == "org.freedesktop.DBus.Error.AccessDenied")
        }
        let created = try #require(results["created"])
        #expect(created.hasPrefix("/org/baton/activity/u\(nobodyUID)_"))
        #expect(results["owner"] == "\(nobodyUID)")
        #expect(results["current"] == "/")
        #expect(results["saved"] == "saved by nobody")

        // Root's activity is untouched, nobody's is gone with its connection, and the daemon lives.
        #expect(try await fixture.client.property(path, "Title") == .string("root's secret"))
        #expect(try await fixture.client.property(path, "Current") == .boolean(true))
        #expect(try await fixture.client.manager("GetCurrentActivity") == [.objectPath(path)])
        #expect(await eventually { await fixture.service.registry.activities.count == 1 })
        // And root may not touch nobody's (it was already invalidated: unknown object).
        await expectError(DBusError.unknownObjectName) { _ = try await fixture.client.property(created, "Title") }
    }

    @Test func nobodyCannotTouchAnotherUsersActivityOnASessionStyleBus() async throws {
        try await withService { fixture in
            try await checkIsolation(fixture, expectOwnRefused: false)
        }
    }

    @Test func systemBusPolicyLetsNobodyUseManager1ButNotOwnTheName() async throws {
        var options = FixtureOptions()
        options.busKind = .system(policyFile: InterfaceFiles.packageRoot.appendingPathComponent("dbus/org.baton.conf").path)
        try await withService(options) { fixture in
            try await checkIsolation(fixture, expectOwnRefused: true)
        }
    }

    @Test func rootCannotTouchNobodysLiveActivityEither() async throws {
        try await withService { fixture in
            // A nobody client that creates an activity and stays connected until told to stop.
            let script = #"""
            import sys, time, dbus
            bus = dbus.bus.BusConnection(sys.argv[1])
            path = bus.call_blocking("org.baton", "/org/baton", "org.baton.Manager1", "CreateActivity", "ssa{sv}a{sv}",
                                     ["org.example.Nobody.app", "mine", {}, {}])
            print(path, flush=True)
            sys.stdin.readline()
            """#
            let scriptURL = fixture.bus.directory.appendingPathComponent("stay.py")
            try script.write(to: scriptURL, atomically: true, encoding: .utf8)
            chmod(scriptURL.path, 0o644)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", scriptURL.path, fixture.bus.address]
            let input = ChildPipe()
            let output = ChildPipe()
            process.standardInput = input
            process.standardOutput = output
            try launch(process)
            defer {
                try? input.fileHandleForWriting.close()
                if process.isRunning { process.terminate() }
            }
            let line = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
                DispatchQueue.global().async {
                    var data = Data()
                    while !data.contains(UInt8(ascii: "\n")) {
                        let chunk = output.fileHandleForReading.availableData
                        if chunk.isEmpty { break }
                        data.append(chunk)
                    }
                    continuation.resume(returning: String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
                }
            }
            #expect(line.hasPrefix("/org/baton/activity/u\(nobodyUID)_"))
            #expect(try await fixture.client.property(line, "Type") == .string("org.example.Nobody.app"))
            await expectError(ErrorName.notPermitted) { _ = try await fixture.client.property(line, "Title") }
            await expectError(ErrorName.notPermitted) { _ = try await fixture.client.activity(line, "Invalidate") }
            await expectError(ErrorName.notPermitted) {
                _ = try await fixture.client.activity(line, "Update", [.propertyDictionary(["Title": .string("x")])])
            }
            // Root's handlers and current activity are separate from nobody's.
            #expect(try await fixture.client.manager("GetCurrentActivity") == [.objectPath("/")])
            try input.fileHandleForWriting.write(contentsOf: Data("\n".utf8))
            #expect(await eventually { await fixture.service.registry.activities.isEmpty })
        }
    }
}
