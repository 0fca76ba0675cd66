// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// The first 16 bytes of SHA-256(identity public key) (protocol §1).
public struct DeviceID: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    public static let byteCount = 16
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(WireError) {
        guard bytes.count == Self.byteCount else { throw .malformed("device id length") }
        self.bytes = bytes
    }

    public init(identityKey: [UInt8]) {
        self.bytes = Array(SHA256.hash(identityKey).prefix(Self.byteCount))
    }

    /// 8 hex digits as `xxxx-xxxx`, what people see and type.
    public var shortForm: String {
        let hex = Array(bytes.prefix(4)).hexString
        return String(hex.prefix(4)) + "-" + String(hex.suffix(4))
    }

    public var description: String { bytes.hexString }

    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let raw = [UInt8](hex: text), raw.count == Self.byteCount else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "device id")
        }
        self.bytes = raw
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(bytes.hexString)
    }
}
