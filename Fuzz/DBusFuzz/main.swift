// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes BatonDBus's own reading of D-Bus messages, the path every byte from the bus takes into
// the daemon (an app's CreateActivity/Update arguments included), against libdbus as the
// reference: the input is a whole marshalled message, which both parse.
//
// Invariants: no trap; a message libdbus accepts (dbus_message_demarshal, which validates as it
// does for bytes from the bus socket) BatonDBus accepts too, with the same header fields, and
// reads to the same values, unless its budget refuses it or two dictionary keys compare equal (a
// refusal libdbus does not make, nor for `h` values beyond the descriptors that came); a message
// libdbus refuses BatonDBus refuses too (header or
// body); what BatonDBus reads, it writes back to bytes that libdbus accepts with the same values;
// whatever the tight budget accepts, the standard budget accepts too, and a refusal is only ever
// the budget's own error names. The same bytes also go through the framer
// (IncomingMessageFramer): however they are cut, it forwards and refuses the same, and for a
// message libdbus accepts it agrees with libdbus on the length, the serial and the sender.
internal import CLibDBus
@testable import BatonDBus

let tightBudget = DBusArgumentBudget(maxValues: 2_048, maxStringBytes: 4_096, maxDepth: 12,
                                     tooLargeErrorName: "org.fuzz.TooLarge", invalidErrorName: "org.fuzz.Invalid")

func valueCount(_ values: [DBusValue]) -> Int { values.reduce(0) { $0 + valueCount($1) } }

func valueCount(_ value: DBusValue) -> Int {
    switch value {
    case .array(_, let elements): 1 + valueCount(elements)
    case .dictionary(_, _, let entries): 1 + entries.reduce(0) { $0 + valueCount($1.key) + valueCount($1.value) }
    case .structure(let fields): 1 + valueCount(fields)
    case .variant(let inner): 1 + valueCount(inner)
    default: 1
    }
}

/// BatonDBus's reading of the body, checked against the budget's promises.
func read(_ message: DBusMessage, _ budget: DBusArgumentBudget) -> Result<[DBusValue], BatonDBus.DBusError> {
    do {
        let values = try message.arguments(budget: budget)
        fuzzCheck(valueCount(values) <= budget.maxValues, "read more values than the budget allows")
        return .success(values)
    } catch {
        fuzzCheck(error.name == budget.tooLargeErrorName || error.name == budget.invalidErrorName,
                  "refusal with an unexpected error name \(error.name)")
        return .failure(error)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let data, count > 0, count <= 1 << 20 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: count))
    // Both are given the message at the start of the input, exactly its bytes (libdbus would also
    // judge what follows it as the next message).
    var messageBytes = input
    if let lengths = IncomingMessageFramer.lengths(ofFixedHeader: input), lengths.total <= input.count {
        messageBytes = Array(input[0..<lengths.total])
    }
    let reference: OpaquePointer? = messageBytes.withUnsafeBytes { raw in
        // A NULL error makes libdbus return NULL for invalid input without allocating an error.
        dbus_message_demarshal(raw.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(raw.count), nil)
    }
    defer { if let reference { dbus_message_unref(reference) } }
    checkFramer(UnsafeBufferPointer(start: data, count: count), message: reference)

    var ours: DBusMessage?
    var refusal = "the input is shorter than its header says"
    if messageBytes.count < input.count || IncomingMessageFramer.lengths(ofFixedHeader: input)?.total == input.count {
        do throws(IncomingRefusal) {
            ours = try DBusMessage.parse(messageBytes, descriptors: [])
        } catch {
            switch error {
            case .malformed(let attempt): refusal = attempt.reason
            // No descriptors come with fuzzed bytes: a header naming some cannot be taken.
            case .unframeable: return 0
            }
        }
    }
    guard let reference else {
        // libdbus refused. BatonDBus may still read it: the bus (libdbus) refuses such a message
        // before it is routed, and the specification allows some of it (libdbus gives header field
        // 10 a type of its own; the specification says unknown fields are ignored). What counts is
        // that BatonDBus reads it without a trap and within its budget.
        if let ours { _ = read(ours, tightBudget) }
        return 0
    }
    guard let ours else {
        fuzzCheck(false, "BatonDBus refused the header of a message libdbus accepts: \(refusal)")
        return 0
    }
    checkHeader(ours, against: reference)
    let expected = ReferenceReader.read(reference)
    let standard = read(ours, .standard)
    switch standard {
    case .success(let values):
        if let expected, !values.contains(where: containsNaN) {
            fuzzCheck(values == expected, "BatonDBus read other values than libdbus: \(values) against \(expected)")
        }
        checkRoundTrip(values)
    case .failure(let error):
        // The only refusals libdbus does not make: the budget, keys that compare equal, and a
        // descriptor index beyond the descriptors that came (libdbus checks it only when read).
        fuzzCheck(error.name == DBusArgumentBudget.standard.tooLargeErrorName || error.message.contains("duplicate key")
                  || error.message.contains("file descriptor index"),
                  "BatonDBus refused the body of a message libdbus accepts: \(error)")
    }
    if case .success(let tight) = read(ours, tightBudget) {
        guard case .success(let values) = standard else {
            fuzzCheck(false, "the standard budget refused what the tight one read")
            return 0
        }
        fuzzCheck(values == tight || tight.contains(where: containsNaN), "the standard budget read other values than the tight one")
    }
    return 0
}

