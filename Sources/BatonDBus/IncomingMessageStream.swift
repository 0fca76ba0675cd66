// SPDX-License-Identifier: LGPL-2.1-or-later
/// Turns what the bus socket delivers (bytes and descriptors, cut anywhere) into messages. The
/// framer skips messages over the limit as they stream in; the rest are buffered until whole and
/// then parsed, each taking its descriptors in arrival order.
struct IncomingMessageStream {
    private var framer: IncomingMessageFramer
    private var buffer: [UInt8] = []
    private var consumed = 0
    private var descriptors = DescriptorQueue()

    init(limit: Int) { framer = IncomingMessageFramer(limit: limit) }

    /// Feeds one read; returns the messages refused for their size (their descriptors are closed).
    mutating func feed(_ chunk: UnsafeRawBufferPointer, descriptors received: [Int32]) -> [OversizedMessage] {
        let output = framer.consume(chunk, descriptors: received)
        if consumed > 0, consumed * 2 >= buffer.count {
            buffer.removeFirst(consumed)
            consumed = 0
        }
        buffer += output.forward
        descriptors.append(output.forwardDescriptors)
        for descriptor in output.closeDescriptors { _ = Glibc.close(descriptor) }
        return output.refused
    }

    /// The next whole message, nil while it is incomplete; throws when the stream is not D-Bus.
    mutating func next() throws(DBusError) -> DBusMessage? {
        let available = buffer.count - consumed
        guard available >= 16 else { return nil }
        let header = Array(buffer[consumed..<consumed + 16])
        guard let lengths = IncomingMessageFramer.lengths(ofFixedHeader: header) else { throw .failed("the bus sent something that is not a D-Bus message") }
        guard available >= lengths.total else { return nil }
        let bytes = Array(buffer[consumed..<consumed + lengths.total])
        consumed += lengths.total
        if consumed == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 << 10)
            consumed = 0
        }
        return try DBusMessage.parse(bytes, takingDescriptorsFrom: &descriptors)
    }

    mutating func discard() {
        descriptors.closeAll()
        buffer = []
        consumed = 0
    }
}

import Glibc
