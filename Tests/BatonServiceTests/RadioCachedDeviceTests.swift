// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore
import BatonDBus
import BatonTestBus
import Testing

/// bluetoothd keeps a device's last advert data in its cache after the advert left the air (a pairing
/// advert of an ended session, under the device's public address). A radio that first meets such a
/// device through PropertiesChanged reads its address type from the cache (an L2CAP connect to a
/// private address needs it) but must not report the cached advert as heard: a CI run dialled a
/// dead pairing session that way. A fake bluetoothd holds the stale device; the real one is in the lab.
@Suite("BatonServiceTests: cached advert data of a device is never reported as heard", .serialized)
struct RadioCachedDeviceTests {
    static let devicePath = "/org/bluez/hci0/dev_00_AA_01_00_00_00"

    @Test func aDeviceFirstSeenThroughAChangeReportsOnlyWhatWasHeard() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let fake = try DBusConnection(bus: .address(bus.address))
        defer { fake.close() }
        try fake.addObjectManager(at: "/")
        let adapter = DBusInterface("org.bluez.Adapter1", methods: [
            DBusMethod("SetDiscoveryFilter", in: [DBusArgument("filter", "a{sv}")]) { _ in [] },
            DBusMethod("StartDiscovery") { _ in [] },
            DBusMethod("StopDiscovery") { _ in [] },
        ], properties: [
            DBusProperty("Powered", signature: "b") { .boolean(true) },
            DBusProperty("Address", signature: "s") { .string("00:11:22:33:44:66") },
            DBusProperty("Discovering", signature: "b") { .boolean(true) },
        ])
        try await fake.export([adapter], at: "/org/bluez/hci0")
        let stale: [UInt8] = [0x12, 0xDE, 0xAD]
        let device = DBusInterface("org.bluez.Device1", properties: [
            DBusProperty("Address", signature: "s") { .string("00:AA:01:00:00:00") },
            DBusProperty("AddressType", signature: "s") { .string("random") },
            DBusProperty("RSSI", signature: "n") { .int16(-70) },
            DBusProperty("ManufacturerData", signature: "a{qv}") { Self.manufacturerData(0xFFFF, stale) },
        ])
        try await fake.export([device], at: Self.devicePath)
        _ = try await fake.requestName("org.bluez", flags: [.doNotQueue])

        let radio = try await BlueZRadio(options: BlueZRadioOptions(bus: .address(bus.address)))
        let reports = ReportCollector(radio.events())
        try await radio.startScanning()

        // A change of RSSI only: the device is near, but it advertised nothing this radio heard.
        try fake.emitPropertiesChanged(path: Self.devicePath, interface: "org.bluez.Device1", changed: ["RSSI": .int16(-48)])
        let first = try #require(await reports.next(within: .seconds(120)))
        #expect(first.address == (try BluetoothAddress("00:AA:01:00:00:00")))
        #expect(first.addressType == .random, "\(first)")
        #expect(first.rssi == -48)
        #expect(first.manufacturerData.isEmpty, "the cached advert was reported as heard: \(first.manufacturerData)")

        // Advert data heard now is reported.
        let fresh: [UInt8] = [0x12, 0x01, 0x02]
        try fake.emitPropertiesChanged(path: Self.devicePath, interface: "org.bluez.Device1",
                                       changed: ["ManufacturerData": Self.manufacturerData(0xFFFF, fresh)])
        let second = try #require(await reports.next(within: .seconds(120)))
        #expect(second.manufacturerData == [0xFFFF: fresh])
        #expect(second.addressType == .random)
        await radio.close()
    }

    /// BlueZ's text is parsed at the edge: a device whose Address property is not an address is
    /// reported under the address its object path names, and one with neither is skipped; the
    /// radio carries on (no crash, no "unknown" row).
    @Test func aMalformedAddressIsSkippedAtTheEdge() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let fake = try DBusConnection(bus: .address(bus.address))
        defer { fake.close() }
        try fake.addObjectManager(at: "/")
        let adapter = DBusInterface("org.bluez.Adapter1", methods: [
            DBusMethod("SetDiscoveryFilter", in: [DBusArgument("filter", "a{sv}")]) { _ in [] },
            DBusMethod("StartDiscovery") { _ in [] },
            DBusMethod("StopDiscovery") { _ in [] },
        ], properties: [
            DBusProperty("Powered", signature: "b") { .boolean(true) },
            DBusProperty("Address", signature: "s") { .string("00:11:22:33:44:66") },
            DBusProperty("Discovering", signature: "b") { .boolean(true) },
        ])
        try await fake.export([adapter], at: "/org/bluez/hci0")
        let nowhere = "/org/bluez/hci0/dev_bogus", fromPath = "/org/bluez/hci0/dev_00_AA_01_00_00_08"
        try await fake.export([DBusInterface("org.bluez.Device1", properties: [
            DBusProperty("Address", signature: "s") { .string("ZZ:not:an:address") },
            DBusProperty("AddressType", signature: "s") { .string("random") },
        ])], at: nowhere)
        try await fake.export([DBusInterface("org.bluez.Device1", properties: [
            DBusProperty("Address", signature: "s") { .string("00:AA:01:00:00:08:FF") },
            DBusProperty("AddressType", signature: "s") { .string("random") },
        ])], at: fromPath)
        _ = try await fake.requestName("org.bluez", flags: [.doNotQueue])

        let radio = try await BlueZRadio(options: BlueZRadioOptions(bus: .address(bus.address)))
        let reports = ReportCollector(radio.events())
        try await radio.startScanning()
        // Signals arrive in order: had the first device been reported, its report would come first.
        try fake.emitPropertiesChanged(path: nowhere, interface: "org.bluez.Device1", changed: ["RSSI": .int16(-40)])
        try fake.emitPropertiesChanged(path: fromPath, interface: "org.bluez.Device1", changed: ["RSSI": .int16(-41)])
        let report = try #require(await reports.next(within: .seconds(120)))
        #expect(report.address == (try BluetoothAddress("00:AA:01:00:00:08")), "\(report)")
        #expect(report.rssi == -41)
        await radio.close()
    }

    static func manufacturerData(_ company: UInt16, _ bytes: [UInt8]) -> DBusValue {
        .dictionary(keySignature: "q", valueSignature: "v", [.uint16(company): .variant(.bytes(bytes))])
    }
}

/// The radio's advert reports, one at a time.
final class ReportCollector: Sendable {
    let stream: AsyncStream<RadioEvent>
    init(_ stream: AsyncStream<RadioEvent>) { self.stream = stream }

    func next(within limit: Duration) async -> AdvertisementReport? {
        let stream = self.stream
        return await withTaskGroup(of: AdvertisementReport?.self) { group in
            group.addTask {
                for await event in stream { if case .report(let report) = event { return report } }
                return nil
            }
            group.addTask { try? await Task.sleep(for: limit); return nil }
            let result = await group.next() ?? nil
            group.cancelAll()
            return result
        }
    }
}
