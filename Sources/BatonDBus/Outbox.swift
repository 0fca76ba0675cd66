// SPDX-License-Identifier: LGPL-2.1-or-later
/// Messages encoded and not yet written to the bus, oldest first, and the bytes they still hold
/// (pure: the connection writes, and closes its copies of the descriptors the kernel passed).
/// Taking a written message off the front is O(1) (entries before `head` are sent; the array is
/// compacted once they are half of it).
struct Outbox {
    struct Entry {
        var bytes: [UInt8]
        /// Bytes of it written so far.
        var sent: Int
        /// Passed with its first bytes; empty once they are.
        var descriptors: [Int32]
    }

    private var entries: [Entry] = []
    private var head = 0
    /// Bytes queued and not yet written.
    private(set) var bytes = 0

    var isEmpty: Bool { head == entries.count }
    /// Messages not wholly written.
    var count: Int { entries.count - head }

    /// Queues a message; true when it is the only one (the connection writes at once; otherwise it
    /// goes after the ones before it).
    mutating func append(_ bytes: [UInt8], descriptors: [Int32]) -> Bool {
        entries.append(Entry(bytes: bytes, sent: 0, descriptors: descriptors))
        self.bytes += bytes.count
        return count == 1
    }

    /// The message to write next (from `sent` on, with `descriptors` when none of it went yet).
    var front: Entry? { isEmpty ? nil : entries[head] }

    /// Records that `written` (> 0) bytes of the front message went; returns the descriptors that
    /// went with them (the kernel passed its own copies: the connection closes these).
    mutating func sent(_ written: Int) -> [Int32] {
        guard written > 0, !isEmpty else { return [] }
        let passed = entries[head].descriptors
        entries[head].descriptors = []
        let taken = min(written, entries[head].bytes.count - entries[head].sent)
        entries[head].sent += taken
        bytes -= taken
        if entries[head].sent == entries[head].bytes.count {
            entries[head].bytes = []
            head += 1
            if head == entries.count {
                entries.removeAll(keepingCapacity: entries.capacity <= 64)
                head = 0
            } else if head >= 64, head * 2 >= entries.count {
                entries.removeFirst(head)
                head = 0
            }
        }
        return passed
    }

    /// Empties the outbox (the connection closed); returns the descriptors never passed, to close.
    mutating func removeAll() -> [Int32] {
        let unsent = entries[head...].flatMap(\.descriptors)
        entries = []
        head = 0
        bytes = 0
        return unsent
    }
}
