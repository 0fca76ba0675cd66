// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import Testing

/// `Outbox` without a socket: partial writes, byte accounting, descriptors passed once.
@Suite("BatonDBus core: Outbox")
struct OutboxTests {
    @Test func partialWritesCountDownAndDescriptorsGoWithTheFirstBytes() {
        var outbox = Outbox()
        let writeNow = outbox.append([1, 2, 3, 4], descriptors: [40, 41])
        let behind = outbox.append([5, 6], descriptors: [42])
        #expect(writeNow && !behind)
        #expect(outbox.bytes == 6 && outbox.count == 2)
        #expect(outbox.sent(1) == [40, 41])
        #expect(outbox.front?.sent == 1 && outbox.front?.descriptors == [])
        #expect(outbox.sent(2) == [])
        #expect(outbox.bytes == 3)
        #expect(outbox.sent(1) == [])
        // The second message is now in front, its descriptor not yet passed.
        #expect(outbox.front?.bytes == [5, 6] && outbox.front?.descriptors == [42])
        #expect(outbox.sent(2) == [42])
        #expect(outbox.isEmpty && outbox.bytes == 0 && outbox.front == nil)
        // Empty again: the next message is written at once.
        let again = outbox.append([7], descriptors: [])
        #expect(again)
    }

    @Test func closingHandsBackOnlyDescriptorsNeverPassed() {
        var outbox = Outbox()
        _ = outbox.append([1, 2], descriptors: [50])
        _ = outbox.append([3], descriptors: [51, 52])
        #expect(outbox.sent(1) == [50])
        #expect(outbox.removeAll() == [51, 52])
        #expect(outbox.isEmpty && outbox.bytes == 0)
    }

    @Test func manyMessagesStayInOrderAcrossCompaction() {
        var outbox = Outbox()
        for number in 0..<300 { _ = outbox.append([UInt8(number % 256), 0], descriptors: []) }
        var order: [UInt8] = []
        while let front = outbox.front {
            order.append(front.bytes[0])
            _ = outbox.sent(1)
            _ = outbox.sent(1)
            if order.count == 150 { for number in 300..<310 { _ = outbox.append([UInt8(number % 256), 0], descriptors: []) } }
        }
        #expect(order == (0..<310).map { UInt8($0 % 256) })
        #expect(outbox.bytes == 0)
    }

    @Test func aWriteNeverCountsMoreThanTheFrontMessageHeld() {
        var outbox = Outbox()
        _ = outbox.append([1, 2], descriptors: [])
        _ = outbox.append([3, 4], descriptors: [])
        _ = outbox.sent(10)
        #expect(outbox.bytes == 2 && outbox.count == 1)
        #expect(outbox.sent(0) == [] && outbox.bytes == 2)
    }
}