func checkHeader(_ ours: DBusMessage, against reference: OpaquePointer) {
    func text(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.map { String(cString: $0) } }
    let type = dbus_message_get_type(reference)
    fuzzCheck(ours.kind == .unknown ? type > 4 : Int32(ours.kind.rawValue) == type, "message type differs from libdbus")
    fuzzCheck(ours.serial == dbus_message_get_serial(reference), "serial differs from libdbus")
    fuzzCheck(ours.path == text(dbus_message_get_path(reference)), "path differs from libdbus")
    fuzzCheck(ours.interface == text(dbus_message_get_interface(reference)), "interface differs from libdbus")
    fuzzCheck(ours.member == text(dbus_message_get_member(reference)), "member differs from libdbus")
    fuzzCheck(ours.errorName == text(dbus_message_get_error_name(reference)), "error name differs from libdbus")
    fuzzCheck(ours.destination == text(dbus_message_get_destination(reference)), "destination differs from libdbus")
    fuzzCheck(ours.sender == text(dbus_message_get_sender(reference)), "sender differs from libdbus")
    fuzzCheck((ours.replySerial ?? 0) == dbus_message_get_reply_serial(reference), "reply serial differs from libdbus")
    fuzzCheck(ours.signatureString == (text(dbus_message_get_signature(reference)) ?? ""), "signature differs from libdbus")
    fuzzCheck(ours.expectsReply == (ours.kind == .methodCall && dbus_message_get_no_reply(reference) == 0), "no-reply flag differs from libdbus")
}

/// What BatonDBus writes for `values` must be a message libdbus accepts and reads back the same.
func checkRoundTrip(_ values: [DBusValue]) {
    guard !values.contains(where: containsFD) else { return }  // no real descriptors here
    let bytes = marshalledCall(values)
    fuzzCheck(!bytes.isEmpty, "a value BatonDBus read does not write")
    let copy: OpaquePointer? = bytes.withUnsafeBytes { raw in
        dbus_message_demarshal(raw.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(raw.count), nil)
    }
    guard let copy else {
        fuzzCheck(false, "libdbus refuses what BatonDBus wrote")
        return
    }
    defer { dbus_message_unref(copy) }
    if let again = ReferenceReader.read(copy), !values.contains(where: containsNaN) {
        fuzzCheck(again == values, "values changed in a round trip through libdbus")
    }
}

func containsNaN(_ value: DBusValue) -> Bool {
    switch value {
    case .double(let d): d.isNaN
    case .array(_, let elements): elements.contains(where: containsNaN)
    case .dictionary(_, _, let entries): entries.contains { containsNaN($0.key) || containsNaN($0.value) }
    case .structure(let fields): fields.contains(where: containsNaN)
    case .variant(let inner): containsNaN(inner)
    default: false
    }
}

