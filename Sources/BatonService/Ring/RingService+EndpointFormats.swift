// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport

/// The text forms of pairing targets and endpoint hints ("host:port", "ble:ADDRESS/PSM"), all
/// read through `Endpoint(parsing:)`.
extension RingService {
    /// A pairing target "ble:AA:BB:CC:DD:EE:FF/PSM", the PSM in decimal or 0x-prefixed hex, within
    /// the dynamic range (no "/random": the pairing advert tells the address type).
    static func splitBluetoothTarget(_ text: String) -> (BluetoothAddress, UInt16)? {
        guard !text.hasSuffix("/random"), case .bluetooth(let address, _, let psm)? = try? Endpoint(parsing: text) else { return nil }
        return (address, psm)
    }

    /// "host:port" or "[v6]:port".
    static func splitEndpoint(_ text: String) -> (String, UInt16)? {
        guard case .ip(let host, let port)? = try? Endpoint(parsing: text) else { return nil }
        return (host, port)
    }
}
