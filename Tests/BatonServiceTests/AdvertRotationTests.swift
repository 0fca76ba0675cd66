// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore
import BatonDBus
import BatonTestBus
import Synchronization
import Testing

/// A bluetoothd for host tests, on a private bus: one powered adapter with an advertising manager
/// that records Register/UnregisterAdvertisement in order and counts its free instances. A fake;
/// the real one runs in the lab.
final class FakeBlueZ: Sendable {
    /// What the fake controller holds: the calls in order and its free advert instances.
    final class Controller: Sendable {
        let calls = Mutex<[String]>([])
        let free: Mutex<UInt8>
        init(instances: UInt8) { free = Mutex(instances) }
    }

    let connection: DBusConnection
    let controller: Controller

    var log: [String] { controller.calls.withLock { $0 } }

    init(bus: TestBus, instances: UInt8) async throws {
        let controller = Controller(instances: instances)
        self.controller = controller
        connection = try DBusConnection(bus: .address(bus.address))
        try connection.addObjectManager(at: "/")
        let adapter = DBusInterface("org.bluez.Adapter1", methods: [
            DBusMethod("SetDiscoveryFilter", in: [DBusArgument("filter", "a{sv}")]) { _ in [] },
            DBusMethod("StartDiscovery") { _ in [] },
            DBusMethod("StopDiscovery") { _ in [] },
        ], properties: [
            DBusProperty("Powered", signature: "b") { .boolean(true) },
            DBusProperty("Address", signature: "s") { .string("00:11:22:33:44:55") },
            DBusProperty("AddressType", signature: "s") { .string("public") },
        ])
        let manager = DBusInterface("org.bluez.LEAdvertisingManager1", methods: [
            DBusMethod("RegisterAdvertisement", in: [DBusArgument("advertisement", "o"), DBusArgument("options", "a{sv}")]) { [controller] call in
                let granted = controller.free.withLock { count -> Bool in
                    guard count > 0 else { return false }
                    count -= 1
                    return true
                }
                guard granted else { throw DBusError(name: "org.bluez.Error.NotPermitted", message: "Maximum advertisements reached") }
                controller.calls.withLock { $0.append("register \(call.arguments.first?.objectPathValue ?? "?")") }
                return []
            },
            DBusMethod("UnregisterAdvertisement", in: [DBusArgument("advertisement", "o")]) { [controller] call in
                controller.free.withLock { $0 += 1 }
                controller.calls.withLock { $0.append("unregister \(call.arguments.first?.objectPathValue ?? "?")") }
                return []
            },
        ], properties: [
            DBusProperty("SupportedInstances", signature: "y") { [controller] in .byte(controller.free.withLock { $0 }) },
        ])
        try await connection.export([adapter, manager], at: "/org/bluez/hci0")
        _ = try await connection.requestName("org.bluez", flags: [.doNotQueue])
    }
}

/// Issue 13: with make-before-break on, at a rotation the next advert is registered before the
/// previous one is removed where the controller has a free instance; with one instance (or the
/// option off, batond's default) the old one goes first.
@Suite("BatonServiceTests: advert rotation is make-before-break", .serialized)
struct AdvertRotationTests {
    func rotate(instances: UInt8, makeBeforeBreak: Bool = true) async throws -> [String] {
        let bus = try TestBus()
        defer { bus.stop() }
        let bluez = try await FakeBlueZ(bus: bus, instances: instances)
        let radio = try await BlueZRadio(options: BlueZRadioOptions(bus: .address(bus.address), makeBeforeBreak: makeBeforeBreak))
        try await radio.startScanning()
        try await radio.advertise(companyID: 0xFFFF, data: [0x11, 1], connectable: false)
        try await radio.advertise(companyID: 0xFFFF, data: [0x11, 2], connectable: false)
        await radio.stopAdvertising()
        return bluez.log
    }

    @Test func withASecondInstanceTheNextAdvertIsRegisteredBeforeThePreviousGoes() async throws {
        let log = try await rotate(instances: 4)
        #expect(log.count == 4, "\(log)")
        guard log.count == 4 else { return }
        let first = log[0].replacingOccurrences(of: "register ", with: "")
        #expect(log[0].hasPrefix("register ") && log[1].hasPrefix("register ") && log[1] != log[0])
        #expect(log[2] == "unregister \(first)", "\(log)")
        #expect(log[3] == "unregister \(log[1].replacingOccurrences(of: "register ", with: ""))")
    }

    /// Off (batond's default until real controllers are checked): the previous advert goes first.
    @Test func withoutMakeBeforeBreakThePreviousAdvertGoesFirst() async throws {
        let log = try await rotate(instances: 4, makeBeforeBreak: false)
        #expect(log.count == 4 && log[1] == "unregister \(log[0].replacingOccurrences(of: "register ", with: ""))", "\(log)")
    }

    @Test func withOneInstanceThePreviousAdvertGoesFirst() async throws {
        let log = try await rotate(instances: 1)
        #expect(log.count == 4, "\(log)")
        guard log.count == 4 else { return }
        let first = log[0].replacingOccurrences(of: "register ", with: "")
        #expect(log[1] == "unregister \(first)", "\(log)")
        #expect(log[2].hasPrefix("register ") && log[2] != log[0])
    }
}
