// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BatonCore

/// userInfo as JSON, for the `baton` command line and for tools.
///
/// Conventions (both directions):
/// - object → dictionary, array → array, string → string, true/false → boolean;
/// - a number without fraction or exponent → integer (must fit in Int64), any other number → double
///   (write `1.0` for a whole double; infinities are written ±1e999);
/// - `{"$bytes": "<base64>"}` → bytes;
/// - `{"$date": "2026-11-29T12:00:00Z"}` → date (RFC 3339: `Z` or `±hh:mm` offset, optional
///   fraction); `{"$date": <number>}` gives seconds since 1970 directly. Dates are written back
///   as RFC 3339 strings in UTC.
/// - The keys `$bytes` and `$date` are reserved: they may not appear in other objects.
/// - `null` has no property-list equivalent and is refused.
/// Errors name the JSON path of the offending value, e.g. `$.pages[2]`.
public enum UserInfoJSON {
    public static let bytesKey = "$bytes"
    public static let dateKey = "$date"

    /// Parses JSON text into a userInfo dictionary.
    public static func parse(_ text: String) throws(UserInfoJSONError) -> [String: PropertyValue] {
        let document: JSONValue
        do {
            document = try JSONValue.parse(text)
        } catch {
            throw UserInfoJSONError(path: error.path, problem: "\(error.problem) (byte \(error.offset))")
        }
        return try userInfo(from: document)
    }

    public static func userInfo(from document: JSONValue) throws(UserInfoJSONError) -> [String: PropertyValue] {
        guard case .object = document else { throw UserInfoJSONError(path: "$", problem: "userInfo must be a JSON object") }
        guard case .dictionary(let entries) = try value(from: document, path: "$", depth: 1) else {
            throw UserInfoJSONError(path: "$", problem: "userInfo must be a JSON object")
        }
        return entries
    }

    /// Converts one JSON value; `path` is used in errors.
    public static func value(from json: JSONValue, path: String = "$") throws(UserInfoJSONError) -> PropertyValue {
        try value(from: json, path: path, depth: 1)
    }

    private static func value(from json: JSONValue, path: String, depth: Int) throws(UserInfoJSONError) -> PropertyValue {
        guard depth <= PropertyValue.maxDepth else {
            throw UserInfoJSONError(path: path, problem: "nested deeper than \(PropertyValue.maxDepth) levels")
        }
        switch json {
        case .null:
            throw UserInfoJSONError(path: path, problem: "null has no property-list equivalent")
        case .boolean(let b): return .boolean(b)
        case .integer(let i): return .integer(i)
        case .double(let d): return .double(d)
        case .number(let text):
            // Only from a parse with exact numbers (not this file's): the same typing as the parser's.
            if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                guard let integer = Int64(text) else { throw UserInfoJSONError(path: path, problem: "integer \(text) does not fit in 64 bits") }
                return .integer(integer)
            }
            return .double(Double(text) ?? .nan)
        case .string(let s): return .string(s)
        case .array(let items):
            var result: [PropertyValue] = []
            result.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                result.append(try value(from: item, path: "\(path)[\(index)]", depth: depth + 1))
            }
            return .array(result)
        case .object(let members):
            if members.count == 1, let tagged = try taggedValue(members[0], path: path) { return tagged }
            var result: [String: PropertyValue] = [:]
            for member in members {
                let memberPath = path + JSONPath.member(member.key)
                if member.key == bytesKey || member.key == dateKey {
                    throw UserInfoJSONError(path: memberPath, problem: "\(member.key) is reserved and must be the only key of its object")
                }
                guard result[member.key] == nil else { throw UserInfoJSONError(path: memberPath, problem: "duplicate key") }
                result[member.key] = try value(from: member.value, path: memberPath, depth: depth + 1)
            }
            return .dictionary(result)
        }
    }

    private static func taggedValue(_ member: (key: String, value: JSONValue), path: String) throws(UserInfoJSONError) -> PropertyValue? {
        let memberPath = path + JSONPath.member(member.key)
        switch member.key {
        case bytesKey:
            guard case .string(let text) = member.value else {
                throw UserInfoJSONError(path: memberPath, problem: "$bytes must be a base64 string")
            }
            guard let data = Data(base64Encoded: text) else {
                throw UserInfoJSONError(path: memberPath, problem: "$bytes is not valid base64")
            }
            return .bytes(Array(data))
        case dateKey:
            switch member.value {
            case .string(let text):
                guard let seconds = RFC3339.seconds(from: text) else {
                    throw UserInfoJSONError(path: memberPath, problem: "$date is not an RFC 3339 date such as 2026-11-29T12:00:00Z")
                }
                return .date(seconds)
            case .integer(let seconds): return .date(Double(seconds))
            case .double(let seconds) where seconds.isFinite: return .date(seconds)
            default:
                throw UserInfoJSONError(path: memberPath, problem: "$date must be an RFC 3339 string or finite seconds since 1970")
            }
        default:
            return nil
        }
    }

    /// The JSON form of a userInfo dictionary (members sorted by key).
    public static func json(from userInfo: [String: PropertyValue]) -> JSONValue {
        json(from: .dictionary(userInfo))
    }

    public static func json(from value: PropertyValue) -> JSONValue {
        switch value {
        case .string(let s): .string(s)
        case .integer(let i): .integer(i)
        case .double(let d): .double(d)
        case .boolean(let b): .boolean(b)
        case .bytes(let bytes): .object([(bytesKey, .string(Data(bytes).base64EncodedString()))])
        case .date(let seconds):
            if let text = RFC3339.string(from: seconds) {
                .object([(dateKey, .string(text))])
            } else {
                .object([(dateKey, .double(seconds))])
            }
        case .array(let items): .array(items.map { json(from: $0) })
        case .dictionary(let entries):
            .object(entries.keys.sorted().compactMap { key in entries[key].map { (key, json(from: $0)) } })
        }
    }
}

