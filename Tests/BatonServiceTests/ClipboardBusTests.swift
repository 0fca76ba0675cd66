// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import BatonService
import BatonServiceFakes
import BatonSystem
import BatonTestBus
import Foundation
import Glibc
import Synchronization
import Testing

/// The clipboard through batond's D-Bus API, two paired daemons: an agent registers and offers a
/// copy on alpha; beta's radio hears alpha's advert; beta's agent is handed the offer; its Paste
/// pulls the bytes then, over the ring connection (docs/clipboard.md, docs/dbus-api.md "Clipboard").
@Suite struct ClipboardBusTests {
    /// An agent's ClipboardAgent1 object: what batond handed it.
    final class AgentObject: Sendable {
        let offers = Mutex<[(token: UInt64, device: String, items: [ClipboardItem])]>([])
        let withdrawn = Mutex<[UInt64]>([])

        func interface() -> DBusInterface {
            DBusInterface(BatonInterface.clipboardAgent, methods: [
                DBusMethod(OrgBaton.ClipboardAgent1.offered) { [self] call in
                    let (token, device, _, items) = try OrgBaton.ClipboardAgent1.offered.decodeArguments(call.arguments)
                    offers.withLock { $0.append((token, device, items)) }
                    return []
                },
                DBusMethod(OrgBaton.ClipboardAgent1.withdrawn) { [self] call in
                    let token = try OrgBaton.ClipboardAgent1.withdrawn.decodeArguments(call.arguments)
                    withdrawn.withLock { $0.append(token) }
                    return []
                },
            ])
        }
    }

    func call<A, R>(_ connection: DBusConnection, _ node: TransferNode, _ contract: MethodContract<A, R>, _ arguments: A) async throws -> R {
        try contract.decodeReply(try await connection.call(destination: node.busName, path: BatonObjectPath.clipboard, interface: contract.interface,
                                                           method: contract.name, arguments: contract.encodeArguments(arguments)))
    }

    @Test func aCopyOfferedOverDBusIsHandedToTheSameAccountAndPastedAtThePaste() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let radioA = FakeRadio(), radioB = FakeRadio()
        let a = try await TransferNode.start(bus, name: "alpha", radio: radioA), b = try await TransferNode.start(bus, name: "beta", radio: radioB)
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        try await pair(a, b, client: client)

        // Each machine's agent (this test's account on both) registers its object.
        let agentA = try DBusConnection(bus: .address(bus.address)), agentB = try DBusConnection(bus: .address(bus.address))
        defer { agentA.close(); agentB.close() }
        let objectB = AgentObject()
        try await agentA.export([AgentObject().interface()], at: "/agent")
        try await agentB.export([objectB.interface()], at: "/agent")
        // Not registered yet: the clipboard is off for the account.
        let text = Array("copied on alpha".utf8)
        let file = try SealedMemoryFile.make(name: "copy", bytes: text)
        let items = [try ClipboardItem(mediaType: "text/plain;charset=utf-8", size: UInt64(text.count))]
        await #expect(throws: DBusError.self) { try await call(agentA, a, OrgBaton.Clipboard1.offer, (.text, items, 0, file.rawValue)) }
        try await call(agentA, a, OrgBaton.Clipboard1.registerAgent, "/agent")
        try await call(agentB, b, OrgBaton.Clipboard1.registerAgent, "/agent")

