// SPDX-License-Identifier: LGPL-2.1-or-later
// Swift model of D-Bus values. Containers carry their element signatures so that empty arrays and
// dictionaries still marshal with the right type.

/// One D-Bus value of any type.
public indirect enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// A file descriptor. Received in a reply or an incoming call, it is a duplicate that the
    /// receiver owns and must close, unless the connection's `DBusDescriptorPolicy` closed it
    /// before (it then reads -1); in a signal or a `Properties` call it is always closed first.
    /// When sent, the message carries a duplicate and the sender keeps ownership.
    case unixFD(Int32)
    /// `a<elementSignature>`; every element must have exactly `elementSignature`.
    case array(elementSignature: String, [DBusValue])
    /// `a{<keySignature><valueSignature>}`; the key signature is a single basic type.
    case dictionary(keySignature: String, valueSignature: String, [DBusValue: DBusValue])
    /// `(...)`; must not be empty.
    case structure([DBusValue])
    case variant(DBusValue)

    /// The D-Bus type signature of this value.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _): "a{" + key + value + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }
}

// MARK: - Convenience constructors

extension DBusValue {
    /// `as`
    public static func stringArray(_ strings: [String]) -> DBusValue {
        .array(elementSignature: "s", strings.map { .string($0) })
    }

    /// `ao`
    public static func objectPathArray(_ paths: [String]) -> DBusValue {
        .array(elementSignature: "o", paths.map { .objectPath($0) })
    }

    /// `ay`
    public static func bytes<Bytes: Sequence>(_ bytes: Bytes) -> DBusValue where Bytes.Element == UInt8 {
        .array(elementSignature: "y", bytes.map { .byte($0) })
    }

    /// `a{sv}`: each value is wrapped in a variant.
    public static func propertyDictionary(_ properties: [String: DBusValue]) -> DBusValue {
        var entries: [DBusValue: DBusValue] = [:]
        for (key, value) in properties { entries[.string(key)] = .variant(value) }
        return .dictionary(keySignature: "s", valueSignature: "v", entries)
    }
}

// MARK: - Accessors (nil when the value has another type)

extension DBusValue {
    /// The value with any number of variant wrappers removed.
    public var unwrapped: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }

    public var byteValue: UInt8? { if case .byte(let v) = unwrapped { v } else { nil } }
    public var boolValue: Bool? { if case .boolean(let v) = unwrapped { v } else { nil } }
    public var int16Value: Int16? { if case .int16(let v) = unwrapped { v } else { nil } }
    public var uint16Value: UInt16? { if case .uint16(let v) = unwrapped { v } else { nil } }
    public var int32Value: Int32? { if case .int32(let v) = unwrapped { v } else { nil } }
    public var uint32Value: UInt32? { if case .uint32(let v) = unwrapped { v } else { nil } }
    public var int64Value: Int64? { if case .int64(let v) = unwrapped { v } else { nil } }
    public var uint64Value: UInt64? { if case .uint64(let v) = unwrapped { v } else { nil } }
    public var doubleValue: Double? { if case .double(let v) = unwrapped { v } else { nil } }
    public var unixFDValue: Int32? { if case .unixFD(let v) = unwrapped { v } else { nil } }

    /// The text of a string, object path or signature.
    public var stringValue: String? {
        switch unwrapped {
        case .string(let s), .objectPath(let s), .signature(let s): s
        default: nil
        }
    }

    public var objectPathValue: String? { if case .objectPath(let v) = unwrapped { v } else { nil } }
    public var variantValue: DBusValue? { if case .variant(let v) = self { v } else { nil } }
    public var structValue: [DBusValue]? { if case .structure(let v) = unwrapped { v } else { nil } }

    /// Elements of an array (`a?`), or nil for any other type (dictionaries included).
    public var arrayValue: [DBusValue]? { if case .array(_, let v) = unwrapped { v } else { nil } }

    /// Entries of a dictionary (`a{..}`).
    public var dictionaryValue: [DBusValue: DBusValue]? {
        if case .dictionary(_, _, let v) = unwrapped { v } else { nil }
    }

    /// `as` / `ao` / `ag` as Swift strings.
    public var stringArrayValue: [String]? {
        guard let elements = arrayValue else { return nil }
        var result: [String] = []
        result.reserveCapacity(elements.count)
        for element in elements {
            guard let s = element.stringValue else { return nil }
            result.append(s)
        }
        return result
    }

    /// `ay` as bytes.
    public var bytesValue: [UInt8]? {
        guard case .array("y", let elements) = unwrapped else { return nil }
        return elements.compactMap(\.byteValue)
    }

    /// A dictionary with string keys (typically `a{sv}`) as `[String: DBusValue]`.
    /// Variant values are unwrapped one level, so `a{sv}` gives the contained values.
    public var asDictionary: [String: DBusValue]? {
        guard case .dictionary(let keySignature, _, let entries) = unwrapped,
            keySignature == "s" || keySignature == "o"
        else { return nil }
        var result: [String: DBusValue] = [:]
        for (key, value) in entries {
            guard let name = key.stringValue else { return nil }
            result[name] = value.variantValue ?? value
        }
        return result
    }
}
