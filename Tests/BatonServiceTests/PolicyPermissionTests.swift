// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// Runs one call per row of docs/dbus-api.md "Who may call what" and prints `row=result`:
/// "ok" or the D-Bus error name. argv: bus address, a pairing session owned by another user.
let permissionClientScript = #"""
import sys
import dbus

address, foreign_session = sys.argv[1], sys.argv[2]
bus = dbus.bus.BusConnection(address)

def call(path, interface, method, signature="", args=()):
    return bus.call_blocking("org.baton", path, interface, method, signature, list(args), timeout=20)

def run(row, action):
    try:
        action()
        print("%s=ok" % row, flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s" % (row, error.get_dbus_name()), flush=True)

RING = "/org/baton/ring"
own = {}

def create():
    own["activity"] = call("/org/baton", "org.baton.Manager1", "CreateActivity", "ssa{sv}a{sv}",
                           ["org.example.Policy.check", "policy", {}, {}])

def accept():
    own["session"] = call(RING, "org.baton.Pairing1", "Accept", "a{sv}", [{"Host": "127.0.0.1"}])

def own_session(method, signature="", args=()):
    def action():
        if "session" not in own:
            raise dbus.exceptions.DBusException("no own session", name="org.baton.Error.NotPermitted")
        call(own["session"], "org.baton.PairingSession1", method, signature, args)
    return action

run("Manager1.GetStatus", lambda: call("/org/baton", "org.baton.Manager1", "GetStatus"))
run("Manager1.CreateActivity", create)
run("Activity1.BecomeCurrent (own activity)", lambda: call(own["activity"], "org.baton.Activity1", "BecomeCurrent"))
run("Ring1.ListMembers", lambda: call(RING, "org.baton.Ring1", "ListMembers"))
run("Ring1.DumpRadio", lambda: call(RING, "org.baton.Ring1", "DumpRadio", "s", ["text"]))
run("Ring1.GetRadioNotices", lambda: call(RING, "org.baton.Ring1", "GetRadioNotices"))
run("Ring1 properties (Get)", lambda: call(RING, "org.freedesktop.DBus.Properties", "Get", "ss", ["org.baton.Ring1", "DeviceId"]))
run("Ring1.Continue", lambda: call(RING, "org.baton.Ring1", "Continue", "ss", ["no-such-member", "org.example.Policy.check"]))
run("Pairing1.Accept", accept)
run("Pairing1.Pair", lambda: call(RING, "org.baton.Pairing1", "Pair", "sa{sv}", ["127.0.0.1:1", {"SessionId": "00" * 8}]))
run("Pairing1.Remove", lambda: call(RING, "org.baton.Pairing1", "Remove", "s", ["no-such-member"]))
run("Pairing1.RemoveWithIntroduced", lambda: call(RING, "org.baton.Pairing1", "RemoveWithIntroduced", "s", ["no-such-member"]))
# A pairing session is open (the foreign one, and the account's own): ResetIdentity passes the
# privilege check and is then refused with NotReady, so nothing is reset here.
run("Pairing1.ResetIdentity", lambda: call(RING, "org.baton.Pairing1", "ResetIdentity"))
run("Pairing1.ListIntroduced", lambda: call(RING, "org.baton.Pairing1", "ListIntroduced", "s", ["no-such-member"]))
run("Pairing1.Discover", lambda: call(RING, "org.baton.Pairing1", "Discover", "u", [1]))
run("PairingSession1.Confirm (own session)", own_session("Confirm", "b", [True]))
run("PairingSession1.Cancel (own session)", own_session("Cancel"))
run("PairingSession1.Confirm (another user's session)",
    lambda: call(foreign_session, "org.baton.PairingSession1", "Confirm", "b", [True]))
def get_code(session):
    call(session, "org.freedesktop.DBus.Properties", "Get", "ss", ["org.baton.PairingSession1", "Code"])

def own_code():
    if "session" not in own:
        raise dbus.exceptions.DBusException("no own session", name="org.baton.Error.NotPermitted")
    get_code(own["session"])

run("PairingSession1.Code (own session, Get)", own_code)
run("PairingSession1.Code (another user's session, Get)", lambda: get_code(foreign_session))
run("Suggestion1.Dismiss", lambda: call("/org/baton/suggestion/999999", "org.baton.Suggestion1", "Dismiss"))
run("Clipboard1.Withdraw (own copy)", lambda: call("/org/baton/clipboard", "org.baton.Clipboard1", "Withdraw"))
run("Suggestion1.Continue", lambda: call("/org/baton/suggestion/999999", "org.baton.Suggestion1", "Continue"))
run("Suggestion1.ContinueInBrowser", lambda: call("/org/baton/suggestion/999999", "org.baton.Suggestion1", "ContinueInBrowser"))
# Keep a session of our own open for the other users' "another user's session" row.
if "session" not in own:
    try:
        accept()
    except dbus.exceptions.DBusException:
        pass
print("session=%s" % own.get("session", ""), flush=True)
"""#

/// The permission table of docs/dbus-api.md: call -> (ordinary user, group baton, root).
func documentedPermissions() throws -> [(call: String, allowed: [Bool])] {
    let text = try String(contentsOf: InterfaceFiles.packageRoot.appendingPathComponent("docs/dbus-api.md"), encoding: .utf8)
    let section = try #require(text.components(separatedBy: "Who may call what").dropFirst().first)
    var rows: [(String, [Bool])] = []
    for line in section.split(separator: "\n") where line.hasPrefix("| ") && !line.hasPrefix("| call") {
        let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
        guard cells.count == 4 else { continue }
        rows.append((cells[0], cells[1...3].map { $0 == "yes" }))
    }
    return rows
}

@Suite("BatonServiceTests: system bus policy and permissions", .serialized)
struct PolicyPermissionTests {
    enum Account: CaseIterable {
        case ordinary, groupBaton, root

        var setpriv: [String] {
            switch self {
            case .ordinary: ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
            case .groupBaton: ["/usr/bin/setpriv", "--reuid=baton-test", "--regid=baton-test", "--init-groups"]
            case .root: []
            }
        }
    }

    /// A call was served (success or the daemon's own non-permission error), not refused.
    static func wasAllowed(_ result: String) -> Bool {
        result != "org.freedesktop.DBus.Error.AccessDenied" && result != "org.baton.Error.NotPermitted"
    }

    func run(_ account: Account, bus: TestBus, foreignSession: String) async throws -> [String: String] {
        let scriptURL = bus.directory.appendingPathComponent("permissions.py")
        try permissionClientScript.write(to: scriptURL, atomically: true, encoding: .utf8)
        chmod(scriptURL.path, 0o644)
        let command = account.setpriv + ["/usr/bin/python3", scriptURL.path, bus.address, foreignSession]
        let (status, output, errors) = try await runTool(command[0], Array(command.dropFirst()),
                                                         environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"])
        #expect(status == 0, "\(account) client failed: \(errors)")
        var results: [String: String] = [:]
        for line in output.split(separator: "\n") {
            guard let equals = line.lastIndex(of: "=") else { continue }
            results[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return results
    }

    @Test func everyDocumentedPermissionHoldsForRootGroupBatonAndAnOrdinaryUser() async throws {
        try #require(getuid() == 0, "the permission test runs as root (CI does)")
        try #require(getgrnam("baton") != nil && getpwnam("baton-test") != nil,
                     "accounts missing: run scripts/test-accounts (scripts/test does)")
        let table = try documentedPermissions()
        #expect(table.count >= 15)
        let bus = try TestBus(.system(policyFile: InterfaceFiles.packageRoot.appendingPathComponent("dbus/org.baton.conf").path))
        defer { bus.stop() }
        let daemon = try await RunningBatond.start(on: bus, ["--listen", "127.0.0.1"])
        defer { daemon.stop() }
        let client = daemon.client

        // Sessions owned by someone else, for the "another user's session" row: root's for the
        // group member, the group member's for root and the ordinary user.
        let rootSession = try #require(try await client.call(destination: "org.baton", path: "/org/baton/ring", interface: "org.baton.Pairing1",
                                                             method: "Accept", arguments: [.propertyDictionary(["Host": .string("127.0.0.1")])])
                                        .first?.objectPathValue)
        let member = try await run(.groupBaton, bus: bus, foreignSession: rootSession)
        let memberSession = try #require(member["session"].flatMap { $0.isEmpty ? nil : $0 })
        let results: [Account: [String: String]] = [
            .groupBaton: member,
            .ordinary: try await run(.ordinary, bus: bus, foreignSession: memberSession),
            .root: try await run(.root, bus: bus, foreignSession: memberSession),
        ]
        for row in table {
            for (column, account) in [Account.ordinary, .groupBaton, .root].enumerated() {
                let result = try #require(results[account]?[row.call], "\(account) did not run \(row.call)")
                if row.call.hasPrefix("Suggestion1.") {
                    // No suggestion exists on a host without a ring: the bus lets every account's call
                    // through to batond (the policy is not the gate), and batond answers that the object
                    // is not there. Its check of the caller is requireRingUser, the one Ring1.Continue's
                    // row runs (and PolkitTests with a real polkitd).
                    #expect(result == "org.freedesktop.DBus.Error.UnknownObject", "\(row.call) as \(account): got \(result)")
                    continue
                }
                #expect(Self.wasAllowed(result) == row.allowed[column],
                        "\(row.call) as \(account): got \(result), documented \(row.allowed[column] ? "yes" : "no")")
            }
        }
        // batond, not the bus, refuses ordinary users (no polkitd runs on this bus: group baton only).
        #expect(results[.ordinary]?["Pairing1.Accept"] == "org.baton.Error.NotPermitted")
        #expect(results[.ordinary]?["Ring1.Continue"] == "org.baton.Error.NotPermitted")
        #expect(results[.groupBaton]?["PairingSession1.Confirm (own session)"] == "org.baton.Error.NotReady")
        #expect(results[.groupBaton]?["PairingSession1.Confirm (another user's session)"] == "org.baton.Error.NotPermitted")
        #expect(results[.groupBaton]?["PairingSession1.Code (another user's session, Get)"] == "org.baton.Error.NotPermitted")
        // The daemon survived every refusal.
        #expect(try await client.nameHasOwner("org.baton"))
    }
}
