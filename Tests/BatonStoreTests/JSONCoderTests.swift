// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonStore

/// The store's own JSON coder against Foundation's, which wrote every state file before it: the
/// same bytes with the same options, and each reads what the other wrote.
@Suite("JSON coder")
struct JSONCoderTests {
    enum Owner: Codable, Hashable { case thisMachine, peer(String), pair(first: Int, second: [UInt8]?) }

    struct Widths: Codable, Hashable {
        var int = Int.min, int8 = Int8.min, int16 = Int16.max, int32 = Int32.min, int64 = Int64.max
        var uint = UInt.max, uint8 = UInt8.max, uint16 = UInt16.max, uint32 = UInt32.max, uint64 = UInt64.max
        var yes = true, no = false
    }

    struct Everything: Codable, Hashable {
        var text = "/org/baton/x é 😀 \u{7F} \u{1F} \u{0} \"q\" \\ \n\t\r\u{8}\u{C} \u{2028} e\u{301}"
        var widths = Widths()
        var doubles: [Double] = [1, 0.1, 1e20, 1e16, 1e-7, -0.0, 123456789.125, 3e300, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 100, 1e15, 0.5, -2.5e-10]
        var float: Float = 0.1
        var empty: [Int] = []
        var emptyMap: [String: Int] = [:]
        var bytes: [UInt8] = [0, 1, 255]
        var owners: [Owner] = [.thisMachine, .peer("abc"), .pair(first: -1, second: nil), .pair(first: 2, second: [9])]
        var missing: String?
        var present: Int64? = 7
        var optionals: [String?] = [nil, "x"]
        var keys: [String: Int] = ["b": 1, "B": 2, "a10": 3, "a9": 4, "_": 5, "é": 6, "z": 7, "Z": 8, "aa": 9, "a": 10, "1": 11, "10": 12, "": 13, "a/b": 14]
        var nested: [[String: [Int]]] = [["x": [1, 2]], [:]]
        var counters: [String: UInt64] = ["0123abcd": 3]
    }

