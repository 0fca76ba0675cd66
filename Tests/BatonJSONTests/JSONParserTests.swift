// SPDX-License-Identifier: GPL-2.0-or-later
import BatonJSON
import Testing

@Suite("BatonJSON parser")
struct JSONParserTests {
    private func failure(_ text: String, _ options: JSONParseOptions = JSONParseOptions()) -> JSONParseError? {
        do { _ = try JSONValue.parse(text, options: options); return nil } catch { return error }
    }

    @Test func membersKeepTheirOrderAndNumbersTheirType() throws {
        let value = try JSONValue.parse(#"{"z": 1, "a": [2.5, true, null], "m": "x"}"#)
        guard case .object(let members) = value else { Issue.record("not an object: \(value)"); return }
        #expect(members.map(\.key) == ["z", "a", "m"])
        #expect(value["z"] == .integer(1))
        #expect(value["a"] == .array([.double(2.5), .boolean(true), .null]))
    }

    @Test func exactNumbersKeepTheirText() throws {
        let value = try JSONValue.parse("[18446744073709551615, 1.50, -0e1]", options: JSONParseOptions(numbers: .exact))
        #expect(value == .array([.number("18446744073709551615"), .number("1.50"), .number("-0e1")]))
    }

    @Test func anIntegerOutside64BitsIsRefusedAtItsOffsetAndPath() {
        let error = failure(#"{"a": {"b": [0, -9223372036854775809]}}"#)
        #expect(error?.offset == 16)
        #expect(error?.path == "$.a.b[1]")
        #expect(error?.problem.contains("does not fit in 64 bits") == true)
        #expect(error?.description.hasPrefix("invalid JSON at $.a.b[1] (byte 16): integer -9223372036854775809") == true)
    }

    @Test func errorsNameTheValueBeingRead() {
        #expect(failure(#"{"a" 1}"#)?.problem == "expected ':'")
        #expect(failure(#"{"a" 1}"#)?.path == "$")
        #expect(failure(#"{"odd key": [1,]}"#)?.path == #"$["odd key"][1]"#)
        #expect(failure(#"{"a": 01}"#).map { [$0.problem, $0.path, String($0.offset)] } == ["leading zero", "$.a", "6"])
        #expect(failure(#"{"a": "x"#)?.problem == "unterminated string")
        #expect(failure("[1] x").map { [$0.problem, $0.path] } == ["unexpected text after the value", "$"])
    }

    @Test func boundsAreTheCallers() {
        let options = JSONParseOptions(depthLimit: 2, sizeLimit: 8)
        #expect(failure("[[1]]", options) == nil)
        #expect(failure("[[[1]]]", options)?.kind == .tooDeep(limit: 2))
        #expect(failure("[1,2,3,4]", options)?.kind == .tooLarge(bytes: 9, limit: 8))
    }

    @Test func repeatedKeysAreKeptOrRefusedAsAsked() throws {
        #expect(try JSONValue.parse(#"{"a":1,"a":2}"#)["a"] == .integer(1))
        let error = failure(#"{"a":1,"a":2}"#, JSONParseOptions(refusesDuplicateKeys: true))
        #expect(error?.kind == .duplicateKey("a"))
        #expect(error?.offset == 7)
    }
}
