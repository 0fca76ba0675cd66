// SPDX-License-Identifier: LGPL-2.1-or-later
/// Property-list values, the only types `userInfo` may hold (§6.4).
public indirect enum PropertyValue: Hashable, Sendable {
    case string(String)
    case integer(Int64)
    case double(Double)
    case boolean(Bool)
    case bytes([UInt8])
    /// Seconds since 1970-01-01T00:00:00Z.
    case date(Double)
    case array([PropertyValue])
    case dictionary([String: PropertyValue])

    public static let maxDepth = 16
    public static let maxUserInfoBytes = 65_536

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var integerValue: Int64? { if case .integer(let i) = self { return i }; return nil }
    public var bytesValue: [UInt8]? { if case .bytes(let b) = self { return b }; return nil }
    public var boolValue: Bool? { if case .boolean(let b) = self { return b }; return nil }
    public var dictionaryValue: [String: PropertyValue]? { if case .dictionary(let d) = self { return d }; return nil }
    public var arrayValue: [PropertyValue]? { if case .array(let a) = self { return a }; return nil }

    /// Nesting depth; a scalar has depth 1.
    public var depth: Int {
        switch self {
        case .array(let items): return 1 + (items.map(\.depth).max() ?? 0)
        case .dictionary(let entries): return 1 + (entries.values.map(\.depth).max() ?? 0)
        default: return 1
        }
    }
}

enum ValueTag: UInt8 {
    case string = 0x01, integer, double, falseValue, trueValue, bytes, date, array, dictionary
}

/// Canonical binary encoding of property values (§6.4).
public enum PropertyValueCodec {
    /// Encodes a value, refusing NaN, over-deep values and values over `limit` bytes.
    public static func encode(_ value: PropertyValue, limit: Int = Int.max) throws(WireError) -> [UInt8] {
        guard value.depth <= PropertyValue.maxDepth else { throw .tooDeep(limit: PropertyValue.maxDepth) }
        var out: [UInt8] = []
        try append(value, to: &out)
        guard out.count <= limit else { throw .payloadTooLarge(limit: limit, actual: out.count) }
        return out
    }

    /// Decodes exactly one value filling `bytes`.
    public static func decode(_ bytes: [UInt8], limit: Int = Int.max) throws(WireError) -> PropertyValue {
        guard bytes.count <= limit else { throw .payloadTooLarge(limit: limit, actual: bytes.count) }
        var reader = ByteReader(bytes)
        let value = try read(&reader, depth: 1)
        try reader.expectEnd()
        return value
    }

    static func append(_ value: PropertyValue, to out: inout [UInt8]) throws(WireError) {
        switch value {
        case .string(let s):
            out.append(ValueTag.string.rawValue)
            appendLengthPrefixed(Array(s.utf8), to: &out)
        case .integer(let i):
            out.append(ValueTag.integer.rawValue)
            out.appendBigEndian(i)
        case .double(let d):
            guard !d.isNaN else { throw .malformed("NaN") }
            out.append(ValueTag.double.rawValue)
            out.appendBigEndian(d.bitPattern)
        case .boolean(let b):
            out.append(b ? ValueTag.trueValue.rawValue : ValueTag.falseValue.rawValue)
        case .bytes(let b):
            out.append(ValueTag.bytes.rawValue)
            appendLengthPrefixed(b, to: &out)
        case .date(let d):
            guard !d.isNaN else { throw .malformed("NaN") }
            // A date is a point in time: an infinite one names none (§6.4).
            guard d.isFinite else { throw .malformed("date not finite") }
            out.append(ValueTag.date.rawValue)
            out.appendBigEndian(d.bitPattern)
        case .array(let items):
            out.append(ValueTag.array.rawValue)
            out.appendBigEndian(UInt32(items.count))
            for item in items { try append(item, to: &out) }
        case .dictionary(let entries):
            out.append(ValueTag.dictionary.rawValue)
            out.appendBigEndian(UInt32(entries.count))
            let sorted = entries.map { (key: Array($0.key.utf8), value: $0.value) }
                .sorted { $0.key.lexicographicallyPrecedes($1.key) }
            for entry in sorted {
                appendLengthPrefixed(entry.key, to: &out)
                try append(entry.value, to: &out)
            }
        }
    }

    static func appendLengthPrefixed(_ bytes: [UInt8], to out: inout [UInt8]) {
        out.appendBigEndian(UInt32(bytes.count))
        out.append(contentsOf: bytes)
    }

    static func read(_ reader: inout ByteReader, depth: Int) throws(WireError) -> PropertyValue {
        guard depth <= PropertyValue.maxDepth else { throw .tooDeep(limit: PropertyValue.maxDepth) }
        let rawTag = try reader.readByte()
        guard let tag = ValueTag(rawValue: rawTag) else { throw .malformed("value type \(rawTag)") }
        switch tag {
        case .string: return .string(try readString(&reader))
        case .integer: return .integer(Int64(bitPattern: try reader.readUInt64()))
        case .double, .date:
            let d = Double(bitPattern: try reader.readUInt64())
            guard !d.isNaN else { throw .malformed("NaN") }
            guard tag == .double || d.isFinite else { throw .malformed("date not finite") }
            return tag == .double ? .double(d) : .date(d)
        case .falseValue: return .boolean(false)
        case .trueValue: return .boolean(true)
        case .bytes: return .bytes(try readLengthPrefixed(&reader))
        case .array:
            let count = Int(try reader.readUInt32())
            // Every value takes at least one byte: a count beyond what remains is a lie.
            guard count <= reader.remaining else { throw .truncated }
            var items: [PropertyValue] = []
            items.reserveCapacity(count)
            for _ in 0..<count { items.append(try read(&reader, depth: depth + 1)) }
            return .array(items)
        case .dictionary:
            let count = Int(try reader.readUInt32())
            guard count <= reader.remaining / 5 else { throw .truncated }
            var entries: [String: PropertyValue] = [:]
            entries.reserveCapacity(count)
            var previousKey: [UInt8]?
            for _ in 0..<count {
                let keyBytes = try readLengthPrefixed(&reader)
                if let previousKey, !previousKey.lexicographicallyPrecedes(keyBytes) {
                    throw .malformed("dictionary keys not strictly ascending")
                }
                previousKey = keyBytes
                guard let key = String(validating: keyBytes, as: UTF8.self) else { throw .malformed("key not UTF-8") }
                // Swift compares strings by canonical equivalence: two byte-distinct keys can collide.
                guard entries[key] == nil else { throw .malformed("duplicate key") }
                entries[key] = try read(&reader, depth: depth + 1)
            }
            return .dictionary(entries)
        }
    }

    static func readLengthPrefixed(_ reader: inout ByteReader) throws(WireError) -> [UInt8] {
        let length = Int(try reader.readUInt32())
        return try reader.readBytes(length)
    }

    static func readString(_ reader: inout ByteReader) throws(WireError) -> String {
        let bytes = try readLengthPrefixed(&reader)
        guard let string = String(validating: bytes, as: UTF8.self) else { throw .malformed("string not UTF-8") }
        return string
    }
}
