// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore
import Foundation
import Testing

/// Advert intervals and TX power (issue 15): bluetoothd honours LEAdvertisement1's MinInterval,
/// MaxInterval and TxPower without experimental mode from 5.77 on, and 5.66 ignores them. The
/// radio must pick its path from what the advertising manager offers, and be heard either way.
/// The lab runs this on Debian 12's 5.66 and Debian 13's 5.82 (scripts/lab/test --bluez).
@Suite(.serialized, .enabled(if: Lab.isInside, "needs the BlueZ lab VM (LAB_VM=1)"))
struct AdvertParametersLabTests {
    /// "5.82" -> (5, 82); the lab exports the started bluetoothd's own `--version`.
    static var bluetoothdVersion: (major: Int, minor: Int)? {
        let parts = (ProcessInfo.processInfo.environment["LAB_BLUEZ_VERSION"] ?? "").split(separator: ".").compactMap { Int($0) }
        return parts.count >= 2 ? (parts[0], parts[1]) : nil
    }

    @Test func advertParametersFollowTheBluetoothdVersionAndTheAdvertIsHeard() async throws {
        let version = try #require(Self.bluetoothdVersion, "LAB_BLUEZ_VERSION missing")
        // The lab starts bluetoothd without -E unless asked, so only the version decides.
        let offersParameters = version.major > 5 || (version.major == 5 && version.minor >= 77)
        let advertiser = try await BlueZRadio(options: BlueZRadioOptions(adapter: "hci0", advertTxPower: -4))
        let scanner = try await BlueZRadio(adapter: "hci1")
        let own = EventRecorder(advertiser)
        let heard = EventRecorder(scanner)
        try await scanner.startScanning()

        let advert: [UInt8] = (0..<20).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 3) }
        try await advertiser.advertise(companyID: 0x0BA8, data: advert, connectable: false)
        let status = await advertiser.status()
        print("LAB advert parameters: bluetoothd \(version.major).\(version.minor), offers interval \(status.offersAdvertInterval), "
              + "TxPower \(status.offersAdvertTxPower), the advert carried \(status.appliedAdvertParameters)")
        #expect(await heard.first(from: 0, within: .seconds(10)) { $0.carries(advert, companyID: 0x0BA8) } != nil,
                "advert not heard on bluetoothd \(version.major).\(version.minor)")

        #expect(status.offersAdvertInterval == offersParameters, "\(status)")
        let applied = Set(status.appliedAdvertParameters)
        #expect(applied.isSuperset(of: ["MinInterval", "MaxInterval"]) == offersParameters, "\(applied)")
        // TxPower needs the controller too; either way it is sent exactly where it is offered.
        #expect(applied.contains("TxPower") == status.offersAdvertTxPower, "\(applied)")
        if !offersParameters {
            #expect(!status.offersAdvertTxPower)
            #expect(applied.isEmpty)
            #expect(await own.notices(from: 0).contains { $0.contains("not set") && $0.contains("interval") })
        }
        await advertiser.close()
        await scanner.close()
    }
}
