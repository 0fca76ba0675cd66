// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// python3-dbus as nobody. `Pairs` makes dbus-python append a dictionary entry for every pair,
/// duplicates included (it iterates the keys and indexes with each), which no Python dict holds.
let hostileArgumentScript = #"""
import sys, dbus
bus = dbus.bus.BusConnection(sys.argv[1])

\#(pythonDuplicateKeyPairs)

def step(name, call):
    try:
        print("%s=%s" % (name, call()), flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s" % (name, error.get_dbus_name()), flush=True)

def create(user_info, options):
    return bus.call_blocking("org.baton", "/org/baton", "org.baton.Manager1", "CreateActivity", "ssa{sv}a{sv}",
                             ["org.example.Hostile", "t", user_info, options], timeout=60)

empty = dbus.Dictionary({}, signature="sv")
step("huge", lambda: create(dbus.Dictionary({"k%d" % i: dbus.Int32(i) for i in range(50000)}, signature="sv"), empty))
step("longstring", lambda: create(dbus.Dictionary({"k": "x" * 200000}, signature="sv"), empty))
step("dupkey", lambda: create(Pairs([("k", "first"), ("k", "second")]), empty))
step("dupnested", lambda: create({"outer": Pairs([("a", 1), ("a", 2)])}, empty))
step("canonical", lambda: create(Pairs([("\u00e9", 1), ("e\u0301", 2)]), empty))
step("dupversion", lambda: create(empty, Pairs([("Version", dbus.Int64(1)), ("Version", dbus.Int64(2))])))
mine = create(dbus.Dictionary({"\u00e9": 1, "k": "v"}, signature="sv"), empty)
print("created=%s" % mine, flush=True)
step("dupupdate", lambda: bus.call_blocking("org.baton", mine, "org.baton.Activity1", "Update", "a{sv}",
                                             [Pairs([("Title", "a"), ("Title", "b")])]))
step("title", lambda: bus.call_blocking("org.baton", mine, "org.freedesktop.DBus.Properties", "Get", "ss",
                                         ["org.baton.Activity1", "Title"]))
step("bigupdate", lambda: bus.call_blocking("org.baton", mine, "org.baton.Activity1", "Update", "a{sv}",
                                             [{"UserInfo": dbus.Dictionary({"k%d" % i: True for i in range(50000)}, signature="sv")}],
                                             timeout=60))
"""#

@Suite("BatonServiceTests: oversized and ambiguous arguments", .serialized)
struct HostileArgumentTests {
    @Test func oversizedAndDuplicateKeyCallsAreRefusedAndNothingIsMerged() async throws {
        var options = FixtureOptions()
        options.busKind = .system(policyFile: InterfaceFiles.packageRoot.appendingPathComponent("dbus/org.baton.conf").path)
        try await withService(options) { fixture in
            let results = try await runAsNobody(script: hostileArgumentScript, in: fixture.bus.directory, arguments: [fixture.bus.address])
            for step in ["huge", "longstring", "bigupdate"] {
                #expect(results[step] == BatonErrorName.payloadTooLarge.rawValue, "\(step): \(results[step] ?? "missing")")
            }
            for step in ["dupkey", "dupnested", "canonical", "dupversion", "dupupdate"] {
                #expect(results[step] == BatonErrorName.invalidArguments.rawValue, "\(step): \(results[step] ?? "missing")")
            }
            #expect(results["created"]?.hasPrefix("/org/baton/activity/u\(nobodyUID)_") == true)
            // The refused Update changed nothing.
            #expect(results["title"] == "t")
        }
    }
}
