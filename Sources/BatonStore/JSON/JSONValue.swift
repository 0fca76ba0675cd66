// SPDX-License-Identifier: GPL-2.0-or-later
import BatonJSON

/// Why bytes are not a JSON document this store accepts. Offsets count bytes from the start.
public enum JSONFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    /// More bytes than the parser is allowed to read.
    case tooLarge(bytes: Int, limit: Int)
    /// Arrays and objects nested deeper than the limit.
    case tooDeep(limit: Int, offset: Int)
    /// The document ends inside a value (or is empty).
    case unexpectedEnd
    /// A byte that cannot start or continue a value here.
    case unexpectedByte(UInt8, offset: Int)
    /// A string whose bytes (raw or from escapes) are not valid UTF-8.
    case invalidUTF8(offset: Int)
    /// A backslash escape JSON does not define, or a control character written raw in a string.
    case invalidEscape(offset: Int)
    /// A `\u` escape of a UTF-16 surrogate that is not half of a high-low pair.
    case loneSurrogate(offset: Int)
    /// An object names the same key twice (canonically equivalent strings count as the same key).
    case duplicateKey(String, offset: Int)
    /// A number that does not follow JSON's grammar (leading zeros, a bare sign or point...).
    case invalidNumber(offset: Int)
    /// Something other than white space after the document.
    case trailingData(offset: Int)

    /// The store's refusal for one of BatonJSON's.
    init(_ error: JSONParseError) {
        let offset = error.offset
        switch error.kind {
        case .tooLarge(let bytes, let limit): self = .tooLarge(bytes: bytes, limit: limit)
        case .tooDeep(let limit): self = .tooDeep(limit: limit, offset: offset)
        case .unexpectedEnd, .unterminatedString, .truncatedEscape: self = .unexpectedEnd
        case .unexpectedByte(let byte, _): self = .unexpectedByte(byte, offset: offset)
        case .trailingData: self = .trailingData(offset: offset)
        case .invalidUTF8: self = .invalidUTF8(offset: offset)
        case .controlCharacter, .unknownEscape, .badHexDigit: self = .invalidEscape(offset: offset)
        case .loneSurrogate: self = .loneSurrogate(offset: offset)
        case .duplicateKey(let key): self = .duplicateKey(key, offset: offset)
        // Not with exact numbers; mapped all the same.
        case .invalidNumber(_, let start): self = .invalidNumber(offset: start)
        case .integerTooLarge: self = .invalidNumber(offset: offset)
        }
    }

    public var description: String {
        switch self {
        case .tooLarge(let bytes, let limit): "JSON of \(bytes) bytes, more than the \(limit)-byte limit"
        case .tooDeep(let limit, let offset): "JSON nested deeper than \(limit) levels at byte \(offset)"
        case .unexpectedEnd: "JSON ends inside a value"
        case .unexpectedByte(let byte, let offset): "unexpected byte 0x\(String(byte, radix: 16)) at \(offset)"
        case .invalidUTF8(let offset): "string at byte \(offset) is not valid UTF-8"
        case .invalidEscape(let offset): "invalid escape or raw control character at byte \(offset)"
        case .loneSurrogate(let offset): "lone UTF-16 surrogate in the \\u escape at byte \(offset)"
        case .duplicateKey(let key, let offset): "duplicate key \(JSONText.quoted(key)) at byte \(offset)"
        case .invalidNumber(let offset): "invalid number at byte \(offset)"
        case .trailingData(let offset): "data after the JSON document at byte \(offset)"
        }
    }
}

extension JSONValue {
    /// What a type-mismatch error says was found.
    var kindName: String {
        switch self {
        case .null: "null"
        case .boolean: "a boolean"
        case .integer, .double, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
