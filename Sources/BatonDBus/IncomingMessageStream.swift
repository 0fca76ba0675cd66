// SPDX-License-Identifier: LGPL-2.1-or-later
/// Turns what the bus socket delivers (bytes and descriptors, cut anywhere) into messages. The
/// framer skips messages over the limit as they stream in; the rest are buffered until whole and
/// then parsed, each with the descriptors the framer attributed to it (by message number, so a
/// message never takes another's). A message whose header is malformed is dropped alone and
/// reported in `malformed`; only a stream that cannot be framed any more is an error.
struct IncomingMessageStream {
    private var framer: IncomingMessageFramer
    private var buffer: [UInt8] = []
    private var consumed = 0
    /// Descriptors of messages not yet parsed, by message number, oldest first.
    private var descriptors: [(message: Int, descriptors: [Int32])] = []
    /// Messages parsed so far (the next one's number).
    private var parsedCount = 0
    /// Why the stream can no longer be trusted, once it cannot.
    private var broken: String?
    /// Messages dropped for a malformed header since the last `takeMalformed()`.
    private(set) var malformed: [HeaderAttempt] = []

    init(limit: Int, replyLimit: Int? = nil) { framer = IncomingMessageFramer(limit: limit, replyLimit: replyLimit) }

    /// Feeds one read; returns the messages refused for their size (their descriptors are closed).
    mutating func feed(_ chunk: UnsafeRawBufferPointer, descriptors received: [Int32]) -> [OversizedMessage] {
        let output = framer.consume(chunk, descriptors: received)
        if consumed > 0, consumed * 2 >= buffer.count {
            buffer.removeFirst(consumed)
            consumed = 0
        }
        buffer += output.forward
        descriptors += output.forwardDescriptors
        DescriptorNumbers.close(output.closeDescriptors)
        if output.descriptorsWithoutMessage, broken == nil {
            broken = "the bus passed file descriptors with no message to carry them"
        }
        return output.refused
    }

    /// The next whole message, nil while it is incomplete; throws when the stream cannot be trusted
    /// (not D-Bus, or descriptors that do not match their message). Malformed messages on the way
    /// are dropped and collected in `malformed`.
    mutating func next() throws(DBusError) -> DBusMessage? {
        while true {
            if let broken { throw .failed(broken) }
            let available = buffer.count - consumed
            guard available >= 16 else { return nil }
            let header = Array(buffer[consumed..<consumed + 16])
            guard let lengths = IncomingMessageFramer.lengths(ofFixedHeader: header) else {
                broken = "the bus sent something that is not a D-Bus message"
                continue
            }
            guard available >= lengths.total else { return nil }
            let bytes = Array(buffer[consumed..<consumed + lengths.total])
            consumed += lengths.total
            if consumed == buffer.count {
                buffer.removeAll(keepingCapacity: buffer.capacity <= 64 << 10)
                consumed = 0
            }
            let number = parsedCount
            parsedCount += 1
            var own: [Int32] = []
            while let first = descriptors.first, first.message < number {  // never: each number is parsed once
                DescriptorNumbers.close(first.descriptors)
                descriptors.removeFirst()
            }
            if let first = descriptors.first, first.message == number {
                own = first.descriptors
                descriptors.removeFirst()
            }
            do throws(IncomingRefusal) {
                return try DBusMessage.parse(bytes, descriptors: own)
            } catch {
                switch error {
                case .malformed(let attempt): malformed.append(attempt)
                case .unframeable(let reason): broken = reason
                }
            }
        }
    }

    /// The malformed messages dropped since the last call.
    mutating func takeMalformed() -> [HeaderAttempt] {
        defer { malformed = [] }
        return malformed
    }

    mutating func discard() {
        for entry in descriptors { DescriptorNumbers.close(entry.descriptors) }
        descriptors = []
        // Those of a message whose fixed header was still incomplete (the fuzzer found them left open).
        DescriptorNumbers.close(framer.takeHeldDescriptors())
        buffer = []
        consumed = 0
    }
}

import Glibc
