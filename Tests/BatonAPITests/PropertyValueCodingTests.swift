// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import Testing

@Suite("userInfo D-Bus marshalling")
struct PropertyValueCodingTests {
    @Test("values encode in the canonical D-Bus form")
    func canonicalForm() {
        #expect(PropertyValueCoding.encode(.integer(7)) == .int64(7))
        #expect(PropertyValueCoding.encode(.date(12.5)) == .structure([.string("date"), .double(12.5)]))
        #expect(PropertyValueCoding.encode(.bytes([1, 2])) == .bytes([1, 2]))
        #expect(PropertyValueCoding.encode(.array([.string("a")])) == .array(elementSignature: "v", [.variant(.string("a"))]))
        #expect(PropertyValueCoding.encodeUserInfo(["k": .boolean(true)]).signature == "a{sv}")
    }

    @Test("encode then decode is the identity")
    func roundTrip() throws {
        let value: PropertyValue = .dictionary([
            "s": .string("x"), "i": .integer(-1), "d": .double(2.5), "b": .boolean(false), "y": .bytes([]),
            "t": .date(-1.25), "a": .array([.integer(1), .array([.dictionary(["z": .string("")])])]),
        ])
        #expect(try PropertyValueCoding.decode(PropertyValueCoding.encode(value)) == value)
    }

    @Test("other documented D-Bus forms decode")
    func otherForms() throws {
        #expect(try PropertyValueCoding.decode(.int32(-5)) == .integer(-5))
        #expect(try PropertyValueCoding.decode(.uint32(5)) == .integer(5))
        #expect(try PropertyValueCoding.decode(.int16(-2)) == .integer(-2))
        #expect(try PropertyValueCoding.decode(.uint16(2)) == .integer(2))
        #expect(try PropertyValueCoding.decode(.byte(9)) == .integer(9))
        #expect(try PropertyValueCoding.decode(.uint64(UInt64(Int64.max))) == .integer(Int64.max))
        #expect(try PropertyValueCoding.decode(.stringArray(["a", "b"])) == .array([.string("a"), .string("b")]))
        #expect(try PropertyValueCoding.decode(.array(elementSignature: "i", [.int32(1)])) == .array([.integer(1)]))
        #expect(try PropertyValueCoding.decode(.variant(.variant(.string("v")))) == .string("v"))
        let typed = DBusValue.dictionary(keySignature: "s", valueSignature: "s", [.string("k"): .string("v")])
        #expect(try PropertyValueCoding.decodeUserInfo(typed) == ["k": .string("v")])
    }

    static let refused: [(DBusValue, String)] = [
        (.uint64(UInt64(Int64.max) + 1), "beyond int64"),
        (.double(.nan), "NaN"),
        (.objectPath("/x"), "not a property-list type"),
        (.signature("s"), "not a property-list type"),
        (.structure([.string("time"), .double(1)]), "(sd)"),
        (.structure([.string("date"), .double(.nan)]), "NaN date"),
        (.dictionary(keySignature: "i", valueSignature: "v", [.int32(1): .variant(.string("x"))]), "non-string keys"),
    ]

    @Test("non-property-list values are refused", arguments: refused)
    func refusesOthers(_ testCase: (DBusValue, String)) {
        #expect {
            try PropertyValueCoding.decode(testCase.0)
        } throws: { error in
            guard let error = error as? BatonAPIError else { return false }
            return error.name == .invalidArguments && error.message.contains(testCase.1)
        }
    }

    @Test("nesting deeper than 16 is refused with its path")
    func tooDeep() {
        var value = DBusValue.string("leaf")
        for _ in 0..<16 { value = .array(elementSignature: "v", [.variant(value)]) }
        #expect {
            try PropertyValueCoding.decode(value)
        } throws: { error in
            (error as? BatonAPIError)?.message.hasPrefix("userInfo" + String(repeating: "[0]", count: 16)) == true
        }
        #expect {
            try PropertyValueCoding.decodeUserInfo(.string("x"))
        } throws: { error in (error as? BatonAPIError)?.name == .invalidArguments }
    }
}

@Suite("BatonAPI: the strict rules the daemon and the client share")
struct StrictPropertyValueCodingTests {
    @Test func aNonByteInsideAnArrayOfBytesIsRefusedWithItsPath() {
        let mixed = DBusValue.array(elementSignature: "y", [.byte(1), .string("x")])
        #expect(throws: BatonAPIError(.invalidArguments, "userInfo.k[1] is a non-byte inside a byte array")) {
            _ = try PropertyValueCoding.decodeUserInfo(.propertyDictionary(["k": mixed]))
        }
    }

    @Test func emptyArraysOfRefusedTypesAreRefused() {
        #expect(throws: BatonAPIError.self) { _ = try PropertyValueCoding.decode(.array(elementSignature: "o", [])) }
        #expect(throws: BatonAPIError.self) { _ = try PropertyValueCoding.decode(.dictionary(keySignature: "s", valueSignature: "h", [:])) }
    }
}
