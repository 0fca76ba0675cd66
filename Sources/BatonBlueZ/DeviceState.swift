// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus

/// What the radio remembers of one Device1 object, so that a PropertiesChanged carrying only
/// the new RSSI or ManufacturerData still yields a complete report. Values from the bus are
/// checked and bounded; anything of the wrong type is ignored.
struct DeviceState: Sendable, Hashable {
    /// More manufacturer data entries or bytes than any legal advert carries are cut off.
    static let maxManufacturerEntries = 8
    static let maxManufacturerBytes = 251
    static let maxUUIDs = 32
    static let maxNameBytes = 248

    let path: String
    /// Parsed where BlueZ's text arrives: a malformed Address property is skipped (the one read
    /// from the object path, or none, stands), never carried on as text.
    var address: BluetoothAddress?
    /// Nil until BlueZ reports "public" or "random" (anything else is not carried on).
    var addressType: LEAddressType?
    var rssi: Int?
    var txPower: Int?
    var manufacturerData: [UInt16: [UInt8]] = [:]
    var serviceUUIDs: [String] = []
    var name: String?

    init(path: String) {
        self.path = path
    }

    /// Properties that change when an advert is heard (and so make a report).
    static func isAdvertProperty(_ name: String) -> Bool {
        switch name {
        case "ManufacturerData", "RSSI", "TxPower", "UUIDs", "Name": true
        default: false
        }
    }

    /// A device learnt from an advert, rather than from pairing or an earlier session.
    var carriesAdvert: Bool { rssi != nil || !manufacturerData.isEmpty }

    /// Nil while neither the Address property nor the object path gives a well-formed address:
    /// such a device is not reported.
    var report: AdvertisementReport? {
        guard let address = address ?? Self.address(fromPath: path) else { return nil }
        return AdvertisementReport(address: address, addressType: addressType, rssi: rssi, txPower: txPower,
                                   manufacturerData: manufacturerData, serviceUUIDs: serviceUUIDs, name: name)
    }

    mutating func apply(_ properties: [String: DBusValue]) {
        for (key, value) in properties {
            switch key {
            case "Address": if let text = value.stringValue, let parsed = try? BluetoothAddress(text) { address = parsed }
            case "AddressType": if let text = value.stringValue { addressType = LEAddressType(name: text) }
            case "RSSI": if let level = value.int16Value { rssi = Int(level) }
            case "TxPower": if let level = value.int16Value { txPower = Int(level) }
            case "ManufacturerData": if let data = Self.manufacturerData(value) { manufacturerData = data }
            case "UUIDs": if let uuids = value.stringArrayValue { serviceUUIDs = Array(uuids.prefix(Self.maxUUIDs)) }
            case "Name": if let text = value.stringValue { name = String(decoding: text.utf8.prefix(Self.maxNameBytes), as: UTF8.self) }
            default: break
            }
        }
    }

    /// Only who the device is (address and its type), never what it advertised.
    mutating func applyIdentity(_ properties: [String: DBusValue]) {
        apply(properties.filter { $0.key == "Address" || $0.key == "AddressType" })
    }

    mutating func invalidate(_ names: [String]) {
        for name in names {
            switch name {
            case "RSSI": rssi = nil
            case "TxPower": txPower = nil
            case "ManufacturerData": manufacturerData = [:]
            default: break
            }
        }
    }

    /// `a{qv}` with `ay` values.
    static func manufacturerData(_ value: DBusValue) -> [UInt16: [UInt8]]? {
        guard let entries = value.dictionaryValue else { return nil }
        var result: [UInt16: [UInt8]] = [:]
        for (key, data) in entries {
            guard result.count < maxManufacturerEntries else { break }
            guard let company = key.uint16Value, let bytes = data.bytesValue else { continue }
            result[company] = Array(bytes.prefix(maxManufacturerBytes))
        }
        return result
    }

    /// `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF` → `AA:BB:CC:DD:EE:FF`.
    static func address(fromPath path: String) -> BluetoothAddress? {
        guard let last = path.split(separator: "/").last, last.hasPrefix("dev_") else { return nil }
        return try? BluetoothAddress(last.dropFirst(4).replacingOccurrences(of: "_", with: ":"))
    }
}

extension Substring {
    fileprivate func replacingOccurrences(of target: Character, with replacement: Character) -> String {
        String(map { $0 == target ? replacement : $0 })
    }
}
