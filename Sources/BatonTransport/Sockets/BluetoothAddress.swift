// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import CBluetooth
import Glibc

/// `struct sockaddr_l2` for an LE channel, built byte by byte because the header's struct mixes a packed
/// `bdaddr_t` into an unpacked struct and stores the address reversed: family (u16), PSM (u16,
/// little-endian), address (6 bytes, least significant first), CID (u16, little-endian, 0 = use the PSM),
/// address type (u8), one byte of padding.
public struct L2CAPSocketAddress: Hashable, Sendable, CustomStringConvertible {
    /// `sizeof(struct sockaddr_l2)`.
    public static let byteCount = 14
    /// LE PSMs a service may pick without an assigned number (Core spec: dynamic range 0x0080–0x00FF).
    public static let dynamicPSMs: ClosedRange<UInt16> = 0x80...0xFF

    public var address: BluetoothAddress
    public var addressType: LEAddressType
    /// 0 lets the kernel choose (a connecting socket's local side).
    public var psm: UInt16

    public init(address: BluetoothAddress, addressType: LEAddressType, psm: UInt16) {
        self.address = address
        self.addressType = addressType
        self.psm = psm
    }

    public var bytes: [UInt8] {
        let family = UInt16(AF_BLUETOOTH)
        var bytes: [UInt8] = [UInt8(family & 0xFF), UInt8(family >> 8), UInt8(psm & 0xFF), UInt8(psm >> 8)]
        bytes += address.bytes.reversed()
        bytes += [0, 0, addressType.rawValue, 0]
        return bytes
    }

    /// Reads what the kernel wrote (accept, getpeername). Only LE addresses are accepted.
    public init(bytes: some Collection<UInt8>) throws(TransportError) {
        let bytes = Array(bytes)
        guard bytes.count >= Self.byteCount else { throw .addressUnavailable("sockaddr_l2 of \(bytes.count) bytes") }
        guard UInt16(bytes[0]) | UInt16(bytes[1]) << 8 == UInt16(AF_BLUETOOTH) else {
            throw .addressUnavailable("not an AF_BLUETOOTH address")
        }
        guard let type = LEAddressType(rawValue: bytes[12]) else {
            throw .addressUnavailable("not an LE address type: \(bytes[12])")
        }
        self.psm = UInt16(bytes[2]) | UInt16(bytes[3]) << 8
        guard let address = try? BluetoothAddress(bytes: bytes[4..<10].reversed()) else {
            throw .addressUnavailable("sockaddr_l2 without an address")
        }
        self.address = address
        self.addressType = type
    }

    public var description: String {
        "\(address) (\(addressType == .public ? "public" : "random"))" + (psm == 0 ? "" : " PSM 0x\(String(psm, radix: 16))")
    }

    func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        bytes.withUnsafeBytes { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
    }
}
