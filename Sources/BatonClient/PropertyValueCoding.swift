import BatonCore
import BatonDBus

/// Property-list values <-> D-Bus values as docs/dbus-api.md specifies: integers as `x`, doubles as
/// `d`, bytes as `ay`, dates as `(sd)` with the tag "date", arrays as `av`, dictionaries as `a{sv}`.
/// Decoding also accepts the other documented forms (smaller integers, typed arrays, any string-keyed
/// dictionary) so that values from other clients read back correctly.
public enum PropertyValueCoding {
    public static let dateTag = "date"

    /// The canonical D-Bus form of `value` (not wrapped in a variant).
    public static func encode(_ value: PropertyValue) -> DBusValue {
        switch value {
        case .string(let string): .string(string)
        case .integer(let integer): .int64(integer)
        case .double(let double): .double(double)
        case .boolean(let boolean): .boolean(boolean)
        case .bytes(let bytes): .bytes(bytes)
        case .date(let seconds): .structure([.string(dateTag), .double(seconds)])
        case .array(let items): .array(elementSignature: "v", items.map { .variant(encode($0)) })
        case .dictionary(let entries): encodeDictionary(entries)
        }
    }

    /// `a{sv}`
    public static func encodeDictionary(_ entries: [String: PropertyValue]) -> DBusValue {
        .propertyDictionary(entries.mapValues(encode))
    }

    /// Reads a property-list value, refusing other D-Bus types, NaN, `t` beyond Int64 and nesting
    /// deeper than `PropertyValue.maxDepth`. Variants are unwrapped.
    public static func decode(_ value: DBusValue) throws(BatonClientError) -> PropertyValue {
        try decode(value, depth: 1, path: "userInfo")
    }

    /// Reads an `a{sv}` (or any string-keyed dictionary) of property-list values.
    public static func decodeDictionary(_ value: DBusValue) throws(BatonClientError) -> [String: PropertyValue] {
        guard case .dictionary(let entries) = try decode(value, depth: 1, path: "userInfo") else {
            throw invalid("userInfo", "is not a dictionary")
        }
        return entries
    }

    private static func invalid(_ path: String, _ problem: String) -> BatonClientError {
        BatonClientError(.invalidArguments, "\(path) \(problem)")
    }

    private static func decode(_ value: DBusValue, depth: Int, path: String) throws(BatonClientError) -> PropertyValue {
        guard depth <= PropertyValue.maxDepth else { throw invalid(path, "is nested deeper than \(PropertyValue.maxDepth)") }
        switch value.unwrapped {
        case .string(let string): return .string(string)
        case .byte(let v): return .integer(Int64(v))
        case .int16(let v): return .integer(Int64(v))
        case .uint16(let v): return .integer(Int64(v))
        case .int32(let v): return .integer(Int64(v))
        case .uint32(let v): return .integer(Int64(v))
        case .int64(let v): return .integer(v)
        case .uint64(let v):
            guard let integer = Int64(exactly: v) else { throw invalid(path, "is an unsigned integer beyond int64") }
            return .integer(integer)
        case .double(let v):
            guard !v.isNaN else { throw invalid(path, "is NaN") }
            return .double(v)
        case .boolean(let v): return .boolean(v)
        case .structure(let fields):
            guard fields.count == 2, case .string(dateTag) = fields[0], case .double(let seconds) = fields[1] else {
                throw invalid(path, "is a structure other than (sd) \"date\"")
            }
            guard !seconds.isNaN else { throw invalid(path, "is a NaN date") }
            return .date(seconds)
        case .array(let elementSignature, let elements):
            if elementSignature == "y" { return .bytes(elements.compactMap(\.byteValue)) }
            var items: [PropertyValue] = []
            items.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                items.append(try decode(element, depth: depth + 1, path: "\(path)[\(index)]"))
            }
            return .array(items)
        case .dictionary(let keySignature, _, let entries):
            guard keySignature == "s" else { throw invalid(path, "has non-string keys") }
            var result: [String: PropertyValue] = [:]
            result.reserveCapacity(entries.count)
            for (key, element) in entries {
                guard case .string(let name) = key else { throw invalid(path, "has non-string keys") }
                result[name] = try decode(element, depth: depth + 1, path: "\(path).\(name)")
            }
            return .dictionary(result)
        case .objectPath, .signature, .unixFD, .variant:
            throw invalid(path, "has D-Bus type '\(value.unwrapped.signature)', which is not a property-list type")
        }
    }
}
