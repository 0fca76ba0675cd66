// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonAPI
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// Reads PairingSession1 properties of another user's session as `nobody` and prints `name=value`
/// (or the D-Bus error name). argv: bus address, bus name, session path.
let foreignSessionReaderScript = #"""
import sys
import dbus

address, name, path = sys.argv[1], sys.argv[2], sys.argv[3]
bus = dbus.bus.BusConnection(address)
for prop in ["State", "Code", "PeerName", "PeerId", "PeerMembers", "PeerRemovals", "PeerGenerations"]:
    try:
        value = bus.call_blocking(name, path, "org.freedesktop.DBus.Properties", "Get", "ss",
                                  ["org.baton.PairingSession1", prop])
        if isinstance(value, dbus.Array):
            value = ",".join(str(item) for item in value)
        print("%s=%s" % (prop, value), flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s" % (prop, error.get_dbus_name()), flush=True)
"""#

/// Red-team attacks by another local Unix user, formed from security.md's adversary table: an
/// account outside group `baton` "can: call the D-Bus API; read suggestion objects' properties";
/// reading another user's pairing session is not among what it can do.
@Suite("BatonServiceTests: red team, other local users", .serialized)
struct RedTeamLocalUserTests {
    /// Attack: while root pairs, an unprivileged user (nobody) reads the session's Code, the peer's
    /// name and id and, in review, the members of the peer's ring, through Properties.Get (which
    /// dbus/org.baton.conf allows every account). Fixed: the daemon checks the caller (NotPermitted).
    @Test func anUnprivilegedUserReadsTheCodeAndPeerRingOfRootsPairingSession() async throws {
        try #require(getuid() == 0, "runs as root (CI does) so that nobody is another user")
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let started = try await startPairing(a, b, client: client)
        try await confirmBothCodes(a, b, started, client: client)
        #expect(try await eventually(timeout: .seconds(10)) { try await a.property(client, started.pathA, "State").stringValue == "reviewing" })

        let seen = try await runAsNobody(script: foreignSessionReaderScript, in: bus.directory,
                                         arguments: [bus.address, a.busName, started.pathA])
        #expect(seen["State"] != nil, "the reader ran")
        for name in ["Code", "PeerName", "PeerId", "PeerMembers", "PeerRemovals", "PeerGenerations"] {
            #expect(seen[name] == ErrorName.notPermitted, "\(name) read by nobody: \(seen[name] ?? "missing")")
        }
        // The owner (root here) still reads the real thing.
        #expect(try await a.property(client, started.pathA, "Code").stringValue == started.codeA)
        _ = try? await a.call(client, BatonInterface.pairingSession, "Cancel", path: started.pathA)
        _ = try? await b.call(client, BatonInterface.pairingSession, "Cancel", path: started.pathB)
    }
}