    private static func foundation(_ value: some Encodable, pretty: Bool) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys] : [.sortedKeys]
        return Array(try encoder.encode(value))
    }

    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func writesTheBytesFoundationWrote() throws {
        let samples: [any Encodable] = [Everything(), Widths(), [Everything()], ["k": Everything()], 3, "s", [Int](), Optional<Int>.none, -0.0, Owner.thisMachine]
        for sample in samples {
            for pretty in [false, true] {
                let ours = try JSONValueEncoder(pretty: pretty).encode(sample)
                #expect(Self.text(ours) == Self.text(try Self.foundation(sample, pretty: pretty)), "pretty: \(pretty)")
            }
        }
    }

    @Test func readsWhatFoundationWroteAndTheOtherWayRound() throws {
        let value = Everything()
        for pretty in [false, true] {
            #expect(try JSONValueDecoder().decode(Everything.self, from: try Self.foundation(value, pretty: pretty)) == value)
            #expect(try JSONDecoder().decode(Everything.self, from: Data(try JSONValueEncoder(pretty: pretty).encode(value))) == value)
        }
    }

    @Test func base64BytesAreFoundationsData() throws {
        struct Old: Codable { var roster: Data }
        struct New: Codable { var roster: Base64Bytes }
        for count in 0..<70 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let old = try Self.foundation(Old(roster: Data(bytes)), pretty: false)
            #expect(try JSONValueEncoder().encode(New(roster: Base64Bytes(bytes))) == old)
            #expect(try JSONValueDecoder().decode(New.self, from: old).roster.bytes == bytes)
        }
        for bad in ["AQI", "AQ I=", "A===", "AQ=I", "=AAA", "AQID\n", "AQ==AQ==", "AQ-_"] {
            #expect(Base64Bytes.decode(bad) == nil, "\(bad)")
            #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Base64Bytes.self, from: Array(JSONText.quoted(bad).utf8)) }
        }
    }

    @Test func nonFiniteDoublesAreRefusedAsFoundationDid() {
        for value in [Double.nan, .infinity, -.infinity] {
            #expect(throws: EncodingError.self) { try JSONValueEncoder().encode([value]) }
        }
    }

    private func formatError(_ text: String) -> JSONFormatError? {
        do { _ = try JSONParser.parse(Array(text.utf8)); return nil } catch { return error }
    }

    @Test func malformedTextIsATypedError() throws {
        #expect(formatError("") == .unexpectedEnd)
        #expect(formatError("   ") == .unexpectedEnd)
        #expect(formatError(#"{"a":1} x"#) == .trailingData(offset: 8))
        #expect(formatError(#"{"a":1}{}"#) == .trailingData(offset: 7))
        #expect(formatError(#"["\ud800"]"#) == .loneSurrogate(offset: 2))
        #expect(formatError(#"["\udc00"]"#) == .loneSurrogate(offset: 2))
        #expect(formatError(#"["\ud800\u0041"]"#) == .loneSurrogate(offset: 2))
        #expect(formatError(#"["\ud800x"]"#) == .loneSurrogate(offset: 2))
        #expect(formatError(#"["\x"]"#) == .invalidEscape(offset: 2))
        #expect(formatError(#"["\u12g4"]"#) == .invalidEscape(offset: 6))
        #expect(formatError("[\"a\u{1}\"]") == .invalidEscape(offset: 3))
        #expect(formatError(#"{"a":1,"a":2}"#) == .duplicateKey("a", offset: 7))
        #expect(formatError("{\"\u{E9}\":1,\"e\u{301}\":2}") == .duplicateKey("e\u{301}", offset: 8), "canonically equivalent keys")
        #expect(formatError("[01]") == .invalidNumber(offset: 1))
        #expect(formatError("[-]") == .invalidNumber(offset: 1))
        #expect(formatError("[1.]") == .invalidNumber(offset: 1))
        #expect(formatError("[1e]") == .invalidNumber(offset: 1))
        #expect(formatError("[.5]") == .unexpectedByte(UInt8(ascii: "."), offset: 1))
        #expect(formatError("[+1]") == .unexpectedByte(UInt8(ascii: "+"), offset: 1))
        #expect(formatError("[1,]") == .unexpectedByte(UInt8(ascii: "]"), offset: 3))
        #expect(formatError("{\"a\" 1}") == .unexpectedByte(UInt8(ascii: "1"), offset: 5))
        #expect(formatError("[tru]") == .unexpectedByte(UInt8(ascii: "]"), offset: 4))
        #expect(formatError("[NaN]") == .unexpectedByte(UInt8(ascii: "N"), offset: 1))
        #expect(formatError("[1") == .unexpectedEnd)
        #expect(formatError("\"abc") == .unexpectedEnd)
        #expect(formatError("\"\\u00") == .unexpectedEnd)
        // Invalid UTF-8: a lone continuation byte, an overlong form, an encoded surrogate, a cut sequence.
        for bytes: [UInt8] in [[0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xE2, 0x82]] {
            #expect(throws: JSONFormatError.invalidUTF8(offset: 0)) { try JSONParser.parse([0x22] + bytes + [0x22]) }
            #expect(throws: JSONFormatError.invalidUTF8(offset: 0)) { try JSONParser.parse([0x22, 0x5C, 0x6E] + bytes + [0x22]) }
        }
        #expect(throws: JSONFormatError.unexpectedByte(0xC3, offset: 0)) { try JSONParser.parse([0xC3, 0xA9]) }
        // Foundation skipped a UTF-8 byte-order mark; so does this parser.
        #expect(try JSONParser.parse([0xEF, 0xBB, 0xBF] + Array("[1]".utf8)) == .array([.number("1")]))
        #expect(try JSONParser.parse(Array(#" ["\ud83d\ude00\u00e9\/"] "#.utf8)) == .array([.string("😀é/")]))
    }

    @Test func depthAndSizeAreBounded() throws {
        let limit = JSONParser.defaultDepthLimit
        #expect(JSONParser.defaultSizeLimit == StateDirectory.maximumFileSize)
        _ = try JSONParser.parse(Array((String(repeating: "[", count: limit) + String(repeating: "]", count: limit)).utf8))
        #expect(throws: JSONFormatError.tooDeep(limit: limit, offset: limit)) {
            try JSONParser.parse(Array((String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)).utf8))
        }
        // Far deeper than any stack: refused at the limit, not by running out of stack.
        #expect(throws: JSONFormatError.tooDeep(limit: limit, offset: 6 * (limit / 2))) {
            try JSONParser.parse(Array(String(repeating: "{\"a\":[", count: 200_000).utf8))
        }
        #expect(throws: JSONFormatError.tooLarge(bytes: 11, limit: 10)) { try JSONParser.parse(Array("[1,2,3,4,5]".utf8), sizeLimit: 10) }
    }

    @Test func numbersConvertOnlyWhenTheyFit() throws {
        func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T { try JSONValueDecoder().decode(T.self, from: Array(text.utf8)) }
        #expect(try decode([Int64].self, "[-9223372036854775808, 9223372036854775807]") == [.min, .max])
        #expect(try decode([UInt64].self, "[18446744073709551615, 0]") == [.max, 0])
        #expect(try decode([Int].self, "[1.0, 1e2, -0, 2E+1, 2.50e1, 0.0e99999]") == [1, 100, 0, 20, 25, 0], "exact integers in another form, as Foundation read them")
        #expect(try decode([Int64].self, "[12345678901234567890e-1, -9.223372036854775808e18]") == [1_234_567_890_123_456_789, .min], "exact, not through a Double")
        #expect(throws: DecodingError.self) { try decode([Int].self, "[25e-1]") }
        #expect(throws: DecodingError.self) { try decode([UInt64].self, "[1.8446744073709551616e19]") }
        #expect(throws: DecodingError.self) { try decode([UInt8].self, "[256]") }
        #expect(throws: DecodingError.self) { try decode([Int8].self, "[-129]") }
        #expect(throws: DecodingError.self) { try decode([UInt32].self, "[-1]") }
        #expect(throws: DecodingError.self) { try decode([Int64].self, "[9223372036854775808]") }
        #expect(throws: DecodingError.self) { try decode([Int].self, "[1.5]") }
        #expect(throws: DecodingError.self) { try decode([Int].self, "[1e300]") }
        #expect(throws: DecodingError.self) { try decode([Double].self, "[1e999]") }
        #expect(throws: DecodingError.self) { try decode([Float].self, "[1e39]") }
        #expect(try decode([Double].self, "[1E2, -0.0, 0.1, 5e-324]") == [100, -0.0, 0.1, .leastNonzeroMagnitude])
        #expect(throws: DecodingError.self) { try decode([Int].self, "[\"1\"]") }
        #expect(throws: DecodingError.self) { try decode([Bool].self, "[1]") }
        #expect(throws: DecodingError.self) { try decode([String].self, "[null]") }
        #expect(try decode([Int?].self, "[null, 2]") == [nil, 2])
        #expect(throws: DecodingError.self) { try decode(Widths.self, "{}") }
    }

    @Test func unknownKeysAreIgnoredAndEnumsNeedOneCase() throws {
        #expect(try JSONValueDecoder().decode([Owner].self, from: Array(#"[{"peer":{"_0":"x"}},{"thisMachine":{}}]"#.utf8)) == [.peer("x"), .thisMachine])
        #expect(throws: DecodingError.self) { try JSONValueDecoder().decode(Owner.self, from: Array(#"{"peer":{"_0":"x"},"thisMachine":{}}"#.utf8)) }
        struct Small: Codable, Equatable { var value: UInt64 }
        #expect(try JSONValueDecoder().decode(Small.self, from: Array(#"{"filler":[1,{"x":null}],"value":3}"#.utf8)) == Small(value: 3))
    }
}
