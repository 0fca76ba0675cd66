// SPDX-License-Identifier: GPL-2.0-or-later
import BatonJSON
// Fuzzes BatonStore's JSON coder (the state files, which are hostile ground): the input is a JSON
// text. scripts/fuzz compiles Sources/BatonStore/JSON/*.swift into this target (internal types).
// Invariants: parsing never traps; whatever parses, decoded as any JSON shape, encodes (compact
// and pretty) to text that decodes to the same shape again, and compact and pretty text of one
// value parse to the same document; a record type
// decoded from the input re-encodes to text that decodes to the same record and encodes to the same text.

/// Any JSON shape. Equal as JSON values: an integer equals the double of the same value (text
/// such as "1.00000000000000001" reads as the double 1.0, which is written "1" and reads as 1).
indirect enum Shape: Codable, Equatable {
    case null, bool(Bool), integer(Int64), number(Double), string(String), array([Shape]), object([String: Shape])

    init(from decoder: any Decoder) throws {
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { self = .null; return }
        if let value = try? single.decode(Bool.self) { self = .bool(value); return }
        if let value = try? single.decode(Int64.self) { self = .integer(value); return }
        if let value = try? single.decode(Double.self) { self = .number(value); return }
        if let value = try? single.decode(String.self) { self = .string(value); return }
        if let value = try? single.decode([Shape].self) { self = .array(value); return }
        self = .object(try single.decode([String: Shape].self))
    }

    static func == (lhs: Shape, rhs: Shape) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.integer(let a), .number(let b)), (.number(let b), .integer(let a)): Double(a) == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }

    func encode(to encoder: any Encoder) throws {
        var single = encoder.singleValueContainer()
        switch self {
        case .null: try single.encodeNil()
        case .bool(let value): try single.encode(value)
        case .integer(let value): try single.encode(value)
        case .number(let value): try single.encode(value)
        case .string(let value): try single.encode(value)
        case .array(let value): try single.encode(value)
        case .object(let value): try single.encode(value)
        }
    }
}

/// A record of the kind the daemon keeps: optionals, nested arrays of bytes, a dictionary, an enum.
struct Record: Codable, Equatable {
    enum Owner: Codable, Equatable { case thisMachine, peer(String) }
    var name: String
    var counter: UInt64
    var small: UInt8?
    var digest: [UInt8]
    var roster: Base64Bytes?
    var owners: [String: Owner]
}

/// `canonicalText`: the text of what was read back is the text it was read from (a typed record;
/// not a shape, which may read "7.7e+18" back as an integer and write it with all its digits).
func roundTrip<Value: Codable & Equatable>(_ value: Value, _ what: String, canonicalText: Bool) {
    for pretty in [false, true] {
        guard let text = try? JSONValueEncoder(pretty: pretty).encode(value) else {
            fuzzCheck(false, "\(what) decoded but does not encode")
            return
        }
        let again = try? JSONValueDecoder().decode(Value.self, from: text)
        fuzzCheck(again == value, "\(what) changes in an encode/decode round trip")
        if canonicalText {
            fuzzCheck((try? JSONValueEncoder(pretty: pretty).encode(again)) == text, "\(what): the encoder's text is not canonical")
        }
    }
}

/// A number neither an Int64 nor a finite Double (1e999): the only JSON a `Shape` cannot hold.
func hasUnrepresentableNumber(_ value: JSONValue) -> Bool {
    switch value {
    case .number(let text): return Int64(text) == nil && !(Double(text)?.isFinite ?? false)
    case .array(let elements): return elements.contains(where: hasUnrepresentableNumber)
    case .object(let members): return members.contains { hasUnrepresentableNumber($0.value) }
    default: return false
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let bytes = input.rest()
    guard let parsed = try? JSONParser.parse(bytes) else { return 0 }
    if let shape = try? JSONValueDecoder().decode(Shape.self, from: bytes) {
        roundTrip(shape, "a JSON shape", canonicalText: false)
        // Compact and pretty text of one value parse to the same document.
        if let compact = try? JSONValueEncoder().encode(shape), let pretty = try? JSONValueEncoder(pretty: true).encode(shape) {
            fuzzCheck((try? JSONParser.parse(compact)) == (try? JSONParser.parse(pretty)), "compact and pretty text differ in value")
        }
    } else {
        // Every document is some shape, except one with a number no Swift number holds.
        fuzzCheck(hasUnrepresentableNumber(parsed), "a parsed document does not decode as a JSON shape")
    }
    if let record = try? JSONValueDecoder().decode(Record.self, from: bytes) { roundTrip(record, "a record", canonicalText: true) }
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    writeSeedsIfRequested {
        let record = Record(name: "laptop \"/\" é", counter: .max, small: 7, digest: [0, 1, 255], roster: Base64Bytes([1, 2, 3, 251]),
                            owners: ["a/b": .thisMachine, "c": .peer("00ff")])
        let shape = Shape.object(["k": .array([.null, .bool(true), .integer(-5), .number(0.1), .number(1e300), .string("\u{0}\u{1F600}")]), "": .object([:])])
        return [(try? JSONValueEncoder().encode(record)) ?? [], (try? JSONValueEncoder(pretty: true).encode(record)) ?? [],
                (try? JSONValueEncoder().encode(shape)) ?? [], Array(#"{"a":"\ud83d\ude00\u00e9\/","b":[1.5e-3,-0,2E+2]}"#.utf8)]
    }
    return 0
}
