// SPDX-License-Identifier: GPL-2.0-or-later
/// The Wayland wire format, the part a data-control client needs (docs/clipboard.md, "Clipboard on
/// Wayland"). A message is a header of two 32-bit words in the host's byte order: the object's id,
/// then the message size in bytes (header included) in the upper 16 bits and the opcode in the lower
/// 16; its arguments follow, each a multiple of 4 bytes: `uint`/`int`/`object`/`new_id` one word; a
/// `string` a word with the length including the terminating NUL (0 for a null string), then the
/// bytes padded to 4; descriptors (`fd`) travel beside the bytes as SCM_RIGHTS and take no room.
/// Written from the protocol's documentation (wayland.freedesktop.org, "Wire Format").
///
/// Everything here parses what the compositor sends, so every length is checked before use.

/// Why the compositor's bytes could not be parsed: the connection cannot go on after any of these.
enum WaylandWireError: Error, Equatable, CustomStringConvertible {
    /// A message header with a size below 8, above the limit, or not a multiple of 4.
    case badSize(Int)
    /// An argument runs past the end of its message.
    case truncated
    /// A string without its terminating NUL, or with a NUL inside.
    case badString
    /// A required string or object was null.
    case unexpectedNull
    /// A new object of the compositor's with an id outside the compositor's range.
    case badNewID(UInt32)
    /// An event carries a descriptor that did not arrive.
    case missingDescriptor
    /// An event for an object this client does not know, or an opcode its interface lacks.
    case unknownTarget(object: UInt32, opcode: UInt16)

    var description: String {
        switch self {
        case .badSize(let size): "a message of \(size) bytes"
        case .truncated: "a message shorter than its arguments"
        case .badString: "a malformed string"
        case .unexpectedNull: "a null where a value is required"
        case .badNewID(let id): "a new object with the client's id \(id)"
        case .missingDescriptor: "a message whose file descriptor did not arrive"
        case .unknownTarget(let object, let opcode): "event \(opcode) for unknown object \(object)"
        }
    }
}

/// One message: the object it is for (or from), the opcode, the argument bytes.
struct WaylandMessage: Equatable {
    /// libwayland's limit on one message (WL_MAX_MESSAGE_SIZE in 1.21): larger ones are refused.
    static let maximumSize = 4096

    var object: UInt32
    var opcode: UInt16
    var arguments: [UInt8]
}

/// Splits the compositor's byte stream into messages, checking each header before taking its body.
struct WaylandInbox {
    private var buffer: [UInt8] = []
    private var start = 0

    /// Bytes received and not yet parsed into messages (less than one message's worth after `next`).
    var pendingCount: Int { buffer.count - start }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0, start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 1 << 16 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole message, nil when its bytes have not all arrived.
    mutating func next() throws(WaylandWireError) -> WaylandMessage? {
        guard buffer.count - start >= 8 else { return nil }
        let object = word(at: start)
        let sizeAndOpcode = word(at: start + 4)
        let size = Int(sizeAndOpcode >> 16)
        guard size >= 8, size <= WaylandMessage.maximumSize, size % 4 == 0 else { throw .badSize(size) }
        guard buffer.count - start >= size else { return nil }
        let message = WaylandMessage(object: object, opcode: UInt16(truncatingIfNeeded: sizeAndOpcode),
                                     arguments: Array(buffer[(start + 8)..<(start + size)]))
        start += size
        return message
    }

    private func word(at offset: Int) -> UInt32 {
        buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }
}

/// Reads one message's arguments in order, each checked against the bytes that are there.
struct WaylandArguments {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ message: WaylandMessage) { bytes = message.arguments }

    mutating func uint() throws(WaylandWireError) -> UInt32 {
        guard bytes.count - offset >= 4 else { throw .truncated }
        let value = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
        offset += 4
        return value
    }

    /// An object id; nil for the null object (allowed only where the protocol says "nullable").
    mutating func object() throws(WaylandWireError) -> UInt32? {
        let id = try uint()
        return id == 0 ? nil : id
    }

    /// A string; nil for a null string. Its length word counts the terminating NUL; the bytes are
    /// padded to a multiple of 4. Bytes that are not UTF-8 become U+FFFD: type names are other
    /// clients' words, which the compositor relays as they are, and one client's garbage must not
    /// end the connection (such a name is no media type and is dropped as one).
    mutating func string() throws(WaylandWireError) -> String? {
        let length = Int(try uint())
        guard length > 0 else { return nil }
        let padded = (length + 3) & ~3
        guard padded <= bytes.count - offset else { throw .truncated }
        let body = bytes[offset..<(offset + length - 1)]
        guard bytes[offset + length - 1] == 0, !body.contains(0) else { throw .badString }
        offset += padded
        return String(decoding: body, as: UTF8.self)
    }

    /// A string that must not be null.
    mutating func requiredString() throws(WaylandWireError) -> String {
        guard let text = try string() else { throw .unexpectedNull }
        return text
    }
}

