import BatonCore
import BatonTransport

/// The text forms of pairing targets and endpoint hints ("host:port", "ble:ADDRESS/PSM").
extension RingService {
    /// "ble:AA:BB:CC:DD:EE:FF/PSM", the PSM in decimal or 0x-prefixed hex, within the dynamic range.
    static func splitBluetoothTarget(_ text: String) -> (BluetoothAddress, UInt16)? {
        guard text.hasPrefix("ble:"), let slash = text.lastIndex(of: "/") else { return nil }
        let addressText = text[text.index(text.startIndex, offsetBy: 4)..<slash]
        let psmText = text[text.index(after: slash)...]
        let psm = psmText.lowercased().hasPrefix("0x") ? UInt16(psmText.dropFirst(2), radix: 16) : UInt16(psmText)
        guard let psm, L2CAPSocketAddress.dynamicPSMs.contains(psm), let address = try? BluetoothAddress(String(addressText)) else { return nil }
        return (address, psm)
    }

    /// "host:port" or "[v6]:port".
    static func splitEndpoint(_ text: String) -> (String, UInt16)? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]), port > 0 else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }
}
