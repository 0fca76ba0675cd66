// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// Descriptors received with one message; closed when the last holder of the message lets go.
final class ReceivedDescriptors: @unchecked Sendable {
    let descriptors: [Int32]
    init(_ descriptors: [Int32]) { self.descriptors = descriptors }
    deinit { DescriptorNumbers.close(descriptors) }
}

/// One D-Bus message: the fixed header, the header fields Baton uses, and the body as bytes
/// (D-Bus specification, "Message Format"). Parsing checks every field; the body is read only
/// when asked, within a budget (`arguments(budget:)`).
struct DBusMessage: @unchecked Sendable {
    enum Kind: UInt8 {
        case methodCall = 1, methodReturn = 2, error = 3, signal = 4
        /// A type this specification version does not define: received, it is ignored (as the
        /// specification says), never an error that would drop the connection.
        case unknown = 255
    }
    static let noReplyExpectedFlag: UInt8 = 0x1

    var kind: Kind
    var flags: UInt8 = 0
    var serial: UInt32 = 0
    var path: String?
    var interface: String?
    var member: String?
    var errorName: String?
    var replySerial: UInt32?
    var destination: String?
    var sender: String?
    var signature: [UInt8] = []
    var littleEndian = true
    /// The whole message as received (header included); `bodyStart` is where the body begins.
    var bytes: [UInt8] = []
    var bodyStart = 0
    var received: ReceivedDescriptors?

    init(kind: Kind) { self.kind = kind }

    static func methodCall(destination: String?, path: String, interface: String?, member: String, flags: UInt8 = 0) -> DBusMessage {
        var message = DBusMessage(kind: .methodCall)
        message.flags = flags
        message.destination = destination
        message.path = path
        message.interface = interface
        message.member = member
        return message
    }

    static func signal(path: String, interface: String, member: String, destination: String?) -> DBusMessage {
        var message = DBusMessage(kind: .signal)
        message.path = path
        message.interface = interface
        message.member = member
        message.destination = destination
        return message
    }

    /// A call to the bus itself (`org.freedesktop.DBus`).
    static func busCall(_ member: String, flags: UInt8 = 0) -> DBusMessage {
        methodCall(destination: busName, path: busPath, interface: busInterface, member: member, flags: flags)
    }

    var expectsReply: Bool { kind == .methodCall && flags & DBusMessage.noReplyExpectedFlag == 0 }
    var signatureString: String { String(decoding: signature, as: UTF8.self) }

    /// The body's values, read within `budget`; `h` values are duplicates the caller owns.
    func arguments(budget: DBusArgumentBudget) throws(DBusError) -> [DBusValue] {
        var reader = DBusWireReader(bytes: bytes, from: bodyStart, littleEndian: littleEndian, budget: budget,
                                    descriptors: received?.descriptors ?? [])
        do throws(DBusError) {
            let values = try reader.readAll(signature: signature)
            guard reader.isAtEnd else { throw reader.malformed("body longer than its signature") }
            return values
        } catch {
            DescriptorNumbers.close(reader.duplicates)
            throw error
        }
    }

    // MARK: Encoding

    /// The message with `body` (values already validated), ready to send, and the descriptor
    /// duplicates that travel with it (the caller closes them once sent).
    func encoded(body values: [DBusValue]) throws(DBusError) -> (bytes: [UInt8], descriptors: [Int32]) {
        var body = DBusWireWriter()
        do {
            for value in values { try body.write(value) }
        } catch {
            body.closeDescriptors()
            throw error
        }
        let bodySignature = values.map(\.signature).joined()
        var header = DBusWireWriter()
        header.byte(UInt8(ascii: "l"))
        header.byte(kind.rawValue)
        header.byte(flags)
        header.byte(1)
        header.uint32(UInt32(body.bytes.count))
        header.uint32(serial)
        do {
            try header.array(elementAlignment: 8) { (fields) throws(DBusError) in
                func field(_ code: UInt8, _ value: DBusValue) throws(DBusError) {
                    fields.pad(to: 8)
                    fields.byte(code)
                    try fields.write(.variant(value))
                }
                if let path { try field(1, .objectPath(path)) }
                if let interface { try field(2, .string(interface)) }
                if let member { try field(3, .string(member)) }
                if let errorName { try field(4, .string(errorName)) }
                if let replySerial { try field(5, .uint32(replySerial)) }
                if let destination { try field(6, .string(destination)) }
                if let sender { try field(7, .string(sender)) }
                if !bodySignature.isEmpty { try field(8, .signature(bodySignature)) }
                if !body.descriptors.isEmpty { try field(9, .uint32(UInt32(body.descriptors.count))) }
            }
        } catch {
            body.closeDescriptors()
            throw error
        }
        header.pad(to: 8)
        guard header.bytes.count + body.bytes.count <= DBusWireWriter.maxMessageBytes else {
            body.closeDescriptors()
            throw .invalidArgs("message of \(header.bytes.count + body.bytes.count) bytes is over the D-Bus limit")
        }
        return (header.bytes + body.bytes, body.takeDescriptors())
    }

