// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
/// A JSON document, as `JSONValue.parse` reads it. Object members keep their order. Numbers are
/// typed (`integer`, `double`: a number with a fraction or exponent is a double) or, when parsed
/// with `JSONParseOptions.Numbers.exact`, kept as their text (`number`) so that each is converted
/// once, exactly, to the type its reader asks for (an `Int64` never passes through a `Double`).
public indirect enum JSONValue: Sendable, Hashable {
    case null
    case boolean(Bool)
    case integer(Int64)
    case double(Double)
    /// A number's text, which follows JSON's grammar (only from a parse with exact numbers).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.boolean(let a), .boolean(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.double(let a), .double(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .boolean(let b): hasher.combine(b)
        case .integer(let i): hasher.combine(i)
        case .double(let d): hasher.combine(d)
        case .number(let text): hasher.combine(text)
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let members):
            for member in members {
                hasher.combine(member.key)
                hasher.combine(member.value)
            }
        }
    }

    /// The member named `key` of an object (the first, should a document repeat it).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// Nesting limit of `parse(_:)`'s default options, far above anything a property list may hold (16).
    public static let maxParseDepth = 64
}

/// JSON paths in the `$.member[index]` notation used by error messages.
public enum JSONPath {
    /// One step from a value to one it contains.
    public enum Component: Sendable, Hashable {
        case member(String)
        case index(Int)
    }

    /// `$` followed by the components.
    public static func text(_ components: [Component]) -> String {
        var out = "$"
        for component in components {
            switch component {
            case .member(let name): out += member(name)
            case .index(let index): out += "[\(index)]"
            }
        }
        return out
    }

    /// `.name` for simple names, `["name"]` (JSON-quoted) for anything else.
    public static func member(_ name: String) -> String {
        let simple = !name.isEmpty && name.unicodeScalars.allSatisfy {
            ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "_" || $0 == "$"
        }
        if simple { return "." + name }
        return "[" + quoted(name) + "]"
    }

    /// The JSON string literal of `text`: BatonCore's `JSONWriter.quoted`, the one string quoting.
    public static func quoted(_ text: String) -> String { JSONWriter.quoted(text) }
}
