// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto

/// The on-disk container for a `DurableRecord`, all integers big-endian:
///
///     offset  size  field
///          0     8  magic "BATONREC"
///          8     2  format version (this layout: 1)
///         10     2  reserved, must be 0
///         12     4  schema version of the body's value
///         16     8  body length in bytes
///         24    32  SHA-256 over bytes 0..<24 followed by the body
///         56     …  body (JSON)
///
/// The digest covers the header fields as well as the body, so a flipped bit in the schema version
/// or length reads as corruption rather than as a plausible different file.
enum RecordFormat {
    static let magic: [UInt8] = Array("BATONREC".utf8)
    static let formatVersion: UInt16 = 1
    static let headerSize = 56
    private static let digestedHeaderSize = 24
    private static let digestSize = 32

    static func encode(body: [UInt8], schemaVersion: UInt32) throws(StoreError) -> [UInt8] {
        var bytes = magic
        bytes.reserveCapacity(headerSize + body.count)
        append(UInt64(formatVersion), width: 2, to: &bytes)
        append(0, width: 2, to: &bytes)
        append(UInt64(schemaVersion), width: 4, to: &bytes)
        append(UInt64(body.count), width: 8, to: &bytes)
        let digest = try sha256(bytes[0..<digestedHeaderSize], body[...])
        bytes.append(contentsOf: digest)
        bytes.append(contentsOf: body)
        return bytes
    }

    /// Validates the container and returns the schema version and body.
    static func decode(
        _ bytes: [UInt8], file: String, supportedSchemaVersion: UInt32
    ) throws(StoreError) -> (schemaVersion: UInt32, body: ArraySlice<UInt8>) {
        guard !bytes.isEmpty else { throw .corrupt(file: file, reason: "empty file") }
        guard bytes.count >= magic.count, bytes[0..<magic.count].elementsEqual(magic) else {
            throw .corrupt(file: file, reason: "wrong magic: not a Baton record")
        }
        guard bytes.count >= headerSize else {
            throw .corrupt(file: file, reason: "truncated header: \(bytes.count) of \(headerSize) bytes")
        }
        let format = UInt32(readInteger(bytes, at: 8, width: 2))
        // A newer layout may place everything below differently, so this is checked first.
        if format > UInt32(formatVersion) {
            throw .unsupportedVersion(file: file, kind: .format, found: format, supported: UInt32(formatVersion))
        }
        guard format == UInt32(formatVersion) else {
            throw .corrupt(file: file, reason: "format version \(format) does not exist")
        }
        let declaredLength = readInteger(bytes, at: 16, width: 8)
        let actualLength = UInt64(bytes.count - headerSize)
        guard declaredLength == actualLength else {
            throw .corrupt(file: file, reason: "header declares a \(declaredLength)-byte body, file holds \(actualLength) bytes")
        }
        let body = bytes[headerSize...]
        let stored = bytes[digestedHeaderSize..<(digestedHeaderSize + digestSize)]
        let computed = try sha256(bytes[0..<digestedHeaderSize], body)
        guard stored.elementsEqual(computed) else {
            throw .corrupt(file: file, reason: "SHA-256 mismatch")
        }
        guard readInteger(bytes, at: 10, width: 2) == 0 else {
            throw .corrupt(file: file, reason: "reserved header field is not zero")
        }
        let schema = UInt32(readInteger(bytes, at: 12, width: 4))
        guard schema >= 1 else { throw .corrupt(file: file, reason: "schema version 0 does not exist") }
        guard schema <= supportedSchemaVersion else {
            throw .unsupportedVersion(file: file, kind: .schema, found: schema, supported: supportedSchemaVersion)
        }
        return (schema, body)
    }

    private static func append(_ value: UInt64, width: Int, to bytes: inout [UInt8]) {
        for index in stride(from: width - 1, through: 0, by: -1) {
            bytes.append(UInt8(truncatingIfNeeded: value >> (UInt64(index) * 8)))
        }
    }

    /// Callers guarantee `offset + width <= bytes.count`.
    private static func readInteger(_ bytes: [UInt8], at offset: Int, width: Int) -> UInt64 {
        var value: UInt64 = 0
        for byte in bytes[offset..<(offset + width)] { value = value << 8 | UInt64(byte) }
        return value
    }

    /// SHA-256 of `first` followed by `second` (BatonCrypto, which stops the process if libcrypto
    /// fails rather than return a wrong digest; `digestFailed` stays for callers' exhaustive switches).
    static func sha256(_ first: ArraySlice<UInt8>, _ second: ArraySlice<UInt8>) throws(StoreError) -> [UInt8] {
        SHA256.hash(Array(first) + Array(second))
    }
}