    // MARK: Parsing

    /// Parses one whole message (`bytes` holds exactly it, framed by its fixed header) with the
    /// descriptors that came with it (the message takes them: they are closed if it is refused).
    ///
    /// Header fields D-Bus does not define are skipped by their framing alone (dbus-broker forwards
    /// them as sent: an `h` there, or a dictionary with a repeated key, is no reason to refuse the
    /// message). A header the specification does not allow refuses the message alone
    /// (`.malformed`, with what could be read of the header, to answer a call); only descriptors
    /// other than the header names (`.unframeable`) mean the stream itself cannot be trusted.
    static func parse(_ bytes: [UInt8], descriptors: [Int32]) throws(IncomingRefusal) -> DBusMessage {
        // Owned from here on: a refusal below drops them, closing each once.
        let owned = descriptors.isEmpty ? nil : ReceivedDescriptors(descriptors)
        var attempt = HeaderAttempt()
        var parsed: DBusMessage
        do throws(DBusError) {
            parsed = try parseHeader(bytes, into: &attempt)
        } catch {
            attempt.reason = error.message
            throw .malformed(attempt)
        }
        guard attempt.descriptorCount == descriptors.count else {
            throw .unframeable("a message names \(attempt.descriptorCount) file descriptors in its header and \(descriptors.count) came with it")
        }
        parsed.received = owned
        return parsed
    }

    /// The header of `bytes`; `attempt` keeps what was read before any refusal.
    private static func parseHeader(_ bytes: [UInt8], into attempt: inout HeaderAttempt) throws(DBusError) -> DBusMessage {
        let budget = DBusArgumentBudget.standard
        guard bytes.count >= 16, bytes[0] == UInt8(ascii: "l") || bytes[0] == UInt8(ascii: "B"), bytes[3] == 1 else {
            throw .failed("malformed message header")
        }
        attempt.type = bytes[1]
        attempt.flags = bytes[2]
        guard bytes[1] != 0 else { throw .failed("message of type 0") }
        let kind = bytes[1] <= 4 ? Kind(rawValue: bytes[1]) ?? .unknown : .unknown
        var message = DBusMessage(kind: kind)
        message.littleEndian = bytes[0] == UInt8(ascii: "l")
        message.flags = bytes[2]
        var reader = DBusWireReader(bytes: bytes, from: 4, littleEndian: message.littleEndian, budget: budget)
        let bodyLength = Int(try reader.readUInt32())
        message.serial = try reader.readUInt32()
        attempt.serial = message.serial
        guard message.serial != 0 else { throw .failed("message with serial 0") }
        let fieldsLength = Int(try reader.readUInt32())
        guard fieldsLength <= bytes.count - 16 else { throw .failed("header fields run past the message") }
        let fieldsEnd = 16 + fieldsLength
        var fields = DBusWireReader(bytes: bytes, from: 16, to: fieldsEnd, littleEndian: message.littleEndian, budget: budget)
        // The first refusal of a field's value; reading goes on (framing allowing) to find the
        // sender, so that a call is answered.
        var refusal: DBusError?
        var seen: Set<UInt8> = []
        while !fields.isAtEnd {
            try fields.align(8)
            let code = try fields.readByte()
            let signature = try fields.readSignature()
            guard DBusNames.isSingleCompleteType(signature) else { throw .failed("header field \(code) holds other than one value") }
            guard let expected = HeaderAttempt.fieldType(code) else {
                // Not defined by the specification: ignored, and skipped by its framing alone.
                var index = 0
                try fields.skipValue(signature, &index, depth: 1)
                continue
            }
            guard signature == [expected] else {
                refusal = refusal ?? .failed("header field \(code) has type \(String(decoding: signature, as: UTF8.self))")
                var index = 0
                try fields.skipValue(signature, &index, depth: 1)
                continue
            }
            guard seen.insert(code).inserted else {
                refusal = refusal ?? .failed("header field \(code) appears twice")
                var index = 0
                try fields.skipValue(signature, &index, depth: 1)
                continue
            }
            var index = 0
            let value: DBusValue
            do throws(DBusError) {
                value = try fields.readValue(signature, &index, depth: 1)
            } catch {
                // Where the next field starts is not known for sure: the sender, if later, stays unread.
                refusal = refusal ?? error
                break
            }
            if let problem = message.setHeaderField(code, value, attempt: &attempt) { refusal = refusal ?? .failed(problem) }
        }
        if let refusal { throw refusal }
        switch kind {
        case .methodCall: guard message.path != nil, message.member != nil else { throw .failed("method call without path or member") }
        case .signal:
            guard message.path != nil, message.interface != nil, message.member != nil else { throw .failed("signal without path, interface or member") }
        case .error: guard message.errorName != nil, message.replySerial != nil else { throw .failed("error without name or reply serial") }
        case .methodReturn: guard message.replySerial != nil else { throw .failed("reply without reply serial") }
        case .unknown: break
        }
        let bodyStart = (fieldsEnd + 7) & ~7
        guard bodyStart <= bytes.count, bytes.count - bodyStart == bodyLength else { throw .failed("message length does not match its header") }
        guard bytes[fieldsEnd..<bodyStart].allSatisfy({ $0 == 0 }) else { throw .failed("non-zero header padding") }
        message.bytes = bytes
        message.bodyStart = bodyStart
        return message
    }

