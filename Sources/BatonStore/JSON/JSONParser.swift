// SPDX-License-Identifier: GPL-2.0-or-later
/// Strict RFC 8259 parser for files of the state directory, which is hostile ground: every way a
/// document can be wrong is a `JSONFormatError`, never a trap, and work is bounded by the input's
/// size and the nesting limit.
///
/// Rules beyond the grammar, chosen so one file has exactly one meaning:
/// - UTF-8 only (a leading byte-order mark is skipped, as Foundation's decoder did); invalid UTF-8
///   in a string, raw or produced by escapes, is refused, and so is a `\u` surrogate that is not
///   half of a high-low pair.
/// - An object that repeats a key is refused (Foundation kept the first silently): the files this
///   store writes never repeat one, so a repeat means tampering or damage.
/// - Nothing but white space may follow the document.
struct JSONParser {
    /// Deep enough for every record the daemon keeps (about a dozen levels), shallow enough that the
    /// recursion stays far from any thread's stack limit.
    static let defaultDepthLimit = 128
    /// The state directory's file limit (`StateDirectory.maximumFileSize`; a test keeps them equal).
    static let defaultSizeLimit = 16 * 1024 * 1024

    private let bytes: [UInt8]
    private var offset = 0
    private let depthLimit: Int

    /// Parses one whole document.
    static func parse(_ bytes: [UInt8], depthLimit: Int = defaultDepthLimit,
                      sizeLimit: Int = defaultSizeLimit) throws(JSONFormatError) -> JSONValue {
        guard bytes.count <= sizeLimit else { throw .tooLarge(bytes: bytes.count, limit: sizeLimit) }
        var parser = JSONParser(bytes: bytes, depthLimit: depthLimit)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.offset = 3 }
        let value = try parser.parseValue(depth: 0)
        parser.skipWhiteSpace()
        guard parser.offset == bytes.count else { throw .trailingData(offset: parser.offset) }
        return value
    }

    private init(bytes: [UInt8], depthLimit: Int) {
        self.bytes = bytes
        self.depthLimit = depthLimit
    }

    private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    private mutating func skipWhiteSpace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1 }
    }

    private mutating func parseValue(depth: Int) throws(JSONFormatError) -> JSONValue {
        skipWhiteSpace()
        guard let byte = current else { throw .unexpectedEnd }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw .unexpectedByte(byte, offset: offset)
        }
    }

    private mutating func expectWord(_ word: StaticString) throws(JSONFormatError) {
        let start = offset
        for index in 0..<word.utf8CodeUnitCount {
            guard let byte = current else { throw .unexpectedEnd }
            guard byte == word.utf8Start[index] else { throw .unexpectedByte(byte, offset: start + index) }
            offset += 1
        }
    }

    private mutating func expect(_ expected: UInt8) throws(JSONFormatError) {
        skipWhiteSpace()
        guard let byte = current else { throw .unexpectedEnd }
        guard byte == expected else { throw .unexpectedByte(byte, offset: offset) }
        offset += 1
    }

    private mutating func parseArray(depth: Int) throws(JSONFormatError) -> JSONValue {
        guard depth <= depthLimit else { throw .tooDeep(limit: depthLimit, offset: offset) }
        offset += 1  // [
        var elements: [JSONValue] = []
        skipWhiteSpace()
        if current == UInt8(ascii: "]") { offset += 1; return .array(elements) }
        while true {
            elements.append(try parseValue(depth: depth))
            skipWhiteSpace()
            guard let byte = current else { throw .unexpectedEnd }
            offset += 1
            if byte == UInt8(ascii: "]") { return .array(elements) }
            guard byte == UInt8(ascii: ",") else { throw .unexpectedByte(byte, offset: offset - 1) }
        }
    }

    private mutating func parseObject(depth: Int) throws(JSONFormatError) -> JSONValue {
        guard depth <= depthLimit else { throw .tooDeep(limit: depthLimit, offset: offset) }
        offset += 1  // {
        var members: [String: JSONValue] = [:]
        skipWhiteSpace()
        if current == UInt8(ascii: "}") { offset += 1; return .object(members) }
        while true {
            skipWhiteSpace()
            let keyOffset = offset
            guard let byte = current else { throw .unexpectedEnd }
            guard byte == UInt8(ascii: "\"") else { throw .unexpectedByte(byte, offset: offset) }
            let key = try parseString()
            try expect(UInt8(ascii: ":"))
            let value = try parseValue(depth: depth)
            guard members.updateValue(value, forKey: key) == nil else { throw .duplicateKey(key, offset: keyOffset) }
            skipWhiteSpace()
            guard let next = current else { throw .unexpectedEnd }
            offset += 1
            if next == UInt8(ascii: "}") { return .object(members) }
            guard next == UInt8(ascii: ",") else { throw .unexpectedByte(next, offset: offset - 1) }
        }
    }

    /// At the opening quote; leaves the offset after the closing one.
    private mutating func parseString() throws(JSONFormatError) -> String {
        let start = offset
        offset += 1
        let contentStart = offset
        // Fast path: no escapes, the bytes are the string.
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
            guard byte >= 0x20 else { throw .invalidEscape(offset: offset) }
            offset += 1
        }
        guard let stop = current else { throw .unexpectedEnd }
        if stop == UInt8(ascii: "\"") {
            offset += 1
            guard let text = String(validating: bytes[contentStart..<(offset - 1)], as: UTF8.self) else {
                throw .invalidUTF8(offset: start)
            }
            return text
        }
        var decoded = Array(bytes[contentStart..<offset])
        while true {
            guard let byte = current else { throw .unexpectedEnd }
            offset += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: decoded, as: UTF8.self) else { throw .invalidUTF8(offset: start) }
                return text
            case UInt8(ascii: "\\"):
                try parseEscape(into: &decoded)
            case 0..<0x20:
                throw .invalidEscape(offset: offset - 1)
            default:
                decoded.append(byte)
            }
        }
    }

    /// After the backslash.
    private mutating func parseEscape(into decoded: inout [UInt8]) throws(JSONFormatError) {
        let escapeOffset = offset - 1
        guard let byte = current else { throw .unexpectedEnd }
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
                    throw .loneSurrogate(offset: escapeOffset)
                }
                offset += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw .loneSurrogate(offset: escapeOffset) }
                scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if (0xDC00..<0xE000).contains(unit) {
                throw .loneSurrogate(offset: escapeOffset)
            }
            guard let scalar = Unicode.Scalar(scalarValue) else { throw .loneSurrogate(offset: escapeOffset) }
            UTF8.encode(scalar) { decoded.append($0) }
        default:
            throw .invalidEscape(offset: escapeOffset)
        }
    }

    private mutating func parseHex4() throws(JSONFormatError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let byte = current else { throw .unexpectedEnd }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw .invalidEscape(offset: offset)
            }
            value = value << 4 | UInt16(digit)
            offset += 1
        }
        return value
    }

    /// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, returned as its text.
    private mutating func parseNumber() throws(JSONFormatError) -> String {
        let start = offset
        if current == UInt8(ascii: "-") { offset += 1 }
        guard let first = current, isDigit(first) else { throw .invalidNumber(offset: start) }
        offset += 1
        if first == UInt8(ascii: "0"), let next = current, isDigit(next) { throw .invalidNumber(offset: start) }
        skipDigits()
        if current == UInt8(ascii: ".") {
            offset += 1
            guard let digit = current, isDigit(digit) else { throw .invalidNumber(offset: start) }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            offset += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
            guard let digit = current, isDigit(digit) else { throw .invalidNumber(offset: start) }
            skipDigits()
        }
        // ASCII by construction.
        return String(decoding: bytes[start..<offset], as: UTF8.self)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while let byte = current, isDigit(byte) { offset += 1 }
    }
}
