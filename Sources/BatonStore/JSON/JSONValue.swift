// SPDX-License-Identifier: GPL-2.0-or-later
/// A parsed JSON document, the input of `JSONValueDecoder`. Numbers keep their text so each is
/// converted once, exactly, to the type the `Decodable` asks for (an `Int64` never passes through
/// a `Double`).
indirect enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Keys are unique: the parser refuses a document that repeats one (see `JSONParser`).
    case object([String: JSONValue])

    /// What a type-mismatch error says was found.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

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
