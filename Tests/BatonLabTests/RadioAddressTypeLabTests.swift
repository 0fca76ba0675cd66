// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore
import Foundation
import Testing

/// The address type a connectable advert is reported with, which an L2CAP connect needs (an RPA
/// dialled as public never connects): "public" from hci0's identity address by default, "random"
/// from a resolvable private address with scripts/lab/main-privacy.conf (docs/lab.md "LE privacy run").
/// Named to run after PrivacyLabTests (suites run in name order): any use of hci0 under privacy arms
/// its private address's 900 s lifetime, which PrivacyLabTests' shorter one would then not replace.
@Suite(.serialized, .enabled(if: Lab.isInside, "needs the BlueZ lab VM (LAB_VM=1)"))
struct RadioAddressTypeLabTests {
    var expectedType: LEAddressType { Lab.privacyConfigured ? .random : .public }


    /// A device bluetoothd already knew when the radio started is reported only through
    /// PropertiesChanged, which carries no AddressType: the radio reads it (it reported "unknown").
    @Test func aDeviceKnownBeforeTheRadioStartedIsReportedWithItsAddressType() async throws {
        let advert = try PairingAdvert(sessionID: Array(21...28), tcpPublished: false, psm: 0x0082, name: "types").encoded
        let advertiser = try await BlueZRadio(adapter: "hci1")
        let earlier = try await BlueZRadio(adapter: "hci0")
        let earlierHeard = EventRecorder(earlier)
        try await earlier.startScanning()
        try await advertiser.advertise(companyID: Lab.companyID, data: advert, connectable: true)
        let first = try #require(await earlierHeard.first(from: 0, within: .seconds(15)) { $0.carries(advert) }?.event.report)
        #expect(first.addressType == expectedType, "\(first.address) \(first.addressType?.name ?? "none")")

        // A new radio on the same adapter while bluetoothd still has the device object (temporary
        // devices outlive a stopped discovery by 30 s).
        await earlier.close()
        let later = try await BlueZRadio(adapter: "hci0")
        let laterHeard = EventRecorder(later)
        try await later.startScanning()
        // New data from the same device: bluetoothd reports a change of a device it already has as
        // PropertiesChanged (an unchanged advert may not be reported again at all, which made this
        // test wait in vain in a full lab run).
        let changed = try PairingAdvert(sessionID: Array(31...38), tcpPublished: false, psm: 0x0082, name: "types").encoded
        try await advertiser.advertise(companyID: Lab.companyID, data: changed, connectable: true)
        let again = try #require(await laterHeard.first(from: 0, within: .seconds(15)) { $0.carries(changed) }?.event.report)
        #expect(again.address == first.address)
        #expect(again.addressType == expectedType, "\(again.address) \(again.addressType?.name ?? "none")")
        await later.close()
        await advertiser.close()
    }
}
