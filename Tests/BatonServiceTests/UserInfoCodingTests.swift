// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import Testing
@testable import BatonService

@Suite("BatonServiceTests: userInfo a{sv} <-> PropertyValue")
struct UserInfoCodingTests {
    func decodeOne(_ value: DBusValue) throws(RegistryError) -> PropertyValue? {
        try PropertyValueCoding.registryUserInfo(.propertyDictionary(["k": value]))["k"]
    }

    static let accepted: [(DBusValue, PropertyValue)] = [
        (.string("s"), .string("s")),
        (.int64(-5), .integer(-5)),
        (.int32(-7), .integer(-7)),
        (.int16(-9), .integer(-9)),
        (.byte(200), .integer(200)),
        (.uint16(65_535), .integer(65_535)),
        (.uint32(4_000_000_000), .integer(4_000_000_000)),
        (.uint64(UInt64(Int64.max)), .integer(Int64.max)),
        (.double(2.5), .double(2.5)),
        (.double(.infinity), .double(.infinity)),
        (.boolean(true), .boolean(true)),
        (.bytes([1, 2, 3]), .bytes([1, 2, 3])),
        (.bytes([]), .bytes([])),
        (.structure([.string("date"), .double(1_700_000_000.25)]), .date(1_700_000_000.25)),
        (.array(elementSignature: "v", [.variant(.string("a")), .variant(.int32(1))]), .array([.string("a"), .integer(1)])),
        (.stringArray(["x", "y"]), .array([.string("x"), .string("y")])),
        (.array(elementSignature: "x", [.int64(1)]), .array([.integer(1)])),
        (.array(elementSignature: "i", []), .array([])),
        (.array(elementSignature: "d", [.double(1)]), .array([.double(1)])),
        (.array(elementSignature: "b", [.boolean(false)]), .array([.boolean(false)])),
        (.array(elementSignature: "as", [.stringArray(["n"])]), .array([.array([.string("n")])])),
        (.array(elementSignature: "ay", [.bytes([9])]), .array([.bytes([9])])),
        (.array(elementSignature: "(sd)", [.structure([.string("date"), .double(0)])]), .array([.date(0)])),
        (.propertyDictionary(["inner": .string("v")]), .dictionary(["inner": .string("v")])),
        (.dictionary(keySignature: "s", valueSignature: "s", [.string("a"): .string("b")]), .dictionary(["a": .string("b")])),
        (.variant(.variant(.int32(3))), .integer(3)),
    ]

    @Test(arguments: 0..<accepted.count)
    func acceptedTypes(_ index: Int) throws {
        let (input, expected) = Self.accepted[index]
        #expect(try decodeOne(input) == expected)
    }

    static let refused: [DBusValue] = [
        .objectPath("/x"),
        .signature("s"),
        .unixFD(0),
        .uint64(UInt64(Int64.max) + 1),
        .double(.nan),
        .structure([.string("date"), .double(.nan)]),
        .structure([.string("time"), .double(1)]),
        .structure([.string("date"), .int64(1)]),
        .structure([.string("a"), .string("b")]),
        .structure([.int32(1)]),
        .array(elementSignature: "o", [.objectPath("/")]),
        .array(elementSignature: "o", []),
        .array(elementSignature: "h", []),
        .array(elementSignature: "(ss)", []),
        .array(elementSignature: "v", [.variant(.objectPath("/"))]),
        .dictionary(keySignature: "x", valueSignature: "v", [.int64(1): .variant(.string("a"))]),
        .dictionary(keySignature: "o", valueSignature: "v", [:]),
        .dictionary(keySignature: "s", valueSignature: "o", [:]),
        .propertyDictionary(["bad": .signature("g")]),
        // A hand-built `ay` holding a non-byte: refused, not dropped.
        .array(elementSignature: "y", [.byte(1), .string("x")]),
    ]

    @Test(arguments: 0..<refused.count)
    func refusedTypes(_ index: Int) {
        #expect(throws: RegistryError.self) { _ = try decodeOne(Self.refused[index]) }
    }

    @Test func topLevelMustBeAStringKeyedDictionary() throws {
        #expect(throws: RegistryError.self) { _ = try PropertyValueCoding.registryUserInfo(.stringArray(["a"])) }
        #expect(throws: RegistryError.self) {
            _ = try PropertyValueCoding.registryUserInfo(.dictionary(keySignature: "u", valueSignature: "v", [:]))
        }
        #expect(try PropertyValueCoding.registryUserInfo(.propertyDictionary([:])).isEmpty)
    }

    @Test func depthSixteenIsTheLimit() throws {
        // userInfo itself is depth 1; 14 wrappers plus a scalar make 16.
        func nested(_ levels: Int) -> DBusValue {
            var value: DBusValue = .int64(1)
            for _ in 0..<levels { value = .array(elementSignature: "v", [.variant(value)]) }
            return value
        }
        _ = try decodeOne(nested(14))
        #expect(throws: RegistryError.invalidArguments("userInfo.k" + String(repeating: "[0]", count: 15) + " is nested deeper than 16")) { _ = try decodeOne(nested(15)) }
    }

    @Test func canonicalEncodingRoundTrips() throws {
        let original: [String: PropertyValue] = [
            "s": .string("x"), "i": .integer(-1), "d": .double(0.5), "b": .boolean(true), "y": .bytes([0, 255]),
            "t": .date(12.5), "a": .array([.integer(1), .array([])]), "m": .dictionary(["n": .dictionary([:])]),
        ]
        let encoded = PropertyValueCoding.encodeUserInfo(original)
        #expect(encoded.signature == "a{sv}")
        let entries = try #require(encoded.asDictionary)
        #expect(entries["i"] == .int64(-1))
        #expect(entries["t"] == .structure([.string("date"), .double(12.5)]))
        #expect(entries["a"]?.signature == "av")
        #expect(entries["m"]?.signature == "a{sv}")
        #expect(try PropertyValueCoding.registryUserInfo(encoded) == original)
    }
}