/// Builds one request: the header is filled in by `bytes` once the arguments are known.
struct WaylandRequest {
    private(set) var object: UInt32
    private(set) var opcode: UInt16
    private var arguments: [UInt8] = []
    /// Descriptors sent with the request, in argument order (they travel as SCM_RIGHTS).
    private(set) var descriptors: [Int32] = []

    init(object: UInt32, opcode: UInt16) {
        self.object = object
        self.opcode = opcode
    }

    mutating func uint(_ value: UInt32) {
        withUnsafeBytes(of: value) { arguments.append(contentsOf: $0) }
    }

    /// A nullable object argument: 0 for null.
    mutating func object(_ id: UInt32?) { uint(id ?? 0) }

    mutating func string(_ text: String) { string(bytes: Array(text.utf8)) }

    /// A string given as bytes (without NUL).
    mutating func string(bytes utf8: [UInt8]) {
        uint(UInt32(utf8.count + 1))
        arguments.append(contentsOf: utf8)
        arguments.append(0)
        while arguments.count % 4 != 0 { arguments.append(0) }
    }

    mutating func descriptor(_ descriptor: Int32) { descriptors.append(descriptor) }

    /// The whole message; nil when it would exceed the size a compositor accepts.
    var bytes: [UInt8]? {
        let size = 8 + arguments.count
        guard size <= WaylandMessage.maximumSize else { return nil }
        var message: [UInt8] = []
        message.reserveCapacity(size)
        withUnsafeBytes(of: object) { message.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(size) << 16 | UInt32(opcode)) { message.append(contentsOf: $0) }
        message.append(contentsOf: arguments)
        return message
    }
}

/// The interfaces this client uses and the opcodes of their messages, from the protocols'
/// documentation: the core protocol (wl_display, wl_registry, wl_callback, wl_seat) and the two
/// data-control protocols, which have the same four interfaces with the same messages in the same
/// order: ext-data-control-v1 (wayland-protocols, staging) and wlr-data-control-unstable-v1.
enum WaylandInterface: Equatable {
    case display, registry, callback, seat
    case manager, device, source, offer

    enum Display {
        static let sync: UInt16 = 0, getRegistry: UInt16 = 1  // requests
        static let error: UInt16 = 0, deleteID: UInt16 = 1  // events
    }
    enum Registry {
        static let bind: UInt16 = 0
        static let global: UInt16 = 0, globalRemove: UInt16 = 1
    }
    enum Callback {
        static let done: UInt16 = 0
    }
    /// A data-control manager: create_data_source(new_id), get_data_device(new_id, seat), destroy.
    enum Manager {
        static let createDataSource: UInt16 = 0, getDataDevice: UInt16 = 1, destroy: UInt16 = 2
    }
    /// A data-control device: set_selection(source?), destroy, set_primary_selection(source?) (never
    /// sent here); events data_offer(new_id), selection(offer?), finished, primary_selection(offer?).
    enum Device {
        static let setSelection: UInt16 = 0, destroy: UInt16 = 1
        static let dataOffer: UInt16 = 0, selection: UInt16 = 1, finished: UInt16 = 2, primarySelection: UInt16 = 3
    }
    /// A data-control source: offer(mime_type), destroy; events send(mime_type, fd), cancelled.
    enum Source {
        static let offer: UInt16 = 0, destroy: UInt16 = 1
        static let send: UInt16 = 0, cancelled: UInt16 = 1
    }
    /// A data-control offer: receive(mime_type, fd), destroy; event offer(mime_type).
    enum Offer {
        static let receive: UInt16 = 0, destroy: UInt16 = 1
        static let offer: UInt16 = 0
    }
}

/// The first id the compositor gives objects it creates (data offers); below it, the client's own.
let waylandServerIDStart: UInt32 = 0xFF00_0000
