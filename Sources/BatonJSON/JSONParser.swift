// SPDX-License-Identifier: GPL-2.0-or-later
/// The one JSON parser of the project (RFC 8259), for hostile input: every way a document can be
/// wrong is a `JSONParseError` with the byte offset and the path of the value being read, never a
/// trap, and work is bounded by the caller's size and nesting limits.
///
/// Beyond the grammar: UTF-8 only (invalid UTF-8 in a string, raw or produced by escapes, is
/// refused, and so is a `\u` surrogate that is not half of a high-low pair); nothing but white
/// space may follow the document; the options say whether a repeated key or a leading byte-order
/// mark is accepted and how numbers are kept.
extension JSONValue {
    /// Parses one whole document.
    public static func parse(_ bytes: [UInt8], options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) -> JSONValue {
        guard bytes.count <= options.sizeLimit else { throw JSONParseError(.tooLarge(bytes: bytes.count, limit: options.sizeLimit), offset: 0) }
        var parser = Parser(bytes: bytes, options: options)
        if options.skipsByteOrderMark, bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.offset = 3 }
        let value = try parser.parseValue(depth: 0)
        parser.skipWhiteSpace()
        guard parser.offset == bytes.count else { throw parser.error(.trailingData) }
        return value
    }

    /// Parses one whole document from text (the command-line tools' defaults unless told).
    public static func parse(_ text: String, options: JSONParseOptions = JSONParseOptions()) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), options: options)
    }
}

private struct Parser {
    let bytes: [UInt8]
    let options: JSONParseOptions
    var offset = 0
    /// The path of the value being read: pushed and popped around each member and element.
    var path: [JSONPath.Component] = []

    init(bytes: [UInt8], options: JSONParseOptions) {
        self.bytes = bytes
        self.options = options
    }

    func error(_ kind: JSONParseError.Kind, at position: Int? = nil) -> JSONParseError {
        JSONParseError(kind, offset: position ?? offset, components: path)
    }

