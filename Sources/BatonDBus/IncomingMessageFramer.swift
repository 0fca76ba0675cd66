// SPDX-License-Identifier: LGPL-2.1-or-later
/// The header of a message skipped because it was over the limit: enough to
/// answer a method call (sender, serial) with the method's own error, never its arguments.
struct OversizedMessage: Sendable, Equatable {
    static let methodCall: UInt8 = 1
    static let methodReturn: UInt8 = 2
    static let error: UInt8 = 3
    static let noReplyExpected: UInt8 = 0x1

    var type: UInt8
    var flags: UInt8
    var serial: UInt32
    var totalBytes: Int
    var path: String?
    var interface: String?
    var member: String?
    var sender: String?
    /// Of a method return or error: the call it answers.
    var replySerial: UInt32?

    /// A method return or an error (a reply to one of this connection's calls, if its serial matches).
    var isReply: Bool { type == OversizedMessage.methodReturn || type == OversizedMessage.error }

    /// A method call whose caller waits for an answer.
    var expectsReply: Bool {
        type == OversizedMessage.methodCall && flags & OversizedMessage.noReplyExpected == 0 && sender != nil && serial != 0
    }
}

/// Splits the binary stream the bus sends (after authentication) into messages by their fixed
/// 16-byte header, which states the whole length before any of the body arrives. Messages within
/// `limit` (`replyLimit` for method returns and errors, which answer this connection's own calls)
/// pass through unchanged; a larger one is skipped as it streams in, so it never occupies more than
/// one read buffer.
///
/// Descriptors passed with SCM_RIGHTS belong to the message whose first bytes they came with: the
/// bus sends each message with descriptors in a send of its own (dbus-daemon one message per
/// sendmsg, dbus-broker one per sendmmsg entry), with the descriptors on its first bytes, and the
/// kernel ends a read right after the data that carried descriptors. So a read's descriptors belong
/// to the message begun last in that read; they are handed on tagged with that message's number
/// (counting passed messages), never by position in a shared queue. Descriptors that come with a
/// read in which no message began break that rule: `descriptorsWithoutMessage` reports it, and the
/// connection closes (as libdbus and sd-bus drop a connection whose descriptors do not add up).
/// Those of a skipped message are reported for closing.
struct IncomingMessageFramer {
    /// The fields of a refused message's header are read when the header is at most this long.
    static let maxParsedHeaderBytes = 64 << 10

    let limit: Int
    let replyLimit: Int
    init(limit: Int, replyLimit: Int? = nil) {
        self.limit = limit
        self.replyLimit = replyLimit ?? limit
    }

    private enum Phase {
        case fixedHeader
        case refusedHeader(headerBytes: Int, totalBytes: Int)
        case passing(remaining: Int)
        case skipping(remaining: Int)
        /// Not a D-Bus header: everything passes, the parser refuses it (and the connection closes).
        case unframed
    }
    private enum Fate { case undecided, passed, skipped }

    private var phase = Phase.fixedHeader
    private var pending: [UInt8] = []
    /// Of the message begun last (the one a chunk's descriptors belong to).
    private var fate = Fate.passed
    private var heldDescriptors: [Int32] = []
    /// Messages passed on so far; the one begun last is number `passedCount - 1`.
    private var passedCount = 0

    struct Output {
        var forward: [UInt8] = []
        /// Descriptors of passed messages, by message number (0 for the first message passed).
        var forwardDescriptors: [(message: Int, descriptors: [Int32])] = []
        var closeDescriptors: [Int32] = []
        var refused: [OversizedMessage] = []
        /// Descriptors came with a read in which no message began (they are in `closeDescriptors`).
        var descriptorsWithoutMessage = false
    }

    mutating func consume(_ chunk: UnsafeRawBufferPointer, descriptors: [Int32]) -> Output {
        var output = Output()
        var index = 0
        var begun = false
        while index < chunk.count {
            switch phase {
            case .unframed:
                output.forward.append(contentsOf: chunk[index...])
                index = chunk.count
            case .passing(let remaining):
                let take = min(remaining, chunk.count - index)
                output.forward.append(contentsOf: chunk[index..<index + take])
                index += take
                phase = remaining == take ? .fixedHeader : .passing(remaining: remaining - take)
            case .skipping(let remaining):
                let take = min(remaining, chunk.count - index)
                index += take
                phase = remaining == take ? .fixedHeader : .skipping(remaining: remaining - take)
            case .fixedHeader:
                if pending.isEmpty {
                    fate = .undecided
                    begun = true
                }
                let take = min(16 - pending.count, chunk.count - index)
                pending.append(contentsOf: chunk[index..<index + take])
                index += take
                if pending.count == 16 { decide(&output) }
            case .refusedHeader(let headerBytes, let totalBytes):
                let take = min(headerBytes - pending.count, chunk.count - index)
                pending.append(contentsOf: chunk[index..<index + take])
                index += take
                if pending.count == headerBytes {
                    if let message = IncomingMessageFramer.parseHeader(pending, totalBytes: totalBytes) { output.refused.append(message) }
                    pending = []
                    phase = totalBytes == headerBytes ? .fixedHeader : .skipping(remaining: totalBytes - headerBytes)
                }
            }
        }
        if !descriptors.isEmpty {
            if !begun {
                output.descriptorsWithoutMessage = true
                output.closeDescriptors += descriptors
                return output
            }
            switch fate {
            case .passed: output.forwardDescriptors.append((passedCount - 1, descriptors))
            case .skipped: output.closeDescriptors += descriptors
            case .undecided: heldDescriptors += descriptors
            }
        }
        return output
    }

