// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonDBus
import Testing
@testable import BatonService

/// §8.3: with LE privacy a member's connectable advert comes from a rotating resolvable private
/// address, so the BLE transfer dials the address its sealed advert was last heard from, not the
/// `ble:` hint stored at pairing.
@Suite("BatonServiceTests: the BLE transfer dials where the member was heard", .serialized)
struct HeardAddressDialTests {
    @Test func aBluetoothHintIsReplacedByTheAddressTheSealedAdvertCameFrom() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await HandoffNode.start(bus, name: "alpha"), b = try await HandoffNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a.node, b.node, client: client)
        let idA = await a.node.deviceID
        let stored = Endpoint.bluetoothTransfer(address: try BluetoothAddress("00:AA:01:00:00:01"), type: .public)
        await b.node.ring.endpointWorked(idA, stored)
        let tcp = await b.node.ring.endpoints(of: idA).filter { !$0.hasPrefix("ble:") }
        #expect(await b.node.ring.endpoints(of: idA).contains(stored.description))

        // A stranger's advert from another address changes nothing; alpha's sealed advert does.
        b.radio.hear([UInt8](repeating: 0x11, count: 24), from: BluetoothAddress(testing: "5A:00:00:00:00:09"))
        b.radio.hear(try #require(a.radio.lastAdvert), from: BluetoothAddress(testing: "4B:22:33:44:55:66"))
        #expect(await eventually(timeout: .seconds(15)) { await b.node.ring.radio.heardEndpoint(of: idA) != nil })
        let dialled = await b.node.ring.endpoints(of: idA)
        #expect(!dialled.contains(stored.description))
        #expect(dialled.filter { $0.hasPrefix("ble:") } == ["ble:4B:22:33:44:55:66/0xba/random"])
        // The TCP hints keep their order.
        #expect(dialled.filter { !$0.hasPrefix("ble:") } == tcp)
        // A non-resolvable random address (top bits 0b00: a non-connectable advert) is not dialled.
        b.radio.hear(try #require(a.radio.lastAdvert), from: BluetoothAddress(testing: "3A:00:00:00:00:01"))
        try await Task.sleep(for: .milliseconds(300))
        #expect(await b.node.ring.endpoints(of: idA).filter { $0.hasPrefix("ble:") } == ["ble:4B:22:33:44:55:66/0xba/random"])
        await a.node.stop()
        await b.node.stop()
    }
}
