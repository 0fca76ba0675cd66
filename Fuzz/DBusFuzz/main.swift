// Fuzzes the D-Bus unmarshaller, the path an app's CreateActivity/Update arguments take into the
// daemon: the input is a whole marshalled message, which libdbus validates and demarshals
// (dbus_message_demarshal) exactly as it does for bytes read from the bus socket; the message is
// then read by the budgeted unmarshaller under the standard budget and under a tight one.
//
// Invariants: no trap; a read within budget re-marshals and reads back to the same signature and
// value count; whatever the tight budget accepts, the standard budget accepts too; a refusal is
// only ever the budget's own error names. The same bytes also go through the incoming message
// gate's framer (IncomingMessageFramer): however they are cut, it forwards and refuses the same, and
// for a message libdbus accepts it agrees with libdbus on the length, the serial and the sender.
internal import CDBus
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

func read(_ message: OpaquePointer, _ budget: DBusArgumentBudget) -> [DBusValue]? {
    do {
        let values = try DBusMarshal.read(message, budget: budget)
        fuzzCheck(valueCount(values) <= budget.maxValues, "read more values than the budget allows")
        return values
    } catch {
        fuzzCheck(error.name == budget.tooLargeErrorName || error.name == budget.invalidErrorName,
                  "refusal with an unexpected error name \(error.name)")
        return nil
    }
}

/// TODO(BatonAPI): once the strict PropertyValue <-> D-Bus coding (today UserInfoCoding in
/// BatonService, which is too heavy to link here) moves to the BatonAPI module, decode every
/// a{sv} argument read here as a userInfo and check that whatever decodes re-encodes and decodes
/// to the same PropertyValue.
func decodeAsUserInfo(_ values: [DBusValue]) {}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let data, count > 0, count <= 1 << 20 else { return 0 }
    let message: OpaquePointer? = data.withMemoryRebound(to: CChar.self, capacity: count) { bytes in
        // A NULL error makes libdbus return NULL for invalid input without allocating an error.
        dbus_message_demarshal(bytes, Int32(count), nil)
    }
    checkFramer(UnsafeBufferPointer(start: data, count: count), message: message)
    guard let message else { return 0 }
    defer { dbus_message_unref(message) }
    let standard = read(message, .standard)
    guard let tight = read(message, tightBudget) else { return 0 }
    fuzzCheck(standard == tight || tight.contains(where: containsNaN), "the standard budget refused what the tight one read")
    decodeAsUserInfo(tight)
    // Received file descriptors are not real here (demarshalled bytes carry none).
    guard !tight.contains(where: containsFD) else { return 0 }
    guard let copy = dbus_message_new_signal("/fuzz", "org.fuzz", "Copy") else { return 0 }
    defer { dbus_message_unref(copy) }
    do {
        try DBusMarshal.append(tight, to: copy)
    } catch {
        fuzzCheck(false, "a value the unmarshaller produced does not marshal: \(error)")
    }
    let again = read(copy, .standard)
    fuzzCheck(again.map { $0.map(\.signature) } == tight.map(\.signature), "signature changed in a round trip")
    fuzzCheck(again.map(valueCount) == valueCount(tight), "value count changed in a round trip")
    return 0
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

/// A method call carrying `values`, marshalled to bytes as it would travel on the bus.
func marshalledCall(_ values: [DBusValue]) -> [UInt8] {
    guard let message = dbus_message_new_method_call("org.baton", "/org/baton", "org.baton.Manager1", "CreateActivity") else { return [] }
    defer { dbus_message_unref(message) }
    try? DBusMarshal.append(values, to: message)
    dbus_message_set_serial(message, 1)
    var buffer: UnsafeMutablePointer<CChar>? = nil
    var length: Int32 = 0
    guard dbus_message_marshal(message, &buffer, &length) != 0, let buffer else { return [] }
    defer { dbus_free(buffer) }
    return buffer.withMemoryRebound(to: UInt8.self, capacity: Int(length)) { Array(UnsafeBufferPointer(start: $0, count: Int(length))) }
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
                            .array(elementSignature: "ad", [.array(elementSignature: "d", [.double(1), .double(2)])])]),
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
