import BatonCore
import BatonDBus

/// Converts between D-Bus values and property-list values as docs/dbus-api.md specifies.
/// Refuses anything that has no exact property-list meaning instead of dropping or coercing it.
public enum UserInfoCoding {
    /// `a{sv}` (or any `a{s…}` of allowed values) to a userInfo dictionary.
    public static func decodeUserInfo(_ value: DBusValue) throws(RegistryError) -> [String: PropertyValue] {
        guard case .dictionary(let entries) = try decode(value, depth: 1) else {
            throw .invalidArguments("userInfo must be a dictionary with string keys, got '\(value.unwrapped.signature)'")
        }
        return entries
    }

    /// One value at nesting `depth` (a top-level value has depth 1).
    public static func decode(_ value: DBusValue, depth: Int) throws(RegistryError) -> PropertyValue {
        guard depth <= PropertyValue.maxDepth else {
            throw .invalidArguments("userInfo nests deeper than \(PropertyValue.maxDepth)")
        }
        switch value {
        case .variant(let inner):
            return try decode(inner, depth: depth)
        case .string(let s): return .string(s)
        case .byte(let v): return .integer(Int64(v))
        case .int16(let v): return .integer(Int64(v))
        case .uint16(let v): return .integer(Int64(v))
        case .int32(let v): return .integer(Int64(v))
        case .uint32(let v): return .integer(Int64(v))
        case .int64(let v): return .integer(v)
        case .uint64(let v):
            guard let fitting = Int64(exactly: v) else { throw .invalidArguments("userInfo has a uint64 beyond the int64 range") }
            return .integer(fitting)
        case .double(let d):
            guard !d.isNaN else { throw .invalidArguments("userInfo has a NaN double") }
            return .double(d)
        case .boolean(let b): return .boolean(b)
        case .structure(let fields):
            guard fields.count == 2, case .string("date") = fields[0], case .double(let seconds) = fields[1] else {
                throw .invalidArguments("userInfo has a struct '\(value.signature)'; only (sd) dates tagged \"date\" are allowed")
            }
            guard !seconds.isNaN else { throw .invalidArguments("userInfo has a NaN date") }
            return .date(seconds)
        case .array(let elementSignature, let elements):
            if elementSignature == "y" {
                var bytes: [UInt8] = []
                bytes.reserveCapacity(elements.count)
                for element in elements {
                    guard case .byte(let b) = element else { throw .invalidArguments("userInfo byte array holds a non-byte") }
                    bytes.append(b)
                }
                return .bytes(bytes)
            }
            // Checked up front so that empty arrays of refused types are refused too.
            try requireAllowed(signature: "a" + elementSignature)
            var items: [PropertyValue] = []
            items.reserveCapacity(elements.count)
            for element in elements { items.append(try decode(element, depth: depth + 1)) }
            return .array(items)
        case .dictionary(let keySignature, let valueSignature, let entries):
            guard keySignature == "s" else {
                throw .invalidArguments("userInfo dictionaries need string keys, got '\(keySignature)'")
            }
            try requireAllowed(signature: valueSignature)
            var result: [String: PropertyValue] = [:]
            result.reserveCapacity(entries.count)
            for (key, element) in entries {
                guard case .string(let name) = key else { throw .invalidArguments("userInfo dictionary key is not a string") }
                // Distinct D-Bus keys can be canonically equal Swift strings; refuse rather than lose one.
                guard result[name] == nil else { throw .invalidArguments("userInfo has two keys that compare equal") }
                result[name] = try decode(element, depth: depth + 1)
            }
            return .dictionary(result)
        case .objectPath, .signature, .unixFD:
            throw .invalidArguments("userInfo has a value of D-Bus type '\(value.signature)', which is not a property-list type")
        }
    }

    /// Canonical form: integers `x`, arrays `av`, dictionaries `a{sv}`, dates `(sd)`.
    public static func encode(_ value: PropertyValue) -> DBusValue {
        switch value {
        case .string(let s): return .string(s)
        case .integer(let i): return .int64(i)
        case .double(let d): return .double(d)
        case .boolean(let b): return .boolean(b)
        case .bytes(let b): return .bytes(b)
        case .date(let d): return .structure([.string("date"), .double(d)])
        case .array(let items): return .array(elementSignature: "v", items.map { .variant(encode($0)) })
        case .dictionary(let entries): return encodeUserInfo(entries)
        }
    }

    public static func encodeUserInfo(_ entries: [String: PropertyValue]) -> DBusValue {
        .propertyDictionary(entries.mapValues(encode))
    }

    // MARK: Signatures

    /// Throws unless `signature` is one complete type that can only hold property-list values.
    static func requireAllowed(signature: String) throws(RegistryError) {
        var rest = Substring(signature)
        guard parseAllowed(&rest, nesting: 0), rest.isEmpty else {
            throw .invalidArguments("userInfo has values of D-Bus type '\(signature)', which is not a property-list type")
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
