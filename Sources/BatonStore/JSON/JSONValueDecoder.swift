// SPDX-License-Identifier: GPL-2.0-or-later
import BatonJSON

/// The standard library's `Decoder` over a `JSONValue` from `JSONParser`: what Foundation's
/// `JSONDecoder` did for the state files, with typed errors (`JSONFormatError` for the text,
/// `DecodingError` for the shape). Keys absent from the type are ignored (a newer build's optional
/// fields read by an older one). A number converts to an integer type only when its decimal value
/// is an integer that fits (1.0 and 1e2 are integers, as Foundation read them; 1.5 and 256 for
/// `UInt8` are errors). Foundation also read "1e-400" as 0 and cut the fraction off a number beyond
/// 2^53 ("9007199254740993.5"); such text, which no build writes, is refused here. A Double out
/// of range (1e999) is an error, not infinity.
struct JSONValueDecoder {
    func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
        try Value(from: NodeDecoder(value: try JSONParser.parse(bytes), codingPath: []))
    }
}

struct NodeDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else { throw mismatch([String: Any].self, value, codingPath) }
        // The parser refused repeated keys, so each name is there once.
        let byName = Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        return KeyedDecodingContainer(KeyedNodeDecodingContainer<Key>(members: byName, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([Any].self, value, codingPath) }
        return UnkeyedNodeDecodingContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueNodeDecodingContainer(value: value, codingPath: codingPath)
    }
}

private func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [any CodingKey]) -> DecodingError {
    .typeMismatch(type, .init(codingPath: path, debugDescription: "Expected to decode \(type) but found \(value.kindName) instead."))
}

/// Conversions from one JSON value to the primitive types every container shares.
private enum Scalar {
    static func bool(_ value: JSONValue, _ path: [any CodingKey]) throws -> Bool {
        guard case .boolean(let flag) = value else { throw mismatch(Bool.self, value, path) }
        return flag
    }

    static func string(_ value: JSONValue, _ path: [any CodingKey]) throws -> String {
        guard case .string(let text) = value else { throw mismatch(String.self, value, path) }
        return text
    }

    static func float<Number: BinaryFloatingPoint & LosslessStringConvertible>(_ value: JSONValue, _ path: [any CodingKey]) throws -> Number {
        guard case .number(let text) = value else { throw mismatch(Number.self, value, path) }
        guard let number = Number(text), number.isFinite else {
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "Number \(text) does not fit in \(Number.self)."))
        }
        return number
    }

    static func integer<Integer: FixedWidthInteger>(_ value: JSONValue, _ path: [any CodingKey]) throws -> Integer {
        guard case .number(let text) = value else { throw mismatch(Integer.self, value, path) }
        guard let integer: Integer = Integer(text, radix: 10) ?? exactInteger(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "Number \(text) does not fit in \(Integer.self)."))
        }
        return integer
    }

    /// A number with a fraction or exponent whose value is an integer of the type ("1.0", "25e-1"
    /// is not): worked out on the decimal digits, never through a Double, so it is exact as
    /// Foundation's was. `text` follows JSON's number grammar (the parser checked it).
    static func exactInteger<Integer: FixedWidthInteger>(_ text: String) -> Integer? {
        var sign = ""
        var digits: [UInt8] = []
        var fractionDigits = 0
        var exponentText = ""
        var part = 0  // 0 integer, 1 fraction, 2 exponent
        for byte in text.utf8 {
            switch (part, byte) {
            case (0, UInt8(ascii: "-")): sign = "-"
            case (_, UInt8(ascii: ".")): part = 1
            case (_, UInt8(ascii: "e")), (_, UInt8(ascii: "E")): part = 2
            case (2, _): exponentText.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                digits.append(byte)
                if part == 1 { fractionDigits += 1 }
            }
        }
        while digits.first == UInt8(ascii: "0") { digits.removeFirst() }
        if digits.isEmpty { return 0 }
        // More than 40 places either way cannot give a 64-bit integer from non-zero digits.
        guard let exponent = Int(exponentText.isEmpty ? "0" : exponentText), abs(exponent) < 1_000 else { return nil }
        let shift = exponent - fractionDigits
        if shift >= 0 {
            guard digits.count + shift <= 40 else { return nil }
            digits += repeatElement(UInt8(ascii: "0"), count: shift)
        } else {
            guard -shift <= digits.count, digits.suffix(-shift).allSatisfy({ $0 == UInt8(ascii: "0") }) else { return nil }
            digits.removeLast(-shift)
            if digits.isEmpty { return 0 }
        }
        return Integer(sign + String(decoding: digits, as: UTF8.self), radix: 10)
    }
}

struct KeyedNodeDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSONValue]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func value(_ key: Key) throws -> JSONValue {
        guard let value = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for key \(key.stringValue)."))
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { try value(key) == .null }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try Scalar.bool(value(key), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try Scalar.string(value(key), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try Scalar.float(value(key), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try Scalar.float(value(key), codingPath + [key]) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try Scalar.integer(value(key), codingPath + [key]) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try Scalar.integer(value(key), codingPath + [key]) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try T(from: NodeDecoder(value: value(key), codingPath: codingPath + [key]))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try NodeDecoder(value: value(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try NodeDecoder(value: value(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        NodeDecoder(value: members[JSONCodingKey.superKey.stringValue] ?? .null, codingPath: codingPath + [JSONCodingKey.superKey])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        NodeDecoder(value: members[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

struct UnkeyedNodeDecodingContainer: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(elements: [JSONValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private var currentPath: [any CodingKey] { codingPath + [JSONCodingKey(intValue: currentIndex)] }

    /// The next element; the index moves on only when `convert` succeeds (as Foundation's did).
    private mutating func next<T>(_ type: T.Type, _ convert: (JSONValue, [any CodingKey]) throws -> T) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: currentPath, debugDescription: "Unkeyed container is at end."))
        }
        let value = try convert(elements[currentIndex], currentPath)
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any?.self, .init(codingPath: currentPath, debugDescription: "Unkeyed container is at end."))
        }
        guard elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type, Scalar.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type, Scalar.string) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type, Scalar.float) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type, Scalar.float) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type, Scalar.integer) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type, Scalar.integer) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type, Scalar.integer) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type, Scalar.integer) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type, Scalar.integer) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type, Scalar.integer) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type, Scalar.integer) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type, Scalar.integer) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type, Scalar.integer) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type, Scalar.integer) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try next(type) { value, path in try T(from: NodeDecoder(value: value, codingPath: path)) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next(KeyedDecodingContainer<NestedKey>.self) { value, path in try NodeDecoder(value: value, codingPath: path).container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next((any UnkeyedDecodingContainer).self) { value, path in try NodeDecoder(value: value, codingPath: path).unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next((any Decoder).self) { value, path in NodeDecoder(value: value, codingPath: path) }
    }
}

struct SingleValueNodeDecodingContainer: SingleValueDecodingContainer {
    let value: JSONValue
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { value == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try Scalar.bool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try Scalar.string(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try Scalar.float(value, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try Scalar.float(value, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try Scalar.integer(value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Scalar.integer(value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Scalar.integer(value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Scalar.integer(value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Scalar.integer(value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Scalar.integer(value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Scalar.integer(value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Scalar.integer(value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Scalar.integer(value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Scalar.integer(value, codingPath) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try T(from: NodeDecoder(value: value, codingPath: codingPath))
    }
}
