// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import Testing

/// `ReplyBook` without a socket: serials, and which reply ends which call (issue 24: the
/// connection split into a pure core and an I/O shell).
@Suite("BatonDBus core: ReplyBook")
struct ReplyBookTests {
    @Test func serialsWrapFromTheTopToOneNeverZero() {
        var book = ReplyBook<String>(first: UInt32.max - 1)
        #expect(book.takeSerial() == UInt32.max - 1)
        #expect(book.takeSerial() == UInt32.max)
        #expect(book.takeSerial() == 1)
        #expect(book.takeSerial() == 2)
        var zero = ReplyBook<String>(first: 0)
        #expect(zero.takeSerial() == 1)
    }

    @Test func aSerialAwaitingItsReplyIsNotTakenAgain() {
        var book = ReplyBook<String>(first: 7)
        book.awaitReply(to: 7, sentTo: ":1.5", "A")
        book.awaitReply(to: 8, sentTo: ":1.5", "B")
        #expect(book.takeSerial() == 9)
        // Once answered, the serial is free again (after a wrap it would come round).
        #expect(book.takeCall(endedBy: 7, from: ":1.5", isError: false) == "A")
        var wrapped = ReplyBook<String>(first: UInt32.max)
        wrapped.awaitReply(to: 1, sentTo: nil, "old")
        #expect(wrapped.takeSerial() == UInt32.max)
        #expect(wrapped.takeSerial() == 2)
    }

    @Test func aReplyEndsItsCallOnceAndUnknownSerialsEndNothing() {
        var book = ReplyBook<String>()
        let serial = book.takeSerial()
        book.awaitReply(to: serial, sentTo: ":1.5", "call")
        #expect(book.takeCall(endedBy: serial + 100, from: ":1.5", isError: false) == nil)
        #expect(book.takeCall(endedBy: nil, from: ":1.5", isError: false) == nil)
        #expect(book.count == 1)
        #expect(book.takeCall(endedBy: serial, from: ":1.5", isError: false) == "call")
        #expect(!book.isAwaitingReplies)
        // A second reply to the same serial (late, or a duplicate) ends nothing.
        #expect(book.takeCall(endedBy: serial, from: ":1.5", isError: false) == nil)
    }

    @Test func forgedRepliesAreDroppedAndTheCallStillWaits() {
        var book = ReplyBook<String>()
        book.awaitReply(to: 10, sentTo: ":1.5", "direct")
        book.awaitReply(to: 11, sentTo: busName, "bus")
        book.awaitReply(to: 12, sentTo: "org.bluez", "well-known")
        // Another client of the same user guessing the serial.
        #expect(book.takeCall(endedBy: 10, from: ":1.6", isError: false) == nil)
        #expect(book.takeCall(endedBy: 10, from: ":1.6", isError: true) == nil)
        #expect(book.takeCall(endedBy: 11, from: ":1.6", isError: false) == nil)
        #expect(book.serials == [10, 11, 12])
        // Whoever owns a well-known name may answer for it (the owner is not known here).
        #expect(book.takeCall(endedBy: 12, from: ":1.9", isError: false) == "well-known")
        #expect(book.takeCall(endedBy: 11, from: busName, isError: false) == "bus")
    }

    @Test func anErrorFromTheBusEndsACallToAnotherPeer() {
        var book = ReplyBook<String>()
        book.awaitReply(to: 20, sentTo: ":1.5", "gone")
        // The bus answers for a callee that disconnected: an error, never a method return.
        #expect(book.takeCall(endedBy: 20, from: busName, isError: false) == nil)
        #expect(book.takeCall(endedBy: 20, from: busName, isError: true) == "gone")
        book.awaitReply(to: 21, sentTo: ":1.5", "refused")
        #expect(book.takeCall(endedBy: 21, from: ":1.5", isError: true) == "refused")
    }

    @Test func aTimedOutCallIsNotEndedByItsLateReply() {
        var book = ReplyBook<String>()
        book.awaitReply(to: 30, sentTo: ":1.5", "slow")
        #expect(book.remove(30) == "slow")
        #expect(book.remove(30) == nil)
        #expect(book.takeCall(endedBy: 30, from: ":1.5", isError: false) == nil)
    }

    @Test func disconnectHandsBackEveryWaitingCallOnce() {
        var book = ReplyBook<String>()
        for (serial, name) in [(42, "c"), (5, "a"), (17, "b")] { book.awaitReply(to: UInt32(serial), sentTo: nil, name) }
        _ = book.takeCall(endedBy: 17, from: ":1.1", isError: false)
        #expect(book.takeAll() == ["a", "c"])
        #expect(book.takeAll().isEmpty)
        #expect(!book.isAwaitingReplies)
        #expect(book.takeCall(endedBy: 5, from: nil, isError: false) == nil)
    }
}
