// SPDX-License-Identifier: LGPL-2.1-or-later
/// Bounds-checked reading of untrusted bytes. Every read either succeeds or throws
/// `WireError.truncated`; nothing here can trap on hostile input.
public struct ByteReader: Sendable {
    public let bytes: [UInt8]
    public private(set) var offset: Int
    private let end: Int

    public init(_ bytes: [UInt8], from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        self.offset = max(0, min(start, bytes.count))
        self.end = max(self.offset, min(end ?? bytes.count, bytes.count))
    }

    public var remaining: Int { end - offset }
    public var isAtEnd: Bool { offset == end }

    public mutating func readByte() throws(WireError) -> UInt8 {
        guard remaining >= 1 else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func readBytes(_ count: Int) throws(WireError) -> [UInt8] {
        guard count >= 0, remaining >= count else { throw .truncated }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    public mutating func readUInt16() throws(WireError) -> UInt16 {
        UInt16(truncatingIfNeeded: try readBigEndian(2))
    }

    public mutating func readUInt32() throws(WireError) -> UInt32 {
        UInt32(truncatingIfNeeded: try readBigEndian(4))
    }

    public mutating func readUInt64() throws(WireError) -> UInt64 {
        try readBigEndian(8)
    }

    public mutating func readBigEndian(_ width: Int) throws(WireError) -> UInt64 {
        guard width <= 8, remaining >= width else { throw .truncated }
        var value: UInt64 = 0
        for index in offset..<offset + width { value = value << 8 | UInt64(bytes[index]) }
        offset += width
        return value
    }

    /// Throws `trailingBytes` unless everything was consumed.
    public func expectEnd() throws(WireError) {
        guard isAtEnd else { throw .trailingBytes }
    }
}

/// Appends big-endian integers; used by every encoder.
extension Array where Element == UInt8 {
    public mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        let big = value.bigEndian
        Swift.withUnsafeBytes(of: big) { append(contentsOf: $0) }
    }

    public mutating func appendBigEndian(_ value: UInt64, width: Int) {
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }
}

extension String {
    /// ASCII/UTF-8 bytes of a protocol label.
    @inlinable public var utf8Bytes: [UInt8] { Array(utf8) }
}