public struct UserInfoJSONError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where in the document, e.g. `$.pages[2]`.
    public var path: String
    public var problem: String
    public var description: String { "userInfo JSON at \(path): \(problem)" }
}

/// RFC 3339 timestamps <-> seconds since 1970-01-01T00:00:00Z, proleptic Gregorian, years 0000–9999.
enum RFC3339 {
    static func seconds(from text: String) -> Double? {
        let b = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= b.count else { return nil }
            var value = 0
            for i in range {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                value = value * 10 + Int(b[i] - 0x30)
            }
            return value
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"), b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
              hour <= 23, minute <= 59, second <= 60 else { return nil }
        var index = 19
        var fraction = 0.0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < b.count, b[index] >= 0x30, b[index] <= 0x39 {
                fraction += Double(b[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < b.count else { return nil }
        var offsetSeconds = 0
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == b.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == b.count, b[index + 3] == UInt8(ascii: ":"),
                  let hours = number(index + 1..<index + 3), let minutes = number(index + 4..<index + 6),
                  hours <= 23, minutes <= 59 else { return nil }
            offsetSeconds = (hours * 3600 + minutes * 60) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
        default:
            return nil
        }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let whole = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Double(whole) + fraction
    }

    /// UTC, with a fraction only when needed (microsecond precision); nil outside years 0000–9999.
    static func string(from seconds: Double) -> String? {
        guard seconds.isFinite else { return nil }
        let whole = seconds.rounded(.down)
        guard whole >= -62_167_219_200, whole < 253_402_300_800 else { return nil }
        var totalSeconds = Int(whole)
        var micros = Int(((seconds - whole) * 1_000_000).rounded())
        if micros == 1_000_000 { totalSeconds += 1; micros = 0 }
        let days = Int((Double(totalSeconds) / 86_400).rounded(.down))
        let secondOfDay = totalSeconds - days * 86_400
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        guard (0...9999).contains(year) else { return nil }
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        var text = "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
        if micros > 0 {
            var fraction = pad(micros, 6)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "Z"
    }

    static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Howard Hinnant's days_from_civil / civil_from_days algorithms.
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilDate(daysSinceEpoch days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
