// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

@Suite("BatonCore: JSONWriter")
struct JSONWriterTests {
    @Test func stringsEscapeQuotesBackslashesAndControlCharacters() {
        #expect(JSONWriter.quoted("a\"b\\c") == #""a\"b\\c""#)
        #expect(JSONWriter.quoted("\n\r\t\u{08}\u{0C}") == #""\n\r\t\b\f""#)
        #expect(JSONWriter.quoted("\u{01}\u{1F}\u{7F}") == #""\u0001\u001f\u007f""#)
        #expect(JSONWriter.quoted("é😀/") == "\"é😀/\"")
    }

    @Test func numbersReadBackAsTheirKind() {
        #expect(JSONWriter.double(2) == "2.0")
        #expect(JSONWriter.double(0.5) == "0.5")
        #expect(JSONWriter.double(.nan) == "null")
        #expect(JSONWriter.double(-.infinity) == "-1e999")
        #expect(JSONWriter.integer(nil) == "null")
        #expect(JSONWriter.integer(-3) == "-3")
    }

    @Test func objectsKeepTheirMemberOrder() {
        #expect(JSONWriter.object([(name: "b", json: "1"), (name: "a\"", json: JSONWriter.quoted("x"))]) == #"{"b":1,"a\"":"x"}"#)
    }
}
