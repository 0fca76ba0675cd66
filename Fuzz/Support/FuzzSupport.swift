// SPDX-License-Identifier: GPL-2.0-or-later
// Shared by every fuzz target (compiled into each one by scripts/fuzz).
import Glibc

/// Hands out the fuzzer's bytes front to back. Running out is not an error: reads return
/// what is left (possibly nothing), so every input, however short, is a valid program.
struct FuzzInput {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ start: UnsafePointer<UInt8>?, _ count: Int) {
        bytes = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    }

    var isEmpty: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + max(0, count))
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    /// A length-prefixed chunk: a 16-bit big-endian length, then up to that many bytes.
    mutating func chunk() -> [UInt8] {
        let length = Int(byte()) << 8 | Int(byte())
        return bytes(length)
    }

    mutating func rest() -> [UInt8] { bytes(bytes.count - offset) }
}

/// A broken invariant: trap so libFuzzer records the input as a crash.
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("fuzz invariant broken: \(message())") }
}

/// When BATON_FUZZ_SEED_DIR is set, writes the target's seed inputs there (scripts/fuzz uses
/// this to start each corpus from valid encodings produced by the current code).
func writeSeedsIfRequested(_ seeds: () -> [[UInt8]]) {
    guard let directory = getenv("BATON_FUZZ_SEED_DIR").map({ String(cString: $0) }) else { return }
    for (index, seed) in seeds().enumerated() {
        let path = "\(directory)/seed-\(index)"
        guard let file = fopen(path, "wb") else { continue }
        _ = seed.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }
}

extension Array where Element == UInt8 {
    /// Appends a 16-bit big-endian length and the bytes: the inverse of `FuzzInput.chunk()`.
    mutating func appendChunk(_ chunk: [UInt8]) {
        append(UInt8(truncatingIfNeeded: chunk.count >> 8))
        append(UInt8(truncatingIfNeeded: chunk.count))
        append(contentsOf: chunk)
    }
}
