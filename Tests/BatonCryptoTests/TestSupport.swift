// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing

/// Bytes from hex text typed in from a published vector; a typo fails the test rather than passing silently.
func hexBytes(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
    try #require([UInt8](hex: text), "malformed hex in test vector", sourceLocation: sourceLocation)
}

func ascii(_ text: String) -> [UInt8] {
    Array(text.utf8)
}

/// A deterministic RandomSource for tests: repeats a counter so results are reproducible.
struct FakeCountingRandom: RandomSource {
    let start: UInt8

    func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        for index in buffer.indices {
            buffer[index] = start &+ UInt8(truncatingIfNeeded: index)
        }
    }
}