        let before = radioA.lastAdvert
        try await call(agentA, a, OrgBaton.Clipboard1.offer, (.text, items, 0, file.rawValue))
        #expect(await a.parts.clipboard.offeredKind == .text)
        // The new advert (a new revision with the kind) is heard by beta.
        #expect(await eventually(timeout: .seconds(120)) { radioA.lastAdvert != before })
        radioB.hear(try #require(radioA.lastAdvert))
        #expect(await eventually(timeout: .seconds(120)) { !objectB.offers.withLock { $0.isEmpty } })
        let offer = try #require(objectB.offers.withLock { $0.first })
        #expect(offer.device == "alpha" && offer.items == items)
        // GetStatus, each account its own: alpha's copy was asked for by beta and pasted nowhere;
        // beta holds it for the account, fetched only at a paste.
        var status = try await call(agentA, a, OrgBaton.Clipboard1.getStatus, ())
        #expect(status.registered && status.offer?.kind == .text && status.offer?.items == items)
        #expect(status.offer?.askedBy == ["beta"] && status.offer?.pastedOn == [] && status.pastesAnswered == 0, "\(status)")
        let held = try await call(agentB, b, OrgBaton.Clipboard1.getStatus, ())
        #expect(held.taken?.device == "alpha" && held.taken?.items == items && held.offer == nil, "\(held)")
        // `baton clipboard status` says the same in words and in JSON.
        let home = bus.directory.appendingPathComponent("home-cli")
        try FileManager.default.createDirectory(at: home.appendingPathComponent("config/baton"), withIntermediateDirectories: true)
        try "clipboard = on\n".write(to: home.appendingPathComponent("config/baton/publishers.conf"), atomically: true, encoding: .utf8)
        let environment = ["PATH": "/usr/bin:/bin", "HOME": home.path, "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
                           "XDG_RUNTIME_DIR": home.path]
        func cli(_ arguments: [String]) async throws -> (Int32, String, String) {
            try await runTool(productPath("baton"), ["--bus", bus.address, "--bus-name", a.busName] + arguments, environment: environment)
        }
        var (code, out, err) = try await cli(["clipboard", "status"])
        #expect(code == 0, "\(err)")
        #expect(out.contains("batond (\(a.busName)): offers your text copy for ") && out.contains("; its types were asked for by beta; pasted nowhere (no byte of it left this machine)"), "\(out)")

        // The paste pulls the bytes now, into a sealed memfd.
        let pasted = try await call(agentB, b, OrgBaton.Clipboard1.paste, (offer.token, "text/plain;charset=utf-8"))
        let received = FileDescriptor(taking: pasted)
        #expect(SealedMemoryFile.immutableSize(of: received) == UInt64(text.count))
        var bytes = [UInt8](repeating: 0, count: text.count)
        let read = try bytes.withUnsafeMutableBytes { try received.readFully(into: $0, at: 0) }
        #expect(read == text.count && bytes == text)
        status = try await call(agentA, a, OrgBaton.Clipboard1.getStatus, ())
        #expect(status.offer?.pastedOn == [ClipboardPaste(device: "beta", mediaType: "text/plain;charset=utf-8", size: UInt64(text.count))])
        #expect(status.offersAnswered == 1 && status.pastesAnswered == 1, "\(status)")
        (code, out, err) = try await cli(["--json", "clipboard", "status"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], "\(out)\(err)")
        let daemon = try #require(json["Daemon"] as? [String: Any], "\(out)")
        let pastedOn = (daemon["Offer"] as? [String: Any])?["PastedOn"] as? [[String: Any]]
        #expect(pastedOn?.count == 1 && pastedOn?.first?["Device"] as? String == "beta" && pastedOn?.first?["Size"] as? Int == text.count, "\(out)")
        #expect(daemon["PastesAnswered"] as? Int == 1 && json["DaemonProblem"] is NSNull, "\(out)")
        // Another name on the bus: said in words, the rest of the status still there.
        (code, out, err) = try await runTool(productPath("baton"), ["--bus", bus.address, "--bus-name", "org.baton.test.nobody", "clipboard"],
                                             environment: environment)
        #expect(code == 0 && out.contains("clipboard: on") && out.contains("batond: asking batond about the clipboard failed: batond (org.baton.test.nobody) is not running"), "\(out)\(err)")
        // A token the account was never handed, and a type not offered, are refused in words.
        await #expect(throws: DBusError.self) { _ = try await call(agentB, b, OrgBaton.Clipboard1.paste, (offer.token &+ 1, "text/plain;charset=utf-8")) }
        await #expect(throws: DBusError.self) { _ = try await call(agentB, b, OrgBaton.Clipboard1.paste, (offer.token, "image/png")) }

        // Alpha's agent takes the copy back: the advert loses the kind and beta's agent is told.
        let withBefore = radioA.lastAdvert
        try await call(agentA, a, OrgBaton.Clipboard1.withdraw, ())
        #expect(await eventually(timeout: .seconds(120)) { radioA.lastAdvert != withBefore })
        radioB.hear(try #require(radioA.lastAdvert))
        #expect(await eventually(timeout: .seconds(120)) { objectB.withdrawn.withLock { $0 } == [offer.token] })
        await a.stop()
        await b.stop()
    }
}
