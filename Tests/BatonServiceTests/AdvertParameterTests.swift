// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonDBus
import BatonTestBus
import Synchronization
import Testing

/// Issue 15: BlueZRadio sends MinInterval/MaxInterval only where the advertising manager has
/// SupportedCapabilities (bluetoothd 5.77+, or -E before), and TxPower only where SupportedFeatures
/// lists CanSetTxPower. A fake bluetoothd reads back the advert object's properties at
/// registration, as the real one does. The real versions run in the lab (AdvertParametersLabTests).
@Suite("BatonServiceTests: advert parameters follow what bluetoothd offers", .serialized)
struct AdvertParameterTests {
    /// Registers one advert against a fake manager with the given extra properties and returns
    /// the advert's properties as the fake read them, and the radio's status after.
    func register(managerProperties: [DBusProperty], txPower: Int16?) async throws -> ([String: DBusValue], BlueZRadioStatus) {
        let bus = try TestBus()
        defer { bus.stop() }
        let fake = try DBusConnection(bus: .address(bus.address))
        defer { fake.close() }
        let seen = Mutex<[String: DBusValue]>([:])
        try fake.addObjectManager(at: "/")
        let adapter = DBusInterface("org.bluez.Adapter1", methods: [], properties: [
            DBusProperty("Powered", signature: "b") { .boolean(true) },
            DBusProperty("Address", signature: "s") { .string("00:11:22:33:44:66") },
        ])
        let manager = DBusInterface("org.bluez.LEAdvertisingManager1", methods: [
            DBusMethod("RegisterAdvertisement", in: [DBusArgument("advertisement", "o"), DBusArgument("options", "a{sv}")]) { [fake] call in
                let reply = try await fake.call(destination: call.sender, path: call.arguments.first?.objectPathValue ?? "/",
                                                interface: "org.freedesktop.DBus.Properties", method: "GetAll",
                                                arguments: [.string("org.bluez.LEAdvertisement1")])
                var properties: [String: DBusValue] = [:]
                for (key, value) in reply.first?.dictionaryValue ?? [:] { if let name = key.stringValue { properties[name] = value } }
                seen.withLock { $0 = properties }
                return []
            },
            DBusMethod("UnregisterAdvertisement", in: [DBusArgument("advertisement", "o")]) { _ in [] },
        ], properties: [DBusProperty("SupportedInstances", signature: "y") { .byte(4) }] + managerProperties)
        try await fake.export([adapter, manager], at: "/org/bluez/hci0")
        _ = try await fake.requestName("org.bluez", flags: [.doNotQueue])

        let radio = try await BlueZRadio(options: BlueZRadioOptions(bus: .address(bus.address), advertTxPower: txPower))
        try await radio.advertise(companyID: 0xFFFF, data: [0x15, 1], connectable: false)
        let status = await radio.status()
        await radio.close()
        return (seen.withLock { $0 }, status)
    }

    static let capabilities = DBusProperty("SupportedCapabilities", signature: "a{sv}") {
        .propertyDictionary(["MaxAdvLen": .byte(31)])
    }
    static func features(_ names: [String]) -> DBusProperty {
        DBusProperty("SupportedFeatures", signature: "as") { .stringArray(names) }
    }

    @Test func bluetoothd566WithoutExperimentalGetsNoParameters() async throws {
        let (advert, status) = try await register(managerProperties: [], txPower: -4)
        #expect(advert["Type"]?.stringValue == "broadcast", "\(advert)")
        #expect(advert["MinInterval"] == nil && advert["MaxInterval"] == nil && advert["TxPower"] == nil, "\(advert)")
        #expect(!status.offersAdvertInterval && !status.offersAdvertTxPower)
        #expect(status.appliedAdvertParameters.isEmpty)
    }

    @Test func newerBluetoothdGetsTheIntervalsAndTxPowerWhereTheControllerCan() async throws {
        let (advert, status) = try await register(managerProperties: [Self.capabilities, Self.features(["CanSetTxPower"])], txPower: -4)
        #expect(advert["MinInterval"]?.uint32Value == BlueZRadioOptions.handoffAdvertInterval.lowerBound, "\(advert)")
        #expect(advert["MaxInterval"]?.uint32Value == BlueZRadioOptions.handoffAdvertInterval.upperBound, "\(advert)")
        #expect(advert["TxPower"]?.int16Value == -4, "\(advert)")
        #expect(status.offersAdvertInterval && status.offersAdvertTxPower)
        #expect(Set(status.appliedAdvertParameters) == ["MinInterval", "MaxInterval", "TxPower"])
    }

    @Test func aControllerWithoutTxPowerControlGetsOnlyTheIntervals() async throws {
        let (advert, status) = try await register(managerProperties: [Self.capabilities, Self.features([])], txPower: -4)
        #expect(advert["MinInterval"] != nil && advert["MaxInterval"] != nil, "\(advert)")
        #expect(advert["TxPower"] == nil, "\(advert)")
        #expect(status.offersAdvertInterval && !status.offersAdvertTxPower)
        #expect(Set(status.appliedAdvertParameters) == ["MinInterval", "MaxInterval"])
    }
}
