// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine
import BatonCore
import BatonDBus
import Testing

@Suite("userInfo JSON conversion")
struct UserInfoJSONTests {
    @Test("every property-list type converts from JSON")
    func everyType() throws {
        let userInfo = try UserInfoJSON.parse("""
            {"s": "héllo \\u00e9\\n\\ud83d\\ude00", "i": -42, "big": 9223372036854775807, "small": -9223372036854775808,
             "d": 1.5, "whole": 2.0, "exp": 1e3, "t": true, "f": false,
             "bytes": {"$bytes": "AAEC/w=="}, "date": {"$date": "2026-11-29T12:00:00Z"},
             "dateOffset": {"$date": "2026-11-29T13:30:00.25+01:30"}, "dateNumber": {"$date": 1.5},
             "array": [1, "two", [3.0]], "dict": {"nested": {"deep": []}}, "empty": {}}
            """)
        #expect(userInfo["s"] == .string("héllo é\n😀"))
        #expect(userInfo["i"] == .integer(-42))
        #expect(userInfo["big"] == .integer(Int64.max))
        #expect(userInfo["small"] == .integer(Int64.min))
        #expect(userInfo["d"] == .double(1.5))
        #expect(userInfo["whole"] == .double(2.0))
        #expect(userInfo["exp"] == .double(1000))
        #expect(userInfo["t"] == .boolean(true))
        #expect(userInfo["f"] == .boolean(false))
        #expect(userInfo["bytes"] == .bytes([0, 1, 2, 255]))
        #expect(userInfo["date"] == .date(1_795_953_600))
        #expect(userInfo["dateOffset"] == .date(1_795_953_600.25))
        #expect(userInfo["dateNumber"] == .date(1.5))
        #expect(userInfo["array"] == .array([.integer(1), .string("two"), .array([.double(3)])]))
        #expect(userInfo["dict"] == .dictionary(["nested": .dictionary(["deep": .array([])])]))
        #expect(userInfo["empty"] == .dictionary([:]))
        #expect(userInfo.count == 16)
    }

    @Test("JSON written from userInfo reads back identically")
    func roundTrip() throws {
        let userInfo: [String: PropertyValue] = [
            "s": .string("quote \" backslash \\ tab \t bell \u{07}"), "i": .integer(Int64.min), "d": .double(0.1),
            "whole": .double(-3), "inf": .double(.infinity), "b": .boolean(true), "bytes": .bytes([0xDE, 0xAD]),
            "date": .date(1_795_953_600.5), "ancient": .date(-62_167_219_200), "farFuture": .date(1e15),
            "array": .array([.array([]), .dictionary([:])]), "needs quoting": .dictionary(["x.y": .integer(1)]),
        ]
        for pretty in [false, true] {
            let text = UserInfoJSON.json(from: userInfo).rendered(pretty: pretty)
            #expect(try UserInfoJSON.parse(text) == userInfo, "\(text)")
        }
        #expect(UserInfoJSON.json(from: .date(1_795_953_600)).rendered() == #"{"$date":"2026-11-29T12:00:00Z"}"#)
        #expect(UserInfoJSON.json(from: .double(2)).rendered() == "2.0")
        #expect(UserInfoJSON.json(from: .bytes([0, 1, 2, 255])).rendered() == #"{"$bytes":"AAEC/w=="}"#)
    }

    @Test("nesting up to the property-list limit is accepted")
    func maximumDepth() throws {
        // The userInfo dictionary is level 1; 15 more arrays make 16.
        let text = "{\"a\":" + String(repeating: "[", count: 15) + String(repeating: "]", count: 15) + "}"
        #expect(try UserInfoJSON.parse(text)["a"]?.depth == 15)
    }

    static let errorCases: [(json: String, path: String, problem: String)] = [
        ("[1]", "$", "must be a JSON object"),
        ("\"text\"", "$", "must be a JSON object"),
        ("{\"a\": null}", "$.a", "null"),
        ("{\"a\": [1, null]}", "$.a[1]", "null"),
        ("{\"a\": 9223372036854775808}", "$.a", "does not fit in 64 bits"),
        ("{\"a\": {\"b\": -9223372036854775809}}", "$.a.b", "does not fit in 64 bits"),
        ("{\"a\": {\"$bytes\": 5}}", "$.a.$bytes", "base64 string"),
        ("{\"a\": {\"$bytes\": \"not base64!\"}}", "$.a.$bytes", "not valid base64"),
        ("{\"a\": {\"$date\": \"yesterday\"}}", "$.a.$date", "RFC 3339"),
        ("{\"a\": {\"$date\": \"2026-02-30T00:00:00Z\"}}", "$.a.$date", "RFC 3339"),
        ("{\"a\": {\"$date\": \"2026-11-29T12:00:00\"}}", "$.a.$date", "RFC 3339"),
        ("{\"a\": {\"$date\": true}}", "$.a.$date", "RFC 3339 string or finite seconds"),
        ("{\"a\": {\"$date\": \"2026-11-29T12:00:00Z\", \"x\": 1}}", "$.a.$date", "reserved"),
        ("{\"a\": {\"x\": 1, \"$bytes\": \"AA==\"}}", "$.a.$bytes", "reserved"),
        ("{\"a\": 1, \"a\": 2}", "$.a", "duplicate key"),
        ("{\"odd key\": null}", "$[\"odd key\"]", "null"),
        ("{\"a\": " + String(repeating: "[", count: 16) + String(repeating: "]", count: 16) + "}",
         "$.a" + String(repeating: "[0]", count: 15), "nested deeper than 16"),
        ("{\"a\": [1, 2,]}", "$.a[2]", "unexpected character"),
        ("{\"a\": tru}", "$.a", "unexpected character"),
        ("{\"a\": \"unterminated}", "$.a", "unterminated string"),
        ("{\"a\": 01}", "$.a", "leading zero"),
        ("{\"a\": 1} extra", "$", "unexpected text after the value"),
        ("{\"a\" 1}", "$", "expected ':'"),
        ("{\"a\": \"\\ud800\"}", "$.a", "unpaired surrogate"),
        ("", "$", "unexpected end of text"),
    ]

    @Test("every error names the JSON path", arguments: errorCases)
    func errorNamesPath(_ testCase: (json: String, path: String, problem: String)) {
        do {
            let value = try UserInfoJSON.parse(testCase.json)
            Issue.record("expected an error for \(testCase.json), got \(value)")
        } catch {
            #expect(error.path == testCase.path, "\(error)")
            #expect(error.problem.contains(testCase.problem), "\(error)")
            #expect(error.description.contains(testCase.path))
        }
    }
}