    /// Decides on a complete fixed header in `pending`.
    private mutating func decide(_ output: inout Output) {
        guard let lengths = IncomingMessageFramer.lengths(ofFixedHeader: pending) else {
            phase = .unframed
            settle(.passed, &output)
            output.forward += pending
            pending = []
            return
        }
        let isReply = pending[1] == OversizedMessage.methodReturn || pending[1] == OversizedMessage.error
        if lengths.total <= (isReply ? replyLimit : limit) {
            settle(.passed, &output)
            output.forward += pending
            pending = []
            phase = .passing(remaining: lengths.total - 16)
        } else if lengths.header <= IncomingMessageFramer.maxParsedHeaderBytes {
            settle(.skipped, &output)
            phase = lengths.header == 16 ? .skipping(remaining: lengths.total - 16)
                                         : .refusedHeader(headerBytes: lengths.header, totalBytes: lengths.total)
            if lengths.header == 16 { pending = [] }
        } else {
            settle(.skipped, &output)
            pending = []
            phase = .skipping(remaining: lengths.total - 16)
        }
    }

    /// Descriptors held for a message whose fixed header has not all arrived, handed back (to be
    /// closed) when the connection ends.
    mutating func takeHeldDescriptors() -> [Int32] {
        defer { heldDescriptors = [] }
        return heldDescriptors
    }

    private mutating func settle(_ decided: Fate, _ output: inout Output) {
        fate = decided
        if decided == .passed {
            passedCount += 1
            if !heldDescriptors.isEmpty { output.forwardDescriptors.append((passedCount - 1, heldDescriptors)) }
        } else {
            output.closeDescriptors += heldDescriptors
        }
        heldDescriptors = []
    }

    /// Header length (fixed part and fields, padded to 8) and total length, or nil if these 16 bytes
    /// are no D-Bus message header.
    static func lengths(ofFixedHeader bytes: [UInt8]) -> (header: Int, total: Int)? {
        guard bytes.count >= 16, bytes[0] == UInt8(ascii: "l") || bytes[0] == UInt8(ascii: "B"), bytes[3] == 1 else { return nil }
        let little = bytes[0] == UInt8(ascii: "l")
        let body = Int(readUInt32(bytes, at: 4, little: little))
        let fields = Int(readUInt32(bytes, at: 12, little: little))
        let header = (16 + fields + 7) & ~7
        return (header, header + body)
    }

    static func readUInt32(_ bytes: [UInt8], at offset: Int, little: Bool) -> UInt32 {
        let b = bytes[offset..<offset + 4].map(UInt32.init)
        return little ? b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24 : b[3] | b[2] << 8 | b[1] << 16 | b[0] << 24
    }

    /// The header fields of a whole header (D-Bus specification: an array of (byte code, variant)),
    /// or nil when they do not parse; bounds are checked at every step.
    static func parseHeader(_ bytes: [UInt8], totalBytes: Int) -> OversizedMessage? {
        let little = bytes[0] == UInt8(ascii: "l")
        var message = OversizedMessage(type: bytes[1], flags: bytes[2], serial: readUInt32(bytes, at: 8, little: little),
                                       totalBytes: totalBytes)
        let end = 16 + Int(readUInt32(bytes, at: 12, little: little))
        guard end <= bytes.count else { return nil }
        var position = 16
        func align(_ boundary: Int) { position = (position + boundary - 1) & ~(boundary - 1) }
        while true {
            align(8)
            guard position < end else { break }
            let code = bytes[position]
            position += 1
            guard position < end else { return nil }
            let signatureLength = Int(bytes[position])
            guard signatureLength == 1, position + 2 < end else { return nil }
            let type = bytes[position + 1]
            position += 3
            switch type {
            case UInt8(ascii: "s"), UInt8(ascii: "o"):
                align(4)
                guard position + 4 <= end else { return nil }
                let length = Int(readUInt32(bytes, at: position, little: little))
                position += 4
                guard length < end - position else { return nil }
                let text = String(decoding: bytes[position..<position + length], as: UTF8.self)
                position += length + 1
                switch code {
                case 1: message.path = text
                case 2: message.interface = text
                case 3: message.member = text
                case 7: message.sender = text
                default: break
                }
            case UInt8(ascii: "u"):
                align(4)
                guard position + 4 <= end else { return nil }
                if code == 5 { message.replySerial = readUInt32(bytes, at: position, little: little) }
                position += 4
            case UInt8(ascii: "g"):
                guard position < end else { return nil }
                position += Int(bytes[position]) + 2
            default:
                return nil
            }
        }
        return message
    }
}
