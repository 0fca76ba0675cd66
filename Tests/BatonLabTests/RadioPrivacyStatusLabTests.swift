// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

/// batond reads whether the adapter uses LE privacy from the kernel (mgmt Read Controller
/// Information, current settings bit 13) and says so in `baton status` and `baton doctor`. Runs in
/// the default boot (scripts/lab/main.conf: privacy off) and in the privacy boot
/// (main-privacy.conf: `Privacy = device`), and batond runs without any capability, as under its
/// unit (CapabilityBoundingSet= empty). Named after PrivacyLabTests: that one needs the boot's
/// first use of hci0 (docs/lab.md), and this suite runs on hci1 anyway.
@Suite(.serialized, .enabled(if: Lab.isInside, "needs the BlueZ lab VM (LAB_VM=1)"))
struct RadioPrivacyStatusLabTests {
    @Test func statusSaysWhetherTheAdapterUsesLEPrivacy() async throws {
        let lab = try DaemonPair()
        defer { lab.stop() }
        // No capabilities at all: bounding, inheritable and ambient sets empty (root keeps uid 0 only).
        try lab.start(name: "gamma", adapter: "hci1",
                      launcher: ["/usr/bin/setpriv", "--bounding-set", "-all", "--inh-caps", "-all", "--ambient-caps", "-all", "--"])
        let pid = try #require(lab.named["gamma"]?.processIdentifier)
        var capabilities: [String] = []
        #expect(await lab.eventually(20) {
            let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            capabilities = text.split(separator: "\n").filter { $0.hasPrefix("CapEff:") || $0.hasPrefix("CapBnd:") || $0.hasPrefix("CapPrm:") }.map(String.init)
            return capabilities.count == 3 && text.contains("Name:\tbatond")
        })
        #expect(capabilities.allSatisfy { $0.hasSuffix("0000000000000000") }, "batond runs with capabilities: \(capabilities)")

        var status: [String: Any] = [:]
        let said = await lab.eventually(60) {
            guard let (code, out, _) = try? await lab.cli("baton", "gamma", ["--json", "status"]), code == 0 else { return false }
            status = jsonObject(Substring(out))
            return status["LEPrivacy"] != nil
        }
        #expect(said, "status never said LEPrivacy: \(status)\ngamma log:\n\(lab.log("gamma"))")
        let text = try await lab.cli("baton", "gamma", ["status"]).1
        let doctor = try await lab.cli("baton", "gamma", ["--json", "doctor"]).1
        let findings = ((try? JSONSerialization.jsonObject(with: Data(doctor.utf8))) as? [[String: Any]]) ?? []
        let privacy = findings.first { $0["Check"] as? String == "privacy" }
        if Lab.privacyConfigured {
            #expect(status["LEPrivacy"] as? String == "on", "\(status)")
            #expect(status["LEPrivacyDetail"] == nil, "\(status)")
            #expect(text.contains("Privacy:  LE privacy on"), "\(text)")
            #expect(privacy?["Result"] as? String == "ok", "\(doctor)")
        } else {
            // Off, and gamma sends connectable adverts (a pairing advert over BLE; the ring advert
            // too, with only a loopback TCP listener): the words say so, with the fix.
            #expect(status["LEPrivacy"] as? String == "off", "\(status)")
            let detail = status["LEPrivacyDetail"] as? String ?? ""
            #expect(detail.contains("public address") && detail.contains("Privacy = device") && detail.contains("/etc/bluetooth/main.conf"), "\(status)")
            #expect(text.contains("Privacy:  LE privacy off (LE privacy is off:"), "\(text)")
            #expect(privacy?["Result"] as? String == "warning", "\(doctor)")
            #expect((privacy?["Fix"] as? String ?? "").contains("Privacy = device"), "\(doctor)")
        }
    }
}
