// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore
import Foundation
import Testing

/// Connectable adverts (the pairing advert, a ring advert without an IP endpoint) with BlueZ's
/// `Privacy = device`: heard from a resolvable private address that rotates, never from the
/// adapter's identity address (docs/security.md, protocol §8.3). Runs only in a lab booted with
/// scripts/lab/main-privacy.conf (docs/lab.md "LE privacy run").
@Suite(.serialized, .enabled(if: Lab.isInside && Lab.privacyConfigured, "needs the lab with main-privacy.conf"))
struct PrivacyLabTests {
    /// A resolvable private address: random, the two most significant bits 0b01.
    static func isResolvable(_ address: String, type: String) -> Bool {
        guard type == "random", let first = UInt8(address.prefix(2), radix: 16) else { return false }
        return first & 0xC0 == 0x40
    }

    @Test func connectableAdvertsComeFromARotatingResolvablePrivateAddress() async throws {
        // A short RPA lifetime (kernel debugfs, at least 30 s) so the rotation shows within the test.
        // It only applies to a private address made after it: this must be the boot's first use of hci0.
        _ = try? Lab.runHelper(["sh", "-c", "mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug; "
                                    + "echo 30 > /sys/kernel/debug/bluetooth/hci0/rpa_timeout"])
        let advert = try PairingAdvert(sessionID: Array(1...8), tcpPublished: false, psm: 0x0081, name: "privacy").encoded
        let advertiser = try await BlueZRadio(adapter: "hci0")
        let scanner = try await BlueZRadio(adapter: "hci1")
        let identity = try #require(await advertiser.adapterAddress())
        let heard = EventRecorder(scanner)
        try await scanner.startScanning()
        try await advertiser.advertise(companyID: Lab.companyID, data: advert, connectable: true)
        let first = try #require(await heard.first(from: 0, within: .seconds(15)) { $0.carries(advert) }?.event.report)
        #expect(Self.isResolvable(first.address.description, type: first.addressType?.name ?? ""), "\(first.address) \(first.addressType?.name ?? "none")")
        #expect(first.address != identity.address)
        // After the RPA lifetime, the next registration (batond re-registers at every epoch
        // rotation, and the kernel's default lifetime is one epoch) comes from a new private address.
        let lifetime = (try? String(contentsOfFile: "/sys/kernel/debug/bluetooth/hci0/rpa_timeout", encoding: .utf8)) ?? "unreadable"
        print("lab: hci0 rpa_timeout \(lifetime.trimmingCharacters(in: .whitespacesAndNewlines))")
        try await Task.sleep(for: .seconds(35))
        let next = try PairingAdvert(sessionID: Array(9...16), tcpPublished: false, psm: 0x0081, name: "privacy").encoded
        let mark = await heard.count
        try await advertiser.advertise(companyID: Lab.companyID, data: next, connectable: true)
        let second = try #require(await heard.first(from: mark, within: .seconds(15)) { $0.carries(next) }?.event.report)
        #expect(Self.isResolvable(second.address.description, type: second.addressType?.name ?? ""), "\(second.address) \(second.addressType?.name ?? "none")")
        #expect(second.address != first.address)
        #expect(second.address != identity.address)
        await advertiser.close()
        await scanner.close()
    }
}
