// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBrowserHost
import Testing

private func prefixed(_ length: UInt32) -> [UInt8] { withUnsafeBytes(of: length) { Array($0) } }

@Suite("BatonBrowserHostTests: native messaging framing")
struct NativeMessageFramingTests {
    @Test func aFrameIsTheNativeEndianLengthThenTheBytes() throws {
        let frame = try NativeMessageFraming.frame(Array("{}".utf8))
        #expect(frame == prefixed(2) + Array("{}".utf8))
    }

    @Test func aMessageTheBrowserWouldRefuseIsNotFramed() {
        #expect(throws: NativeMessageFramingError.messageTooLarge(length: 11, limit: 10)) {
            _ = try NativeMessageFraming.frame([UInt8](repeating: 0x20, count: 11), limit: 10)
        }
    }

    @Test func messagesSplitAcrossReadsAreReassembled() throws {
        let stream = prefixed(3) + Array("abc".utf8) + prefixed(0) + prefixed(2) + Array("de".utf8)
        var decoder = NativeMessageDecoder()
        var messages: [[UInt8]] = []
        for byte in stream { messages += try decoder.feed([byte]) }
        #expect(messages == [Array("abc".utf8), [], Array("de".utf8)])
        try decoder.finish()
    }

    @Test func severalMessagesInOneReadComeOutInOrder() throws {
        var decoder = NativeMessageDecoder()
        let messages = try decoder.feed(prefixed(1) + [0x41] + prefixed(1) + [0x42] + prefixed(5) + [0x43])
        #expect(messages == [[0x41], [0x42]])
        #expect(throws: NativeMessageFramingError.truncated(expected: 9, received: 5)) { try decoder.finish() }
    }

    @Test func anOversizedLengthIsRefusedBeforeItsBodyArrives() {
        var decoder = NativeMessageDecoder(limit: 1024)
        #expect(throws: NativeMessageFramingError.messageTooLarge(length: UInt32.max, limit: 1024)) {
            _ = try decoder.feed(prefixed(UInt32.max))
        }
    }

    @Test func endOfInputInsideTheLengthIsTruncation() throws {
        var decoder = NativeMessageDecoder()
        #expect(try decoder.feed([1, 0]).isEmpty)
        #expect(throws: NativeMessageFramingError.truncated(expected: 4, received: 2)) { try decoder.finish() }
    }
}
