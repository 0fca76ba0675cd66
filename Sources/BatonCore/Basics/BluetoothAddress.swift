// SPDX-License-Identifier: LGPL-2.1-or-later
/// Why text or bytes are not a Bluetooth address.
public enum BluetoothAddressError: Error, Hashable, Sendable {
    case wrongByteCount(Int)
    /// The offending text, cut to 32 characters (it may come from the radio or a D-Bus caller).
    case notAnAddress(String)
}

/// A Bluetooth device address, most significant byte first, as written "00:AA:01:00:00:01".
public struct BluetoothAddress: Hashable, Sendable, CustomStringConvertible {
    /// Six bytes in display order (the kernel stores them reversed, see `L2CAPSocketAddress`).
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(BluetoothAddressError) {
        guard bytes.count == 6 else { throw .wrongByteCount(bytes.count) }
        self.bytes = bytes
    }

    /// Parses six colon-separated pairs of hex digits (either case).
    public init(_ text: String) throws(BluetoothAddressError) {
        // 17 characters exactly: longer text is refused before it is split.
        guard text.utf8.count == 17 else { throw .notAnAddress(String(text.prefix(32))) }
        var bytes: [UInt8] = []
        for group in text.split(separator: ":", omittingEmptySubsequences: false) {
            guard group.count == 2, group.allSatisfy(\.isHexDigit), let byte = UInt8(group, radix: 16) else {
                throw .notAnAddress(String(text.prefix(32)))
            }
            bytes.append(byte)
        }
        guard bytes.count == 6 else { throw .notAnAddress(String(text.prefix(32))) }
        self.bytes = bytes
    }

    public var description: String {
        bytes.map { byte in
            let digits = String(byte, radix: 16, uppercase: true)
            return digits.count == 1 ? "0" + digits : digits
        }.joined(separator: ":")
    }
}

/// The LE address types. Raw values are the kernel's `BDADDR_LE_PUBLIC`/`BDADDR_LE_RANDOM`, which
/// an L2CAP socket address carries.
public enum LEAddressType: UInt8, Hashable, Sendable {
    case `public` = 1
    case random = 2

    /// BlueZ's Device1.AddressType / Adapter1.AddressType spelling.
    public var name: String { self == .public ? "public" : "random" }

    /// "public" or "random"; nil for anything else.
    public init?(name: String) {
        switch name {
        case "public": self = .public
        case "random": self = .random
        default: return nil
        }
    }

    /// BlueZ's report, where anything but "random" has always been taken as public.
    public init(reported: String) { self = reported == "random" ? .random : .public }
}
