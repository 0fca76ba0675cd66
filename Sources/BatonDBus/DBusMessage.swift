// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// Descriptors received with one message; closed when the last holder of the message lets go.
final class ReceivedDescriptors: @unchecked Sendable {
    let descriptors: [Int32]
    init(_ descriptors: [Int32]) { self.descriptors = descriptors }
    deinit { for descriptor in descriptors { _ = close(descriptor) } }
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
            for duplicate in reader.duplicates { _ = close(duplicate) }
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

    /// Parses one whole message (`bytes` holds exactly it) with the descriptors that came with it.
    /// Throws for anything the specification does not allow in a header; the body is checked when read.
    static func parse(_ bytes: [UInt8], takingDescriptorsFrom queue: inout DescriptorQueue) throws(DBusError) -> DBusMessage {
        let budget = DBusArgumentBudget.standard
        guard bytes.count >= 16, bytes[0] == UInt8(ascii: "l") || bytes[0] == UInt8(ascii: "B"), bytes[3] == 1, bytes[1] != 0 else {
            throw .failed("malformed message header")
        }
        let kind = bytes[1] <= 4 ? Kind(rawValue: bytes[1]) ?? .unknown : .unknown
        var message = DBusMessage(kind: kind)
        message.littleEndian = bytes[0] == UInt8(ascii: "l")
        message.flags = bytes[2]
        var reader = DBusWireReader(bytes: bytes, from: 4, littleEndian: message.littleEndian, budget: budget)
        let bodyLength = Int(try reader.readUInt32())
        message.serial = try reader.readUInt32()
        guard message.serial != 0 else { throw .failed("message with serial 0") }
        let fieldsLength = Int(try reader.readUInt32())
        guard fieldsLength <= bytes.count - 16 else { throw .failed("header fields run past the message") }
        let fieldsEnd = 16 + fieldsLength
        var fields = DBusWireReader(bytes: bytes, from: 16, to: fieldsEnd, littleEndian: message.littleEndian, budget: budget)
        var descriptorCount = 0
        while !fields.isAtEnd {
            try fields.align(8)
            let code = try fields.readByte()
            var index = 0
            guard case .variant(let value) = try fields.readValue(Array("v".utf8), &index, depth: 0) else {
                throw .failed("malformed header field")
            }
            func text(_ type: UInt8) throws(DBusError) -> String {
                guard value.signature.utf8.first == type, let string = value.stringValue else {
                    throw .failed("header field \(code) has type \(value.signature)")
                }
                return string
            }
            switch code {
            case 1: message.path = try text(UInt8(ascii: "o"))
            case 2:
                let name = try text(UInt8(ascii: "s"))
                guard DBusNames.isValidInterface(name.utf8) else { throw .failed("invalid interface in header") }
                message.interface = name
            case 3:
                let name = try text(UInt8(ascii: "s"))
                guard DBusNames.isValidMember(name.utf8) else { throw .failed("invalid member in header") }
                message.member = name
            case 4:
                let name = try text(UInt8(ascii: "s"))
                guard DBusNames.isValidInterface(name.utf8) else { throw .failed("invalid error name in header") }
                message.errorName = name
            case 5:
                guard case .uint32(let serial) = value, serial != 0 else { throw .failed("invalid reply serial in header") }
                message.replySerial = serial
            case 6:
                let name = try text(UInt8(ascii: "s"))
                guard DBusNames.isValidBusName(name.utf8, asReceived: true) else { throw .failed("invalid destination in header") }
                message.destination = name
            case 7:
                let name = try text(UInt8(ascii: "s"))
                guard DBusNames.isValidBusName(name.utf8, asReceived: true) else { throw .failed("invalid sender in header") }
                message.sender = name
            case 8: message.signature = Array(try text(UInt8(ascii: "g")).utf8)
            case 9:
                guard case .uint32(let count) = value, count <= DBusWireWriter.maxDescriptors else {
                    throw .failed("invalid descriptor count in header")
                }
                descriptorCount = Int(count)
            default: break  // unknown fields are ignored (the specification says so)
            }
        }
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
        // Fewer may have come than the header names: the kernel drops what it cannot install (the
        // process at its descriptor limit). The message stays readable up to its missing `h`
        // values, which refuse it as a call's InvalidArgs; the connection goes on.
        let descriptors = queue.take(upTo: descriptorCount)
        message.received = descriptors.isEmpty ? nil : ReceivedDescriptors(descriptors)
        message.bytes = bytes
        message.bodyStart = bodyStart
        return message
    }
}

/// Descriptors received on the socket, in order, until the messages they came with claim them.
struct DescriptorQueue {
    private var pending: [Int32] = []

    mutating func append(_ descriptors: [Int32]) { pending += descriptors }

    /// The next `count` descriptors, or all there are when fewer arrived.
    mutating func take(upTo count: Int) -> [Int32] {
        let taken = Array(pending.prefix(count))
        pending.removeFirst(taken.count)
        return taken
    }

    mutating func closeAll() {
        for descriptor in pending { _ = close(descriptor) }
        pending = []
    }
}
