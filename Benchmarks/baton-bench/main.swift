// SPDX-License-Identifier: GPL-2.0-or-later
// baton-bench: throughput of advert matching on one core (single thread), for rings of
// 1, 100 and 10,000 paired devices. See docs/benchmarks.md.
//
//   swift run -c release baton-bench [--json] [--repetitions N] [--seconds S]
#if canImport(Glibc)
import Glibc
#endif
import BatonCore
import BatonCrypto

struct Options {
    var json = false
    var repetitions = 5
    /// Minimum duration of one measurement.
    var seconds = 0.5
    var ringSizes = [1, 100, 10_000]

    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            switch argument {
            case "--json": options.json = true
            case "--repetitions":
                guard let value = remaining.popFirst().flatMap({ Int($0) }), value > 0 else { usage() }
                options.repetitions = value
            case "--seconds":
                guard let value = remaining.popFirst().flatMap({ Double($0) }), value > 0 else { usage() }
                options.seconds = value
            case "--sizes":
                guard let list = remaining.popFirst() else { usage() }
                options.ringSizes = list.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
            default: usage()
            }
        }
        return options
    }

    static func usage() -> Never {
        print("usage: baton-bench [--json] [--repetitions N] [--seconds S] [--sizes 1,100,10000]")
        exit(2)
    }
}

/// Unix epoch of "now" is irrelevant to throughput; a fixed one keeps runs comparable.
let benchmarkEpoch: UInt64 = 2_000_000
/// Distinct adverts cycled through per measurement (a busy room, not one advert in cache).
let poolSize = 1_024

struct Ring {
    var matcher: AdvertMatcher
    var members: [(id: DeviceID, keys: DerivedKeys)]
}

func makeRing(size: Int, random: some RandomSource) -> Ring {
    var matcher = AdvertMatcher(epoch: benchmarkEpoch)
    var members: [(id: DeviceID, keys: DerivedKeys)] = []
    members.reserveCapacity(size)
    for _ in 0..<size {
        let id = DeviceID(identityKey: random.bytes(32))
        let secret = AdvertisingSecret.generate(generation: 1, day: AdvertisingSecret.day(ofEpoch: benchmarkEpoch), using: random)
        matcher.setMember(id, secret: secret)
        members.append((id, DerivedKeys(secret: secret)))
    }
    return Ring(matcher: matcher, members: members)
}

/// Valid-looking ring adverts (header 0x11, random tag and sealed part) from devices outside the ring.
func foreignAdverts(random: some RandomSource) -> [[UInt8]] {
    (0..<poolSize).map { _ in [AdvertKind.ring.headerByte] + random.bytes(Protocol.advertLength - 1) }
}

/// Adverts sealed in the current epoch by distinct random members (all members when the ring is
/// smaller than the pool). One advert per member, so replays repeat as re-sightings, not errors.
func memberAdverts(_ ring: Ring, random: some RandomSource) -> [[UInt8]] {
    var indices = Array(ring.members.indices)
    // Fisher–Yates with the benchmark's random source.
    for position in indices.indices.dropLast() {
        let draw = random.bytes(8).reduce(0) { $0 << 8 | UInt64($1) }
        let other = position + Int(draw % UInt64(indices.count - position))
        indices.swapAt(position, other)
    }
    return indices.prefix(poolSize).enumerated().map { offset, index in
        let member = ring.members[index]
        let body = AdvertBody(typeHash: TypeHash(value: UInt32(truncatingIfNeeded: 0x1000 + offset)), revision: UInt32(offset),
                              flags: [.hasActivity, .hasWebpageURL])
        return RingAdvert.seal(body: body, keys: member.keys, epoch: member.keys.epochMaterial(benchmarkEpoch), sequence: 0)
    }
}

enum Expectation { case rejectedAsForeign, accepted }

/// Feeds the pool round and round for at least `seconds`; returns adverts per second.
/// Every advert must meet the expectation, or the benchmark stops: a fast wrong answer is no result.
func measure(_ matcher: inout AdvertMatcher, _ adverts: [[UInt8]], expect: Expectation, seconds: Double) -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    var processed = 0
    var elapsed = 0.0
    repeat {
        for advert in adverts {
            switch expect {
            case .rejectedAsForeign:
                do {
                    _ = try matcher.receive(advert)
                    fatalError("foreign advert accepted")
                } catch {
                    guard error == .notRingMember else { fatalError("foreign advert rejected for the wrong reason: \(error)") }
                }
            case .accepted:
                do {
                    _ = try matcher.receive(advert)
                } catch {
                    fatalError("member advert not accepted: \(error)")
                }
            }
        }
        processed += adverts.count
        let duration = clock.now - start
        elapsed = Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    } while elapsed < seconds
    return Double(processed) / elapsed
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

