// SPDX-License-Identifier: LGPL-2.1-or-later
/// The serials of this connection's messages and its calls awaiting replies (pure: no I/O, no
/// clock, no lock; the connection performs what it decides). `Waiter` is whatever the connection
/// keeps per call (its completion and timer); the book only hands it back:
/// - to the reply that ends the call (its serial, from whom the call went to: `ReplyMatch`),
/// - to a timeout or a cancellation (by serial),
/// - all of them when the connection closes (each is failed once, none is left waiting).
/// A reply to a serial nobody waits for (late, answered already, or forged) ends nothing.
struct ReplyBook<Waiter> {
    private struct Entry {
        let expectedSender: String?
        let waiter: Waiter
    }

    private var next: UInt32
    private var pending: [UInt32: Entry] = [:]

    /// `first`: the serial the first message gets (2 on a bus connection: Hello was 1).
    init(first: UInt32 = 2) { next = first == 0 ? 1 : first }

    /// The serial of the next message sent: never 0 (the protocol forbids it), wrapping from
    /// UInt32.max to 1, and never one a call still waits on (two calls with one serial could take
    /// each other's reply).
    mutating func takeSerial() -> UInt32 {
        while true {
            let serial = next
            next = serial == .max ? 1 : serial + 1
            if pending[serial] == nil { return serial }
        }
    }

    /// Records the call sent with `serial` to `destination`; its reply is expected from
    /// `ReplyMatch.expectedSender(forCallTo:)`.
    mutating func awaitReply(to serial: UInt32, sentTo destination: String?, _ waiter: Waiter) {
        pending[serial] = Entry(expectedSender: ReplyMatch.expectedSender(forCallTo: destination), waiter: waiter)
    }

    var isAwaitingReplies: Bool { !pending.isEmpty }
    var count: Int { pending.count }
    /// The serials of the calls awaiting replies, lowest first.
    var serials: [UInt32] { pending.keys.sorted() }

    /// The call a reply (or an error, `isError`) with `replySerial` from `sender` ends, taken out of
    /// the book; nil when it ends none (no such call, or the reply is not from whom it went to).
    mutating func takeCall(endedBy replySerial: UInt32?, from sender: String?, isError: Bool) -> Waiter? {
        guard let replySerial, let entry = pending[replySerial],
              ReplyMatch.accepts(expectedSender: entry.expectedSender, sender: sender, isError: isError)
        else { return nil }
        pending[replySerial] = nil
        return entry.waiter
    }

    /// The call sent with `serial`, taken out (it timed out or was cancelled); nil if it has ended.
    mutating func remove(_ serial: UInt32) -> Waiter? {
        pending.removeValue(forKey: serial)?.waiter
    }

    /// Every call still waiting (lowest serial first), taken out: the connection closed.
    mutating func takeAll() -> [Waiter] {
        let all = pending.sorted { $0.key < $1.key }.map(\.value.waiter)
        pending.removeAll()
        return all
    }
}
