// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

/// Issue 23 (both pairing sides protected), the L2CAP side in the lab: an acceptor keeps its
/// pairing advert and its L2CAP listener until its person typed the second code, and a second
/// initiator over Bluetooth before that fails the session as `contested` (docs/protocol.md §7.2,
/// docs/dbus-api.md Pairing1.Accept). Off the lab only the TCP listener can be raced
/// (PairingDefenceTests). alpha (hci0) accepts and its person has not typed yet; beta (hci1)
/// finds alpha's advert and pairs over L2CAP, its person types alpha's code; then gamma (hci2)
/// still finds alpha's advert and dials it over L2CAP too. Needs 3 controllers.
@Suite(.serialized, .enabled(if: Lab.isInside && Lab.controllers >= 3, "needs the BlueZ lab VM (LAB_VM=1) with 3 controllers"))
struct PairingContestLabTests {
    @Test func aSecondInitiatorOverL2CAPBeforeTheAcceptorTypedFailsEverySessionAsContested() async throws {
        let lab = try DaemonPair()
        defer { lab.stop() }
        try lab.start(name: "alpha", adapter: "hci0")
        try lab.start(name: "beta", adapter: "hci1")
        try lab.start(name: "gamma", adapter: "hci2")
        for name in ["alpha", "beta", "gamma"] {
            #expect(await lab.eventually(10) { (try? await lab.cli("bt-pair", name, ["list"]))?.0 == 0 })
        }

        // alpha's person runs `bt-pair accept` and has not typed the second code yet (standard input
        // stays open and silent).
        let address = lab.address
        let alphaAccept = Task {
            try await runTool(product("bt-pair"), ["--bus", address, "--bus-name", "org.baton.alpha", "accept"]) {
                try? await Task.sleep(for: .seconds(600))
                return nil
            }
        }
        // beta finds alpha's pairing advert over the air and pairs over L2CAP; its person types the
        // code alpha shows, so beta's session now shows the second code.
        func bleEntry(_ daemon: String) async throws -> [String: Any]? {
            let (_, out, _) = try await lab.cli("bt-pair", daemon, ["--json", "discover", "--seconds", "2"])
            let entries = ((try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [[String: Any]]) ?? []
            return entries.first { $0["Name"] as? String == "alpha" && $0["Transport"] as? String == "ble" && ($0["Psm"] as? Int ?? 0) != 0 }
        }
        #expect(try await lab.eventually(30) { try await bleEntry("beta") != nil }, "alpha log:\n\(lab.log("alpha"))")
        let betaWith = Task { try await lab.pairWith("beta", acceptor: "alpha", ["alpha"]) }
        let betaShowsSecondCode = try await lab.eventually(120) {
            try await DaemonPair.confirmingCode(address: address, daemon: "beta") != nil
        }
        #expect(betaShowsSecondCode, "beta log:\n\(lab.log("beta"))\nalpha log:\n\(lab.log("alpha"))\n\(lab.timeline)")

        // The advert is still on the air: gamma finds it and dials alpha over L2CAP as well.
        #expect(try await lab.eventually(30) { try await bleEntry("gamma") != nil },
                "alpha's pairing advert left the air before its person typed\nalpha log:\n\(lab.log("alpha"))")
        let (gammaStatus, _, gammaErr) = try await lab.pairWith("gamma", acceptor: "alpha", ["alpha"])

        let (alphaStatus, _, alphaErr) = try await alphaAccept.value
        let (betaStatus, _, betaErr) = try await betaWith.value
        #expect(alphaStatus != 0 && alphaErr.contains("contested"), "alpha: \(alphaStatus) \(alphaErr)\nalpha log:\n\(lab.log("alpha"))")
        #expect(betaStatus != 0, "beta: \(betaErr)")
        #expect(gammaStatus != 0, "gamma: \(gammaErr)")
        #expect(lab.log("alpha").contains("over L2CAP"), "alpha log:\n\(lab.log("alpha"))")
        // Nothing joined anywhere.
        for name in ["alpha", "beta", "gamma"] {
            let (_, out, _) = try await lab.cli("bt-pair", name, ["--json", "list"])
            let members = (((try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [[String: Any]]) ?? []).compactMap { $0["Name"] as? String }
            #expect(members == [name], "\(name) lists \(members)")
        }
    }
}
