// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport

/// The BLE fallback of the transfer (§8.3): hints of the form "ble:ADDRESS/0xba" (and "/random" for a
/// random adapter address), the adapter the transfer listener binds, and the connectable ring advert.
extension RingService {
    /// The fixed dynamic PSM of the transfer listener, so that a hint learned at pairing stays valid
    /// across restarts ("BA" for Baton).
    static let transferPSM: UInt16 = Endpoint.transferPSM

    static func bluetoothTransferEndpoint(_ address: BluetoothAddress, _ type: LEAddressType) -> String {
        Endpoint.bluetoothTransfer(address: address, type: type).description
    }

    /// Address, address type and PSM of a "ble:" hint; nil for anything else.
    static func splitBluetoothEndpoint(_ text: String) -> (BluetoothAddress, LEAddressType, UInt16)? {
        guard case .bluetooth(let address, let type, let psm)? = try? Endpoint(parsing: text) else { return nil }
        return (address, type, psm)
    }
}
