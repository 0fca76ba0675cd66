// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonStore

/// Random documents and random damage: the store's coder writes what Foundation wrote for any
/// shape, and on damaged text it either refuses with a typed error or reads exactly what
/// Foundation's decoder reads; it never traps.
@Suite("JSON coder fuzz")
struct JSONFuzzTests {
    /// SplitMix64: deterministic, so a failure names a seed that reproduces it.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Any JSON shape, read back the same way by both decoders (the first type that fits wins).
    indirect enum Tree: Codable, Equatable {
        case null, bool(Bool), int(Int64), uint(UInt64), double(Double), string(String), array([Tree]), object([String: Tree])

        init(from decoder: any Decoder) throws {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() { self = .null; return }
            if let value = try? single.decode(Bool.self) { self = .bool(value); return }
            if let value = try? single.decode(Int64.self) { self = .int(value); return }
            if let value = try? single.decode(UInt64.self) { self = .uint(value); return }
            if let value = try? single.decode(Double.self) { self = .double(value); return }
            if let value = try? single.decode(String.self) { self = .string(value); return }
            if let value = try? single.decode([Tree].self) { self = .array(value); return }
            self = .object(try single.decode([String: Tree].self))
        }

        func encode(to encoder: any Encoder) throws {
            var single = encoder.singleValueContainer()
            switch self {
            case .null: try single.encodeNil()
            case .bool(let value): try single.encode(value)
            case .int(let value): try single.encode(value)
            case .uint(let value): try single.encode(value)
            case .double(let value): try single.encode(value)
            case .string(let value): try single.encode(value)
            case .array(let value): try single.encode(value)
            case .object(let value): try single.encode(value)
            }
        }

        /// Equal, except where the documented rule differs: Foundation read a number with a fraction
        /// or exponent as an integer when it was 0 after rounding to a Double ("1e-400") or beyond
        /// 2^53 with its fraction cut off ("9007199254740993.5"); this coder reads an integer only
        /// when the decimal value is one, so here those are the same number as a Double.
        func matchesFoundation(_ theirs: Tree) -> Bool {
            switch (self, theirs) {
            case (.double(let ours), .int(let integer)): return ours == Double(integer)
            case (.double(let ours), .uint(let integer)): return ours == Double(integer)
            case (.array(let ours), .array(let others)):
                return ours.count == others.count && zip(ours, others).allSatisfy { $0.matchesFoundation($1) }
            case (.object(let ours), .object(let others)):
                return ours.count == others.count && ours.allSatisfy { key, value in others[key].map { value.matchesFoundation($0) } ?? false }
            default: return self == theirs
            }
        }

        static func random(depth: Int, using generator: inout SeededGenerator) -> Tree {
            switch Int.random(in: 0..<(depth > 0 ? 8 : 6), using: &generator) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &generator))
            case 2: return .int(Int64.random(in: .min ... .max, using: &generator) >> UInt64.random(in: 0..<64, using: &generator))
            case 3: return .uint(UInt64.random(in: .min ... .max, using: &generator))
            case 4:
                let bits = UInt64.random(in: .min ... .max, using: &generator)
                let value = Double(bitPattern: bits)
                return .double(value.isFinite ? value : Double(Int32.random(in: .min ... .max, using: &generator)) / 8)
            case 5: return .string(randomText(using: &generator))
            case 6: return .array((0..<Int.random(in: 0..<5, using: &generator)).map { _ in random(depth: depth - 1, using: &generator) })
            default:
                var members: [String: Tree] = [:]
                for _ in 0..<Int.random(in: 0..<5, using: &generator) {
                    members[randomText(using: &generator)] = random(depth: depth - 1, using: &generator)
                }
                return .object(members)
            }
        }

        static func randomText(using generator: inout SeededGenerator) -> String {
            let pieces = ["a", "Z", "/", "\\", "\"", "\n", "\u{0}", "\u{1F}", "\u{7F}", "é", "e\u{301}", "😀", "\u{2028}", " ", "0", "-"]
            return (0..<Int.random(in: 0..<6, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
        }
    }

    private static func foundationBytes(_ value: some Encodable, pretty: Bool) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys] : [.sortedKeys]
        return Array(try encoder.encode(value))
    }

    /// Seconds of CPU in one test would hold a thread of the shared pool (2 here) the whole time,
    /// and every other suite's tasks would wait behind it: every few rounds the loop steps aside.
    static func letOthersRun(_ round: Int) async {
        if round % 25 == 0 { await Task.yield() }
    }

    @Test func randomTreesAreWrittenAsFoundationWroteThem() async throws {
        var generator = SeededGenerator(state: 0xBA7_0001)
        for round in 0..<2_000 {
            await Self.letOthersRun(round)
            let tree = Tree.random(depth: 4, using: &generator)
            for pretty in [false, true] {
                let ours = try JSONValueEncoder(pretty: pretty).encode(tree)
                let theirs = try Self.foundationBytes(tree, pretty: pretty)
                #expect(ours == theirs, "round \(round): \(String(decoding: ours, as: UTF8.self)) vs \(String(decoding: theirs, as: UTF8.self))")
                let back = try JSONValueDecoder().decode(Tree.self, from: ours)
                #expect(back == (try JSONDecoder().decode(Tree.self, from: Data(ours))), "round \(round)")
                // Read back, an integral double may have become an integer ("1e+16"): written as Foundation writes that.
                #expect(try JSONValueEncoder(pretty: pretty).encode(back) == (try Self.foundationBytes(back, pretty: pretty)), "round \(round)")
            }
        }
    }

    /// Outcome of one decoder on one input.
    enum Outcome<Value: Equatable>: Equatable {
        case value(Value)
        case refused
    }

    private static func ours<Value: Decodable & Equatable>(_ type: Value.Type, _ bytes: [UInt8]) -> Outcome<Value> {
        do {
            return .value(try JSONValueDecoder().decode(Value.self, from: bytes))
        } catch is JSONFormatError {
            return .refused
        } catch is DecodingError {
            return .refused
        } catch {
            Issue.record("untyped error \(error)")
            return .refused
        }
    }

    private static func theirs<Value: Decodable & Equatable>(_ type: Value.Type, _ bytes: [UInt8]) -> Outcome<Value> {
        (try? JSONDecoder().decode(Value.self, from: Data(bytes))).map(Outcome.value) ?? .refused
    }

    private static let interesting: [UInt8] = Array("{}[]\",:\\0-.eE+nulltruefalse u/9".utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xED, 0xEF, 0xFF]

    static func mutate(_ bytes: [UInt8], using generator: inout SeededGenerator) -> [UInt8] {
        var out = bytes
        for _ in 0..<Int.random(in: 1...3, using: &generator) {
            guard !out.isEmpty else { return interesting.shuffled(using: &generator) }
            let at = Int.random(in: 0..<out.count, using: &generator)
            switch Int.random(in: 0..<7, using: &generator) {
            case 0: out[at] = interesting.randomElement(using: &generator)!
            case 1: out[at] = UInt8.random(in: 0...255, using: &generator)
            case 2: out.insert(interesting.randomElement(using: &generator)!, at: at)
            case 3: out.remove(at: at)
            case 4: out.removeSubrange(at...)
            case 5:
                let end = min(out.count, at + Int.random(in: 1...16, using: &generator))
                out.insert(contentsOf: out[at..<end], at: Int.random(in: 0...out.count, using: &generator))
            default: out[at] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
            }
        }
        return out
    }

    @Test func damagedDocumentsAreRefusedOrReadAsFoundationReadThem() async throws {
        var generator = SeededGenerator(state: 0xBA7_0002)
        let record = JSONCoderTests.Everything()
        let seeds = [try JSONValueEncoder().encode(record), try JSONValueEncoder(pretty: true).encode(record)]
            + (0..<6).map { _ in try! JSONValueEncoder().encode(Tree.random(depth: 5, using: &generator)) }
        var refused = 0, read = 0, foundationOnly = 0
        for round in 0..<6_000 {
            await Self.letOthersRun(round)
            let damaged = Self.mutate(seeds[round % seeds.count], using: &generator)
            let typed = Self.ours(JSONCoderTests.Everything.self, damaged)
            let tree = Self.ours(Tree.self, damaged)
            // What this coder reads, Foundation read the same; it may refuse what Foundation read
            // (a repeated key, a byte-order mark of another encoding), never the reverse.
            if case .value = typed { #expect(typed == Self.theirs(JSONCoderTests.Everything.self, damaged), "round \(round)") }
            if case .value(let ourTree) = tree {
                guard case .value(let theirTree) = Self.theirs(Tree.self, damaged), ourTree.matchesFoundation(theirTree) else {
                    Issue.record("round \(round): \(String(decoding: damaged, as: UTF8.self))")
                    continue
                }
                read += 1
            } else {
                refused += 1
            }
            if tree == .refused, case .value = Self.theirs(Tree.self, damaged) { foundationOnly += 1 }
        }
        print("JSON fuzz: 6,000 damaged documents: \(read) read as Foundation read them, \(refused) refused (\(foundationOnly) of them read by Foundation)")
        #expect(read > 0 && refused > 0)
    }

    @Test func damagedRecordBodiesAreCorruptNeverATrap() async throws {
        let path = scratchPath("json-fuzz")
        defer { removeTree(path) }
        let directory = try StateDirectory(path: path)
        let record = try DurableRecord<JSONCoderTests.Everything>(name: "everything", schemaVersion: 1, in: directory)
        try record.save(JSONCoderTests.Everything())
        let body = try JSONValueEncoder().encode(JSONCoderTests.Everything())
        var generator = SeededGenerator(state: 0xBA7_0003)
        for round in 0..<300 {
            await Self.letOthersRun(round)
            // A valid container around a damaged body: only the JSON decides.
            let damaged = Self.mutate(body, using: &generator)
            try overwrite(record.filePath, with: try RecordFormat.encode(body: damaged, schemaVersion: 1))
            do {
                let value = try record.load()
                #expect(Self.theirs(JSONCoderTests.Everything.self, damaged) == value.map(Outcome.value), "round \(round)")
            } catch {
                guard case .corrupt(_, let reason) = error else { Issue.record("round \(round): \(error)"); continue }
                #expect(reason.hasPrefix("body does not decode as Everything"), "round \(round): \(reason)")
            }
        }
    }
}