func containsFD(_ value: DBusValue) -> Bool {
    switch value {
    case .unixFD: true
    case .array(_, let elements): elements.contains(where: containsFD)
    case .dictionary(_, _, let entries): entries.contains { containsFD($0.key) || containsFD($0.value) }
    case .structure(let fields): fields.contains(where: containsFD)
    case .variant(let inner): containsFD(inner)
    default: false
    }
}

/// A method call carrying `values`, as BatonDBus writes it for the bus.
func marshalledCall(_ values: [DBusValue]) -> [UInt8] {
    var message = DBusMessage.methodCall(destination: "org.baton", path: "/org/baton", interface: "org.baton.Manager1", member: "CreateActivity")
    message.serial = 1
    guard (try? DBusValidate.arguments(values)) != nil, let encoded = try? message.encoded(body: values) else { return [] }
    return encoded.bytes
}

/// libdbus's own reading of a message's body into DBusValues (no budget: the reference), nil when a
/// dictionary holds keys that compare equal (BatonDBus refuses those).
enum ReferenceReader {
    static func read(_ message: OpaquePointer) -> [DBusValue]? {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        return readAll(&iter)
    }

    static func readAll(_ iter: inout DBusMessageIter) -> [DBusValue]? {
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != 0 {
            guard let value = readValue(&iter) else { return nil }
            values.append(value)
            dbus_message_iter_next(&iter)
        }
        return values
    }

    static func basic<T: BitwiseCopyable>(_ iter: inout DBusMessageIter, _ initial: T) -> T {
        var value = initial
        dbus_message_iter_get_basic(&iter, &value)
        return value
    }

    static func string(_ iter: inout DBusMessageIter) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &pointer)
        return pointer.map { String(cString: $0) } ?? ""
    }

    static func readValue(_ iter: inout DBusMessageIter) -> DBusValue? {
        let type = UInt8(truncatingIfNeeded: dbus_message_iter_get_arg_type(&iter))
        switch type {
        case UInt8(ascii: "y"): return .byte(basic(&iter, UInt8(0)))
        case UInt8(ascii: "b"): return .boolean(basic(&iter, dbus_bool_t(0)) != 0)
        case UInt8(ascii: "n"): return .int16(basic(&iter, Int16(0)))
        case UInt8(ascii: "q"): return .uint16(basic(&iter, UInt16(0)))
        case UInt8(ascii: "i"): return .int32(basic(&iter, Int32(0)))
        case UInt8(ascii: "u"): return .uint32(basic(&iter, UInt32(0)))
        case UInt8(ascii: "x"): return .int64(basic(&iter, Int64(0)))
        case UInt8(ascii: "t"): return .uint64(basic(&iter, UInt64(0)))
        case UInt8(ascii: "d"): return .double(basic(&iter, Double(0)))
        case UInt8(ascii: "s"): return .string(string(&iter))
        case UInt8(ascii: "o"): return .objectPath(string(&iter))
        case UInt8(ascii: "g"): return .signature(string(&iter))
        case UInt8(ascii: "h"): return nil  // demarshalled messages carry no descriptors
        case UInt8(ascii: "v"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            guard let inner = readValue(&sub) else { return nil }
            return .variant(inner)
        case UInt8(ascii: "r"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            guard let fields = readAll(&sub) else { return nil }
            return .structure(fields)
        case UInt8(ascii: "a"):
            guard let raw = dbus_message_iter_get_signature(&iter) else { return nil }
            let signature = String(cString: raw)
            dbus_free(raw)
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            if dbus_message_iter_get_element_type(&iter) == Int32(UInt8(ascii: "e")) {
                let inner = signature.utf8.dropFirst(2).dropLast()
                var entries: [DBusValue: DBusValue] = [:]
                while dbus_message_iter_get_arg_type(&sub) == Int32(UInt8(ascii: "e")) {
                    var entry = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &entry)
                    guard let pair = readAll(&entry), pair.count == 2, entries.updateValue(pair[1], forKey: pair[0]) == nil else { return nil }
                    dbus_message_iter_next(&sub)
                }
                return .dictionary(keySignature: String(decoding: inner.prefix(1), as: UTF8.self),
                                   valueSignature: String(decoding: inner.dropFirst(), as: UTF8.self), entries)
            }
            guard let elements = readAll(&sub) else { return nil }
            return .array(elementSignature: String(signature.dropFirst()), elements)
        default:
            return nil
        }
    }
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    writeSeedsIfRequested {
        let userInfo = DBusValue.propertyDictionary([
            "page": .int64(42), "title": .string("Chapter é"), "ratio": .double(0.5), "flag": .boolean(true),
            "blob": .bytes([0, 1, 2, 255]), "when": .structure([.string("date"), .double(1.7e9)]),
            "list": .array(elementSignature: "v", [.variant(.int32(1)), .variant(.string("two"))]),
            "nested": .propertyDictionary(["k": .variant(.variant(.uint64(7)))]),
        ])
        return [
            marshalledCall([.string("org.example.Reader"), .string("Chapter 1"), userInfo,
                            .propertyDictionary(["Version": .int64(2), "Source": .objectPath("/app")])]),
            marshalledCall([.propertyDictionary(["UserInfo": userInfo, "Title": .string("t")])]),
            marshalledCall([.dictionary(keySignature: "u", valueSignature: "a{sv}", [.uint32(1): userInfo]),
                            .array(elementSignature: "(is)", [.structure([.int32(1), .string("x")])]),
                            .array(elementSignature: "ad", [.array(elementSignature: "d", [.double(1), .double(2)])]),
                            .int16(-1), .uint16(2), .uint64(3), .signature("a(sv)"), .array(elementSignature: "b", [.boolean(true)])]),
            marshalledCall([.propertyDictionary(Dictionary(uniqueKeysWithValues: (0..<300).map { ("k\($0)", DBusValue.int32(Int32($0))) }))]),
        ]
    }
    return 0
}