    /// Sets a header field the specification defines (its type already checked); the reason it is
    /// refused, if it is.
    private mutating func setHeaderField(_ code: UInt8, _ value: DBusValue, attempt: inout HeaderAttempt) -> String? {
        switch (code, value) {
        case (1, .objectPath(let text)): path = text
        case (2, .string(let name)):
            guard DBusNames.isValidInterface(name.utf8) else { return "invalid interface in header" }
            interface = name
        case (3, .string(let name)):
            guard DBusNames.isValidMember(name.utf8) else { return "invalid member in header" }
            member = name
        case (4, .string(let name)):
            guard DBusNames.isValidInterface(name.utf8) else { return "invalid error name in header" }
            errorName = name
        case (5, .uint32(let serial)):
            guard serial != 0 else { return "invalid reply serial in header" }
            replySerial = serial
            attempt.replySerial = serial
        case (6, .string(let name)):
            guard DBusNames.isValidBusName(name.utf8, asReceived: true) else { return "invalid destination in header" }
            destination = name
        case (7, .string(let name)):
            guard DBusNames.isValidBusName(name.utf8, asReceived: true) else { return "invalid sender in header" }
            sender = name
            attempt.sender = name
        case (8, .signature(let text)): signature = Array(text.utf8)
        case (9, .uint32(let count)):
            guard count <= DBusWireWriter.maxDescriptors else { return "invalid descriptor count in header" }
            attempt.descriptorCount = Int(count)
        default: return "header field \(code) has type \(value.signature)"
        }
        return nil
    }
}

/// Why a received message was not taken.
enum IncomingRefusal: Error {
    /// This message alone is dropped; the connection goes on.
    case malformed(HeaderAttempt)
    /// The stream cannot be trusted any more (not D-Bus, or descriptors that do not match the
    /// message that carried them): the connection closes.
    case unframeable(String)
}

/// What was read of a header before it was refused: enough to answer a call with an error, or to
/// end a call of ours whose reply was malformed.
struct HeaderAttempt: Sendable, Equatable {
    var type: UInt8 = 0
    var flags: UInt8 = 0
    var serial: UInt32 = 0
    var sender: String?
    var replySerial: UInt32?
    var descriptorCount = 0
    var reason = ""

    /// A method call whose caller waits for an answer (and can be told).
    var expectsReply: Bool { type == 1 && flags & DBusMessage.noReplyExpectedFlag == 0 && serial != 0 && sender != nil }

    /// The type of each header field the specification defines, nil for the others.
    static func fieldType(_ code: UInt8) -> UInt8? {
        switch code {
        case 1: UInt8(ascii: "o")
        case 2, 3, 4, 6, 7: UInt8(ascii: "s")
        case 5, 9: UInt8(ascii: "u")
        case 8: UInt8(ascii: "g")
        default: nil
        }
    }
}
