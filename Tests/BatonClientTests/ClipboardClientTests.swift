// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonSystem
import BatonTestBus
import Foundation
import Testing

/// BatonClient's clipboard calls against a real batond: what works, and failures in words a person
/// can act on (docs/dbus-api.md, "Clipboard").
@Suite("BatonClient: the clipboard calls")
struct ClipboardClientTests {
    @Test("offer, restrict, withdraw and paste for the caller's account; refusals say what to do")
    func callsAndRefusals() async throws {
        try await withDaemon { daemon in
            let connection = BatonConnection(connection: try DBusConnection(bus: .address(daemon.bus.address)), busName: daemon.busName)
            defer { connection.close() }
            let text = Array("hello".utf8)
            let file = try SealedMemoryFile.make(name: "copy", bytes: text)
            let items = [try ClipboardItem(mediaType: "text/plain;charset=utf-8", size: UInt64(text.count))]

            // Off until an agent registers: the error names the command that turns it on.
            do throws(BatonClientError) {
                try await connection.offerClipboard(kind: .text, items: items, contents: file.rawValue)
                Issue.record("an offer without an agent was taken")
            } catch {
                #expect(error.code == .notPermitted)
                #expect(error.message == "offering the copy to the ring failed: the clipboard is off for this account: turn it on with `baton clipboard enable`")
            }

            try await connection.registerClipboardAgent(ClipboardAgentHandlers(offered: { _ in }, withdrawn: { _ in }))
            try await connection.offerClipboard(kind: .text, items: items, contents: file.rawValue)
            try await connection.restrictClipboard(localOnly: false, expiresIn: 30)
            try await connection.withdrawClipboard()
            // Contents that do not match the items are refused before anything is offered.
            let short = try SealedMemoryFile.make(name: "short", bytes: [1])
            do throws(BatonClientError) {
                try await connection.offerClipboard(kind: .text, items: items, contents: short.rawValue)
                Issue.record("contents shorter than the items were taken")
            } catch {
                #expect(error.code == .invalidArguments && error.message.hasPrefix("offering the copy to the ring failed: the contents hold 1 bytes"))
            }
            // A token never handed over.
            do throws(BatonClientError) {
                _ = try await connection.pasteBytes(token: 42, mediaType: "text/plain;charset=utf-8", limit: 1024)
                Issue.record("a paste of nothing succeeded")
            } catch {
                #expect(error.code == .unknownObject)
                #expect(error.message.hasPrefix("pasting text/plain;charset=utf-8 failed: no such copy for this account"))
            }
            try await connection.unregisterClipboardAgent()
        }
    }

    @Test("without batond: the failure says that it is not running and how to start it")
    func noDaemon() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let connection = BatonConnection(connection: try DBusConnection(bus: .address(bus.address)), busName: "org.baton.Absent")
        defer { connection.close() }
        do throws(BatonClientError) {
            try await connection.withdrawClipboard()
            Issue.record("a call without batond succeeded")
        } catch {
            #expect(error.message == "taking the copy back failed: batond (org.baton.Absent) is not running; start it (systemctl start batond)", "\(error)")
            #expect(!error.message.contains("org.freedesktop.DBus"))
        }
    }
}