struct Row {
    let ringSize: Int
    let foreignPerSecond: Double
    let memberPerSecond: Double
}

// MARK: - Output

func grouped(_ value: Double) -> String {
    let digits = String(Int(value.rounded()))
    var out = ""
    for (index, character) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
        out.append(character)
    }
    return out
}

func fixed(_ value: Double, places: Int) -> String {
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    let scaled = Int((value * scale).rounded())
    let whole = String(scaled / Int(scale))
    var fraction = String(scaled % Int(scale))
    while fraction.count < places { fraction = "0" + fraction }
    return places == 0 ? whole : whole + "." + fraction
}

func padded(_ text: String, _ width: Int) -> String {
    String(repeating: " ", count: max(0, width - text.count)) + text
}

func printTable(_ rows: [Row], options: Options) {
    print("baton-bench: AdvertMatcher.receive on one thread, median of \(options.repetitions) runs of >= \(options.seconds) s each")
    print("foreign = 24-byte adverts with header 0x11 and random tag/body; member = sealed by random ring members, current epoch")
    print("")
    print("\(padded("paired devices", 14))  \(padded("foreign rejected/s", 18))  \(padded("member opened/s", 16))")
    for row in rows {
        print("\(padded(grouped(Double(row.ringSize)), 14))  \(padded(grouped(row.foreignPerSecond), 18))  \(padded(grouped(row.memberPerSecond), 16))")
    }
    if let ratios = ratios(rows) {
        print("")
        print("ratio \(grouped(Double(ratios.largest))) / \(grouped(Double(ratios.smallest))): foreign \(fixed(ratios.foreign, places: 2)), member \(fixed(ratios.member, places: 2))")
    }
}

func ratios(_ rows: [Row]) -> (smallest: Int, largest: Int, foreign: Double, member: Double)? {
    guard let small = rows.min(by: { $0.ringSize < $1.ringSize }), let large = rows.max(by: { $0.ringSize < $1.ringSize }),
          small.ringSize != large.ringSize else { return nil }
    return (small.ringSize, large.ringSize, large.foreignPerSecond / small.foreignPerSecond, large.memberPerSecond / small.memberPerSecond)
}

func printJSON(_ rows: [Row], options: Options) {
    let entries = rows.map {
        "    {\"pairedDevices\": \($0.ringSize), \"foreignRejectedPerSecond\": \(Int($0.foreignPerSecond.rounded())), "
            + "\"memberOpenedPerSecond\": \(Int($0.memberPerSecond.rounded()))}"
    }
    var lines = ["{", "  \"repetitions\": \(options.repetitions),", "  \"minimumSecondsPerRun\": \(options.seconds),",
                 "  \"results\": [", entries.joined(separator: ",\n"), "  ]"]
    if let ratios = ratios(rows) {
        lines[lines.count - 1] += ","
        lines.append("  \"ratio\": {\"of\": \"\(ratios.largest)/\(ratios.smallest)\", \"foreign\": \(fixed(ratios.foreign, places: 3)), \"member\": \(fixed(ratios.member, places: 3))}")
    }
    lines.append("}")
    print(lines.joined(separator: "\n"))
}

// MARK: - Main

let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
let random = SystemRandom()
var rows: [Row] = []
for size in options.ringSizes {
    var ring = makeRing(size: size, random: random)
    let foreign = foreignAdverts(random: random)
    let members = memberAdverts(ring, random: random)
    // Warm-up: first sightings, cached cipher contexts, page faults.
    _ = measure(&ring.matcher, members, expect: .accepted, seconds: 0.05)
    _ = measure(&ring.matcher, foreign, expect: .rejectedAsForeign, seconds: 0.05)
    var foreignRates: [Double] = []
    var memberRates: [Double] = []
    // Interleaved so that drift (thermal, other load) affects both alike.
    for _ in 0..<options.repetitions {
        foreignRates.append(measure(&ring.matcher, foreign, expect: .rejectedAsForeign, seconds: options.seconds))
        memberRates.append(measure(&ring.matcher, members, expect: .accepted, seconds: options.seconds))
    }
    rows.append(Row(ringSize: size, foreignPerSecond: median(foreignRates), memberPerSecond: median(memberRates)))
    if !options.json {
        let runs = memberRates.map { grouped($0) }.joined(separator: " ")
        print("  ring of \(size): member runs/s \(runs)")
    }
}
if options.json { printJSON(rows, options: options) } else { print(""); printTable(rows, options: options) }