    var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    mutating func skipWhiteSpace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1 }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        skipWhiteSpace()
        guard let byte = current else { throw error(.unexpectedEnd) }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .boolean(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .boolean(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error(.unexpectedByte(byte, expected: .value))
        }
    }

    mutating func expectWord(_ word: StaticString) throws(JSONParseError) {
        let start = offset
        for index in 0..<word.utf8CodeUnitCount {
            guard let byte = current else { throw error(.unexpectedEnd) }
            guard byte == word.utf8Start[index] else { throw error(.unexpectedByte(byte, expected: .value), at: start + index) }
            offset += 1
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= options.depthLimit else { throw error(.tooDeep(limit: options.depthLimit)) }
        offset += 1  // [
        var elements: [JSONValue] = []
        skipWhiteSpace()
        if current == UInt8(ascii: "]") { offset += 1; return .array(elements) }
        while true {
            path.append(.index(elements.count))
            elements.append(try parseValue(depth: depth))
            path.removeLast()
            skipWhiteSpace()
            guard let byte = current else { throw error(.unexpectedEnd) }
            offset += 1
            if byte == UInt8(ascii: "]") { return .array(elements) }
            guard byte == UInt8(ascii: ",") else { throw error(.unexpectedByte(byte, expected: .commaOrBracket), at: offset - 1) }
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= options.depthLimit else { throw error(.tooDeep(limit: options.depthLimit)) }
        offset += 1  // {
        var members: [(key: String, value: JSONValue)] = []
        var keys = Set<String>()
        skipWhiteSpace()
        if current == UInt8(ascii: "}") { offset += 1; return .object(members) }
        while true {
            skipWhiteSpace()
            let keyOffset = offset
            guard let byte = current else { throw error(.unexpectedEnd) }
            guard byte == UInt8(ascii: "\"") else { throw error(.unexpectedByte(byte, expected: .memberName)) }
            let key = try parseString()
            skipWhiteSpace()
            guard let colon = current else { throw error(.unexpectedEnd) }
            guard colon == UInt8(ascii: ":") else { throw error(.unexpectedByte(colon, expected: .colon)) }
            offset += 1
            path.append(.member(key))
            let value = try parseValue(depth: depth)
            path.removeLast()
            if options.refusesDuplicateKeys {
                guard keys.insert(key).inserted else { throw error(.duplicateKey(key), at: keyOffset) }
            }
            members.append((key, value))
            skipWhiteSpace()
            guard let next = current else { throw error(.unexpectedEnd) }
            offset += 1
            if next == UInt8(ascii: "}") { return .object(members) }
            guard next == UInt8(ascii: ",") else { throw error(.unexpectedByte(next, expected: .commaOrBrace), at: offset - 1) }
        }
    }

    /// At the opening quote; leaves the offset after the closing one.
    mutating func parseString() throws(JSONParseError) -> String {
        let start = offset
        offset += 1
        let contentStart = offset
        // Fast path: no escapes, the bytes are the string.
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
            guard byte >= 0x20 else { throw error(.controlCharacter) }
            offset += 1
        }
        guard let stop = current else { throw error(.unterminatedString) }
        if stop == UInt8(ascii: "\"") {
            offset += 1
            guard let text = String(validating: bytes[contentStart..<(offset - 1)], as: UTF8.self) else {
                throw error(.invalidUTF8, at: start)
            }
            return text
        }
        var decoded = Array(bytes[contentStart..<offset])
        while true {
            guard let byte = current else { throw error(.unterminatedString) }
            offset += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: decoded, as: UTF8.self) else { throw error(.invalidUTF8, at: start) }
                return text
            case UInt8(ascii: "\\"):
                try parseEscape(into: &decoded)
            case 0..<0x20:
                throw error(.controlCharacter, at: offset - 1)
            default:
                decoded.append(byte)
            }
        }
    }

    /// After the backslash.
    mutating func parseEscape(into decoded: inout [UInt8]) throws(JSONParseError) {
        let escapeOffset = offset - 1
        guard let byte = current else { throw error(.unterminatedString) }
        offset += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(byte)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try parseHex4()
            var scalarValue = UInt32(unit)
            if (0xD800..<0xDC00).contains(unit) {
                // A high surrogate must be followed at once by an escaped low one.
                guard current == UInt8(ascii: "\\"), offset + 1 < bytes.count, bytes[offset + 1] == UInt8(ascii: "u") else {
                    throw error(.loneSurrogate, at: escapeOffset)
                }
                offset += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw error(.loneSurrogate, at: escapeOffset) }
                scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if (0xDC00..<0xE000).contains(unit) {
                throw error(.loneSurrogate, at: escapeOffset)
            }
            guard let scalar = Unicode.Scalar(scalarValue) else { throw error(.loneSurrogate, at: escapeOffset) }
            UTF8.encode(scalar) { decoded.append($0) }
        default:
            throw error(.unknownEscape, at: escapeOffset)
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let byte = current else { throw error(.truncatedEscape) }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error(.badHexDigit)
            }
            value = value << 4 | UInt16(digit)
            offset += 1
        }
        return value
    }

    /// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = offset
        var isInteger = true
        if current == UInt8(ascii: "-") { offset += 1 }
        let integerStart = offset
        guard let first = current, isDigit(first) else { throw error(.invalidNumber(.digits, start: start)) }
        offset += 1
        if first == UInt8(ascii: "0"), let next = current, isDigit(next) {
            throw error(.invalidNumber(.leadingZero, start: start), at: integerStart)
        }
        skipDigits()
        if current == UInt8(ascii: ".") {
            isInteger = false
            offset += 1
            guard let digit = current, isDigit(digit) else { throw error(.invalidNumber(.fractionDigits, start: start)) }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            offset += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
            guard let digit = current, isDigit(digit) else { throw error(.invalidNumber(.exponentDigits, start: start)) }
            skipDigits()
        }
        // ASCII by construction.
        let text = String(decoding: bytes[start..<offset], as: UTF8.self)
        switch options.numbers {
        case .exact:
            return .number(text)
        case .typed where isInteger:
            guard let integer = Int64(text) else { throw error(.integerTooLarge(text), at: start) }
            return .integer(integer)
        case .typed:
            // Any text of the grammar converts (out of range is ±infinity).
            guard let double = Double(text) else { throw error(.invalidNumber(.digits, start: start), at: start) }
            return .double(double)
        }
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    mutating func skipDigits() {
        while let byte = current, isDigit(byte) { offset += 1 }
    }
}
