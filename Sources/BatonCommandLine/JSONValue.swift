// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// A JSON document. Integers and doubles are kept apart (a number with a fraction or exponent is a
/// double), and object members keep their order. Parsing and rendering are done here rather than
/// with Foundation so that the integer/double distinction and error positions are exact.
public indirect enum JSONValue: Sendable, Hashable {
    case null
    case boolean(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.boolean(let a), .boolean(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.double(let a), .double(let b)): a == b
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
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let members):
            for member in members {
                hasher.combine(member.key)
                hasher.combine(member.value)
            }
        }
    }

    /// The member named `key` of an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }
}

/// Why a text is not JSON: `offset` counts UTF-8 bytes from the start, `path` names the value being
/// read (`$` is the document, `$.a[2]` the third item of member `a`).
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var offset: Int
    public var path: String
    public var problem: String
    public var description: String { "invalid JSON at \(path) (byte \(offset)): \(problem)" }
}

extension JSONValue {
    /// Nesting limit of the parser, far above anything a property list may hold (16).
    public static let maxParseDepth = 64

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: Array(text.utf8))
        let value = try parser.parseValue(depth: 0, path: "$")
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the value") }
        return value
    }

    /// Compact JSON, or indented by two spaces when `pretty`.
    public func rendered(pretty: Bool = false) -> String {
        var out = ""
        render(into: &out, pretty: pretty, indent: 0)
        return out
    }

    private func render(into out: inout String, pretty: Bool, indent: Int) {
        let newline = pretty ? "\n" : ""
        func pad(_ level: Int) -> String { pretty ? String(repeating: "  ", count: level) : "" }
        switch self {
        case .null: out += "null"
        case .boolean(let b): out += b ? "true" : "false"
        case .integer(let i): out += String(i)
        case .double(let d): out += JSONWriter.double(d)
        case .string(let s): JSONWriter.appendQuoted(s, to: &out)
        case .array(let items):
            guard !items.isEmpty else { out += "[]"; return }
            out += "[" + newline
            for (index, item) in items.enumerated() {
                out += pad(indent + 1)
                item.render(into: &out, pretty: pretty, indent: indent + 1)
                out += (index == items.count - 1 ? "" : ",") + newline
            }
            out += pad(indent) + "]"
        case .object(let members):
            guard !members.isEmpty else { out += "{}"; return }
            out += "{" + newline
            for (index, member) in members.enumerated() {
                out += pad(indent + 1)
                JSONWriter.appendQuoted(member.key, to: &out)
                out += pretty ? ": " : ":"
                member.value.render(into: &out, pretty: pretty, indent: indent + 1)
                out += (index == members.count - 1 ? "" : ",") + newline
            }
            out += pad(indent) + "}"
        }
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// The path of the value being read, for error messages.
    var path = "$"

    func error(_ problem: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? index, path: path, problem: problem)
    }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func expect(_ literal: String, _ value: JSONValue) throws(JSONParseError) -> JSONValue {
        let expected = Array(literal.utf8)
        guard bytes.count - index >= expected.count, Array(bytes[index..<index + expected.count]) == expected else {
            throw error("unexpected character")
        }
        index += expected.count
        return value
    }

    mutating func parseValue(depth: Int, path valuePath: String) throws(JSONParseError) -> JSONValue {
        path = valuePath
        skipWhitespace()
        guard index < bytes.count else { throw error("unexpected end of text") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try expect("true", .boolean(true))
        case UInt8(ascii: "f"): return try expect("false", .boolean(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= JSONValue.maxParseDepth else { throw error("nested deeper than \(JSONValue.maxParseDepth)") }
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            let memberPath = path
            let value = try parseValue(depth: depth, path: memberPath + JSONPath.member(key))
            path = memberPath
            members.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of text") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            throw error("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= JSONValue.maxParseDepth else { throw error("nested deeper than \(JSONValue.maxParseDepth)") }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        let arrayPath = path
        while true {
            items.append(try parseValue(depth: depth, path: arrayPath + "[\(items.count)]"))
            path = arrayPath
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of text") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            throw error("expected ',' or ']'")
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("bad hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flushRun(_ parser: JSONParser, upTo end: Int, into scalars: inout String.UnicodeScalarView) {
            if end > runStart { scalars.append(contentsOf: String(decoding: parser.bytes[runStart..<end], as: UTF8.self).unicodeScalars) }
        }
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                flushRun(self, upTo: index, into: &scalars)
                index += 1
                return String(scalars)
            }
            if byte < 0x20 { throw error("control character in string") }
            if byte != UInt8(ascii: "\\") { index += 1; continue }
            flushRun(self, upTo: index, into: &scalars)
            index += 1
            guard index < bytes.count else { throw error("unterminated string") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if (0xD800...0xDBFF).contains(code) {
                    guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate")
                    }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(code) else { throw error("unpaired surrogate") }
                scalars.append(scalar)
            default:
                throw error("unknown escape")
            }
            runStart = index
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits(_ parser: inout JSONParser) -> Int {
            let from = parser.index
            while parser.index < parser.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(parser.bytes[parser.index]) {
                parser.index += 1
            }
            return parser.index - from
        }
        let intStart = index
        let intDigits = digits(&self)
        guard intDigits > 0 else { throw error("expected digits") }
        if intDigits > 1, bytes[intStart] == UInt8(ascii: "0") { throw error("leading zero", at: intStart) }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard digits(&self) > 0 else { throw error("expected digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw error("expected exponent digits") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger {
            guard let integer = Int64(text) else {
                throw error("integer \(text) does not fit in 64 bits (write it with a fraction to make it a double)", at: start)
            }
            return .integer(integer)
        }
        guard let double = Double(text) else { throw error("bad number", at: start) }
        return .double(double)
    }
}

/// JSON paths in the `$.member[index]` notation used by error messages.
public enum JSONPath {
    /// `.name` for simple names, `["name"]` (JSON-quoted) for anything else.
    public static func member(_ name: String) -> String {
        let simple = !name.isEmpty && name.unicodeScalars.allSatisfy {
            ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "_" || $0 == "$"
        }
        if simple { return "." + name }
        return "[" + JSONWriter.quoted(name) + "]"
    }
}
