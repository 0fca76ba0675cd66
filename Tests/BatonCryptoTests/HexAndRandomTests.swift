// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing

@Suite("Hex helpers")
struct HexTests {
    @Test func parsesBothCasesAndFormatsLowercase() throws {
        let bytes = try #require([UInt8](hex: "00ffA5b6"))
        #expect(bytes == [0x00, 0xff, 0xa5, 0xb6])
        #expect(bytes.hexString == "00ffa5b6")
        #expect([UInt8](hex: "") == [])
        #expect([UInt8]().hexString == "")
    }

    @Test(arguments: ["0", "abc", "zz", "0g", " 00", "00 ", "é0"])
    func rejectsMalformedText(_ text: String) {
        #expect([UInt8](hex: text) == nil)
    }

    @Test func roundTripsEveryByteValue() {
        let all = [UInt8](0...255)
        #expect([UInt8](hex: all.hexString) == all)
    }
}

@Suite("Randomness")
struct RandomTests {
    @Test func systemRandomFillsRequestedCount() {
        let random = SystemRandom()
        let first = random.bytes(32)
        let second = random.bytes(32)
        #expect(first.count == 32)
        // A repeat of 256 random bits would mean the generator is broken.
        #expect(first != second)
        #expect(random.bytes(0).isEmpty)
        #expect(random.bytes(-4).isEmpty)
    }

    @Test func fakeSourceIsDeterministic() {
        #expect(FakeCountingRandom(start: 250).bytes(8) == [250, 251, 252, 253, 254, 255, 0, 1])
    }
}
