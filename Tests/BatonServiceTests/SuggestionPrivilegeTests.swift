// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// Suggestion1 calls made as `nobody`: one `step=result` line each (the D-Bus error name on failure).
let suggestionClientScript = #"""
import sys
import dbus
address, name, path = sys.argv[1], sys.argv[2], sys.argv[3]
bus = dbus.bus.BusConnection(address)
for method in ("Continue", "ContinueInBrowser", "Dismiss"):
    try:
        value = bus.call_blocking(name, path, "org.baton.Suggestion1", method, "", [])
        print("%s=%s" % (method, value), flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s" % (method, error.get_dbus_name()), flush=True)
"""#

/// A suggestion is a ring member's activity and the ring is the machine's: another local user
/// (not root, not group baton) may not continue, open or dismiss it, even on a bus without the
/// shipped policy; the machine's ring user still can (docs/dbus-api.md, docs/security.md).
@Suite("BatonServiceTests: suggestions are for the machine's ring users", .serialized)
struct SuggestionPrivilegeTests {
    @Test func aSecondUnixUsersContinueIsRefused() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await HandoffNode.start(bus, name: "alpha"), b = try await HandoffNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a.node, b.node, client: client)
        let presence = try #require(a.radio.lastAdvert)
        let (handlerApp, handler) = try await registerHandler(on: b.node, bus: bus)
        defer { handlerApp.close() }
        let source = try FakeSourceApp(bus: bus)
        try await source.publish(on: a.node)
        #expect(await eventually(timeout: .seconds(15)) { a.radio.lastAdvert != presence })
        b.radio.hear(try #require(a.radio.lastAdvert))
        #expect(try await eventually(timeout: .seconds(15)) { try await suggestions(on: b.node, client: client).count == 1 })
        let path = try #require(try await suggestions(on: b.node, client: client).keys.first)

        let results = try await runAsNobody(script: suggestionClientScript, in: bus.directory, arguments: [bus.address, b.node.busName, path])
        #expect(results["Continue"] == "org.baton.Error.NotPermitted")
        #expect(results["ContinueInBrowser"] == "org.baton.Error.NotPermitted")
        #expect(results["Dismiss"] == "org.baton.Error.NotPermitted")
        // Nothing was delivered or withdrawn for nobody's calls.
        #expect(handler.members.isEmpty)
        #expect(try await suggestions(on: b.node, client: client).keys.contains(path))

        // The machine's ring user (root here) continues it.
        let reply = try await client.call(destination: b.node.busName, path: path, interface: BatonInterface.suggestion, method: "Continue")
        #expect(reply == [.string("delivered")])
        source.connection.close()
        await a.node.stop()
        await b.node.stop()
    }
}
