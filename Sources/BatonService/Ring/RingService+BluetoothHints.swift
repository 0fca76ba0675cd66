import BatonCore
import BatonTransport

/// The BLE fallback of the transfer (§8.3): hints of the form "ble:ADDRESS/0xba" (and "/random" for a
/// random adapter address), the adapter the transfer listener binds, and the connectable ring advert.
extension RingService {
    /// The fixed dynamic PSM of the transfer listener, so that a hint learned at pairing stays valid
    /// across restarts ("BA" for Baton).
    static let transferPSM: UInt16 = 0x00BA

    static func bluetoothTransferEndpoint(_ address: BluetoothAddress, _ type: LEAddressType) -> String {
        "ble:\(address)/0x\(String(transferPSM, radix: 16))" + (type == .random ? "/random" : "")
    }

    /// Address, address type and PSM of a "ble:" hint; nil for anything else.
    static func splitBluetoothEndpoint(_ text: String) -> (BluetoothAddress, LEAddressType, UInt16)? {
        let random = text.hasSuffix("/random")
        guard let (address, psm) = splitBluetoothTarget(random ? String(text.dropLast("/random".count)) : text) else { return nil }
        return (address, random ? .random : .public, psm)
    }
}