/// The framer on `input` in one piece and cut in pieces of a size the input's last byte picks.
func checkFramer(_ input: UnsafeBufferPointer<UInt8>, message: OpaquePointer?) {
    let limit = 512
    var whole = IncomingMessageFramer(limit: limit)
    let once = whole.consume(UnsafeRawBufferPointer(input), descriptors: [])
    var pieces = IncomingMessageFramer(limit: limit)
    let cut = Int(input[input.count - 1] % 61) + 1
    var forwarded: [UInt8] = []
    var refused: [OversizedMessage] = []
    var start = 0
    while start < input.count {
        let end = min(start + cut, input.count)
        let output = pieces.consume(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: input[start..<end])), descriptors: [])
        forwarded += output.forward
        refused += output.refused
        start = end
    }
    fuzzCheck(forwarded == once.forward && refused == once.refused, "the framer's output depends on how the stream is cut")
    fuzzCheck(once.forward.count <= input.count, "the framer forwarded more than it was given")
    guard let message else { return }
    // libdbus accepted the message at the start of the input (bytes after it are ignored there,
    // and are the next message's to the framer).
    let length = input.withMemoryRebound(to: CChar.self) { Int(dbus_message_demarshal_bytes_needed($0.baseAddress, Int32($0.count))) }
    guard length > 0, length <= input.count else { return }
    if length <= limit {
        fuzzCheck(once.forward.prefix(length).elementsEqual(input.prefix(length)), "a message within the limit was not passed whole")
    } else {
        var rest = IncomingMessageFramer(limit: limit)
        let after = rest.consume(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: input[length...])), descriptors: [])
        fuzzCheck(once.forward == after.forward, "a message over the limit was passed on")
        if let header = once.refused.first, once.refused.count > after.refused.count {
            fuzzCheck(header.totalBytes == length && header.serial == dbus_message_get_serial(message),
                      "the framer read another length or serial than libdbus")
            let sender = dbus_message_get_sender(message).map { String(cString: $0) }
            fuzzCheck(header.sender == sender, "the framer read another sender than libdbus")
        }
    }
}
