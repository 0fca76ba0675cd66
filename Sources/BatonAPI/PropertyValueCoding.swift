// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCore
import BatonDBus

/// Property-list values <-> D-Bus values as docs/dbus-api.md specifies, for the daemon and the
/// client alike. Encoding is canonical: integers `x`, doubles `d`, bytes `ay`, dates `(sd)` tagged
/// "date", arrays `av`, dictionaries `a{sv}`. Decoding also accepts the other documented forms
/// (smaller integers, typed arrays, any `a{s…}` of allowed values) and refuses anything without an
/// exact property-list meaning instead of dropping or coercing it. Refusals are `invalidArguments`
/// errors naming the offending value's path (`userInfo.key[2]`).
public enum PropertyValueCoding {
    public static let dateTag = "date"

    // MARK: Encoding

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
        case .dictionary(let entries): encodeUserInfo(entries)
        }
    }

    /// `a{sv}`
    public static func encodeUserInfo(_ entries: [String: PropertyValue]) -> DBusValue {
        .propertyDictionary(entries.mapValues(encode))
    }

    // MARK: Decoding

    /// One value (variants unwrapped); a top-level value has depth 1.
    public static func decode(_ value: DBusValue) throws(BatonAPIError) -> PropertyValue {
        try decode(value, depth: 1, path: "userInfo")
    }

    /// A userInfo dictionary: `a{sv}` or any string-keyed dictionary of allowed values.
    public static func decodeUserInfo(_ value: DBusValue) throws(BatonAPIError) -> [String: PropertyValue] {
        guard case .dictionary(let keySignature, _, _) = value.unwrapped, keySignature == "s" else {
            throw invalid("userInfo", "is not a dictionary with string keys (got '\(value.unwrapped.signature)')")
        }
        guard case .dictionary(let entries) = try decode(value, depth: 1, path: "userInfo") else {
            throw invalid("userInfo", "is not a dictionary")
        }
        return entries
    }

    private static func invalid(_ path: String, _ problem: String) -> BatonAPIError {
        BatonAPIError(.invalidArguments, "\(path) \(problem)")
    }

    private static func decode(_ value: DBusValue, depth: Int, path: String) throws(BatonAPIError) -> PropertyValue {
        guard depth <= PropertyValue.maxDepth else { throw invalid(path, "is nested deeper than \(PropertyValue.maxDepth)") }
        let value = value.unwrapped
        switch value {
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
                throw invalid(path, "is a structure '\(value.signature)'; only (sd) dates tagged \"date\" are allowed")
            }
            guard !seconds.isNaN else { throw invalid(path, "is a NaN date") }
            return .date(seconds)
        case .array(let elementSignature, let elements):
            if elementSignature == "y" { return .bytes(try byteArray(elements, path: path)) }
            // Checked up front so that empty arrays of refused types are refused too.
            try requireAllowed(signature: "a" + elementSignature, path: path)
            var items: [PropertyValue] = []
            items.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                items.append(try decode(element, depth: depth + 1, path: "\(path)[\(index)]"))
            }
            return .array(items)
        case .dictionary(let keySignature, let valueSignature, let entries):
            guard keySignature == "s" else { throw invalid(path, "has non-string keys ('\(keySignature)')") }
            try requireAllowed(signature: valueSignature, path: path)
            var result: [String: PropertyValue] = [:]
            result.reserveCapacity(entries.count)
            for (key, element) in entries {
                guard case .string(let name) = key else { throw invalid(path, "has non-string keys") }
                // Distinct D-Bus keys can be canonically equal Swift strings; refuse rather than lose one.
                guard result[name] == nil else { throw invalid(path, "has two keys that compare equal") }
                result[name] = try decode(element, depth: depth + 1, path: "\(path).\(name)")
            }
            return .dictionary(result)
        case .objectPath, .signature, .unixFD, .variant:
            throw invalid(path, "has D-Bus type '\(value.signature)', which is not a property-list type")
        }
    }

    /// An `ay`: every element must be a byte (a hand-built value could hold anything).
    private static func byteArray(_ elements: [DBusValue], path: String) throws(BatonAPIError) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard case .byte(let byte) = element else { throw invalid("\(path)[\(index)]", "is a non-byte inside a byte array") }
            bytes.append(byte)
        }
        return bytes
    }

    // MARK: Signatures

    /// Throws unless `signature` is one complete type that can only hold property-list values.
    static func requireAllowed(signature: String, path: String) throws(BatonAPIError) {
        var rest = Substring(signature)
        guard parseAllowed(&rest, nesting: 0), rest.isEmpty else {
            throw invalid(path, "has values of D-Bus type '\(signature)', which is not a property-list type")
        }
    }

    /// Consumes one allowed complete type from the front of `rest`.
    private static func parseAllowed(_ rest: inout Substring, nesting: Int) -> Bool {
        // D-Bus itself caps signatures at 64 nested containers; this only guards the recursion.
        guard nesting <= 64, let first = rest.first else { return false }
        rest = rest.dropFirst()
        switch first {
        case "s", "x", "i", "n", "y", "q", "u", "t", "d", "b", "v":
            return true
        case "(":
            guard rest.hasPrefix("sd)") else { return false }
            rest = rest.dropFirst(3)
            return true
        case "a":
            if rest.first == "{" {
                rest = rest.dropFirst()
                guard rest.first == "s" else { return false }
                rest = rest.dropFirst()
                guard parseAllowed(&rest, nesting: nesting + 1), rest.first == "}" else { return false }
                rest = rest.dropFirst()
                return true
            }
            return parseAllowed(&rest, nesting: nesting + 1)
        default:
            return false
        }
    }
}
