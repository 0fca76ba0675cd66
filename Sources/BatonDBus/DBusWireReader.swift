// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// Reads values of a known signature from wire-format bytes, checking every bound, every padding
/// byte and every value (UTF-8, names, booleans, nesting) as it goes, and counting values and
/// string bytes against a budget: a message over its budget is refused before more than the budget
/// is spent in Swift values, whatever its size. Never traps on any input.
struct DBusWireReader {
    let bytes: [UInt8]
    let littleEndian: Bool
    let budget: DBusArgumentBudget
    /// The descriptors that came with the message (`h` values index them).
    let descriptors: [Int32]
    /// Duplicates made for `h` values read so far: the values own them (the caller closes them if
    /// it drops the values, e.g. after a refusal).
    private(set) var duplicates: [Int32] = []
    private(set) var position: Int
    let end: Int
    private(set) var values = 0
    private(set) var stringBytes = 0

    init(bytes: [UInt8], from start: Int = 0, to end: Int? = nil, littleEndian: Bool, budget: DBusArgumentBudget,
         descriptors: [Int32] = []) {
        self.bytes = bytes
        self.littleEndian = littleEndian
        self.budget = budget
        self.descriptors = descriptors
        self.position = start
        self.end = min(end ?? bytes.count, bytes.count)
    }

    var isAtEnd: Bool { position >= end }

    // MARK: Budget

    private mutating func spend(values count: Int) throws(DBusError) {
        values += count
        guard values <= budget.maxValues else { throw budget.tooLarge("arguments hold more than \(budget.maxValues) values") }
    }

    private mutating func spend(stringBytes count: Int) throws(DBusError) {
        stringBytes += count
        guard stringBytes <= budget.maxStringBytes else {
            throw budget.tooLarge("arguments hold more than \(budget.maxStringBytes) bytes of strings")
        }
    }

    // MARK: Primitives

    func malformed(_ what: String) -> DBusError { budget.invalid("malformed message: \(what)") }

    /// Skips padding to `alignment`; padding bytes must be zero.
    mutating func align(_ alignment: Int) throws(DBusError) {
        let target = (position + alignment - 1) & ~(alignment - 1)
        guard target <= end else { throw malformed("padding runs past the end") }
        while position < target {
            guard bytes[position] == 0 else { throw malformed("non-zero padding") }
            position += 1
        }
    }

    mutating func readByte() throws(DBusError) -> UInt8 {
        guard position < end else { throw malformed("value runs past the end") }
        defer { position += 1 }
        return bytes[position]
    }

    private mutating func readUnsigned(_ size: Int) throws(DBusError) -> UInt64 {
        try align(size)
        guard end - position >= size else { throw malformed("value runs past the end") }
        var value: UInt64 = 0
        for index in 0..<size {
            let byte = UInt64(bytes[position + index])
            value |= littleEndian ? byte << UInt64(8 * index) : byte << UInt64(8 * (size - 1 - index))
        }
        position += size
        return value
    }

    mutating func readUInt32() throws(DBusError) -> UInt32 { UInt32(truncatingIfNeeded: try readUnsigned(4)) }

    /// The bytes of an `s`/`o` (after its length) or `g` (after its length byte), NUL checked.
    private mutating func readText(length: Int) throws(DBusError) -> ArraySlice<UInt8> {
        guard length >= 0, end - position > length else { throw malformed("string runs past the end") }
        let text = bytes[position..<position + length]
        guard bytes[position + length] == 0 else { throw malformed("string without its NUL") }
        position += length + 1
        return text
    }

    private mutating func readString() throws(DBusError) -> (String, ArraySlice<UInt8>) {
        let length = Int(try readUInt32())
        let text = try readText(length: length)
        try spend(stringBytes: length)
        guard !text.contains(0), let string = String(validating: text, as: UTF8.self) else {
            throw malformed("string is not valid UTF-8 without NUL")
        }
        return (string, text)
    }

    mutating func readSignature() throws(DBusError) -> [UInt8] {
        let length = Int(try readByte())
        let text = Array(try readText(length: length))
        try spend(stringBytes: length)
        guard DBusNames.isValidSignature(text) else { throw malformed("invalid signature") }
        return text
    }

    // MARK: Values

    /// Every value of `signature` (already validated), in order.
    mutating func readAll(signature: [UInt8], depth: Int = 0) throws(DBusError) -> [DBusValue] {
        var result: [DBusValue] = []
        var index = 0
        while index < signature.count {
            result.append(try readValue(signature, &index, depth: depth))
        }
        return result
    }

    /// The value whose type starts at `signature[index]`; moves `index` past that type.
    mutating func readValue(_ signature: [UInt8], _ index: inout Int, depth: Int) throws(DBusError) -> DBusValue {
        try spend(values: 1)
        let code = signature[index]
        index += 1
        switch code {
        case UInt8(ascii: "y"): return .byte(try readByte())
        case UInt8(ascii: "b"):
            let raw = try readUInt32()
            guard raw <= 1 else { throw malformed("boolean other than 0 or 1") }
            return .boolean(raw == 1)
        case UInt8(ascii: "n"): return .int16(Int16(bitPattern: UInt16(truncatingIfNeeded: try readUnsigned(2))))
        case UInt8(ascii: "q"): return .uint16(UInt16(truncatingIfNeeded: try readUnsigned(2)))
        case UInt8(ascii: "i"): return .int32(Int32(bitPattern: try readUInt32()))
        case UInt8(ascii: "u"): return .uint32(try readUInt32())
        case UInt8(ascii: "x"): return .int64(Int64(bitPattern: try readUnsigned(8)))
        case UInt8(ascii: "t"): return .uint64(try readUnsigned(8))
        case UInt8(ascii: "d"): return .double(Double(bitPattern: try readUnsigned(8)))
        case UInt8(ascii: "h"):
            let slot = Int(try readUInt32())
            guard slot < descriptors.count else { throw malformed("file descriptor index \(slot) of \(descriptors.count)") }
            // The reader of a value owns what it gets; the message keeps its own until it goes.
            let duplicate = fcntl(descriptors[slot], F_DUPFD_CLOEXEC, 0)
            guard duplicate >= 0 else { throw DBusError.failed("cannot duplicate a received file descriptor: errno \(errno)") }
            duplicates.append(duplicate)
            return .unixFD(duplicate)
        case UInt8(ascii: "s"): return .string(try readString().0)
        case UInt8(ascii: "o"):
            let (text, raw) = try readString()
            guard DBusNames.isValidPath(raw) else { throw malformed("invalid object path") }
            return .objectPath(text)
        case UInt8(ascii: "g"): return .signature(String(decoding: try readSignature(), as: UTF8.self))
        case UInt8(ascii: "v"):
            guard depth < budget.maxDepth else { throw budget.tooLarge("arguments nest containers deeper than \(budget.maxDepth)") }
            let inner = try readSignature()
            guard DBusNames.isSingleCompleteType(inner) else { throw budget.invalid("variant does not hold exactly one value") }
            var innerIndex = 0
            return .variant(try readValue(inner, &innerIndex, depth: depth + 1))
        case UInt8(ascii: "("):
            guard depth < budget.maxDepth else { throw budget.tooLarge("arguments nest containers deeper than \(budget.maxDepth)") }
            try align(8)
            var fields: [DBusValue] = []
            while index < signature.count, signature[index] != UInt8(ascii: ")") {
                fields.append(try readValue(signature, &index, depth: depth + 1))
            }
            index += 1
            guard !fields.isEmpty else { throw budget.invalid("empty struct in message") }
            return .structure(fields)
        case UInt8(ascii: "a"):
            guard depth < budget.maxDepth else { throw budget.tooLarge("arguments nest containers deeper than \(budget.maxDepth)") }
            return try readArray(signature, &index, depth: depth)
        default:
            throw budget.invalid("unsupported D-Bus type code \(code)")
        }
    }

    /// Moves past the value whose type starts at `signature[index]` (a valid signature) by framing
    /// alone: lengths, alignment and nested variants' signatures are checked, the values are not
    /// (no UTF-8, boolean, name or duplicate-key checks, no descriptor lookups; arrays are skipped by
    /// their length). For header fields D-Bus does not define, which a bus may forward unchecked.
    mutating func skipValue(_ signature: [UInt8], _ index: inout Int, depth: Int) throws(DBusError) {
        guard depth <= DBusWireReader.maxSkippedDepth else { throw malformed("values nest deeper than \(DBusWireReader.maxSkippedDepth)") }
        let code = signature[index]
        index += 1
        func skip(_ size: Int) throws(DBusError) {
            try align(size)
            guard end - position >= size else { throw malformed("value runs past the end") }
            position += size
        }
        switch code {
        case UInt8(ascii: "y"): try skip(1)
        case UInt8(ascii: "n"), UInt8(ascii: "q"): try skip(2)
        case UInt8(ascii: "b"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "h"): try skip(4)
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"): try skip(8)
        case UInt8(ascii: "s"), UInt8(ascii: "o"):
            let length = Int(try readUInt32())
            guard end - position > length else { throw malformed("string runs past the end") }
            position += length + 1
        case UInt8(ascii: "g"):
            let length = Int(try readByte())
            guard end - position > length else { throw malformed("signature runs past the end") }
            position += length + 1
        case UInt8(ascii: "v"):
            let inner = try readSignature()
            guard DBusNames.isSingleCompleteType(inner) else { throw malformed("variant does not hold exactly one value") }
            var innerIndex = 0
            try skipValue(inner, &innerIndex, depth: depth + 1)
        case UInt8(ascii: "("), UInt8(ascii: "{"):
            try align(8)
            let close = code == UInt8(ascii: "(") ? UInt8(ascii: ")") : UInt8(ascii: "}")
            while index < signature.count, signature[index] != close {
                try skipValue(signature, &index, depth: depth + 1)
            }
            index += 1
        case UInt8(ascii: "a"):
            guard let elementEnd = DBusNames.endOfSingleType(signature, from: index, insideArray: true) else {
                throw malformed("malformed array signature")
            }
            let element = signature[index]
            index = elementEnd
            let length = Int(try readUInt32())
            guard length <= DBusWireWriter.maxArrayBytes else { throw malformed("array of \(length) bytes") }
            try align(DBusNames.alignment(of: element))
            guard end - position >= length else { throw malformed("array runs past the end") }
            position += length
        default:
            throw malformed("unsupported D-Bus type code \(code)")
        }
    }

    /// The D-Bus specification's bound on nesting (32 arrays and 32 structs, variants included).
    static let maxSkippedDepth = 64

    private mutating func readArray(_ signature: [UInt8], _ index: inout Int, depth: Int) throws(DBusError) -> DBusValue {
        let elementStart = index
        guard let elementEnd = DBusNames.endOfSingleType(signature, from: elementStart, insideArray: true) else {
            throw budget.invalid("malformed array signature")
        }
        index = elementEnd
        let element = Array(signature[elementStart..<elementEnd])
        let length = Int(try readUInt32())
        guard length <= DBusWireWriter.maxArrayBytes else { throw malformed("array of \(length) bytes") }
        try align(DBusNames.alignment(of: element[0]))
        guard end - position >= length else { throw malformed("array runs past the end") }
        let arrayEnd = position + length
        if element[0] == UInt8(ascii: "{") {
            return try readDictionary(element, until: arrayEnd, depth: depth)
        }
        let elementSignature = String(decoding: element, as: UTF8.self)
        if element.count == 1, let size = DBusNames.fixedSize(of: element[0]), element[0] != UInt8(ascii: "h") {
            // The count is known before anything is read: an oversized array is refused at once.
            guard length % size == 0 else { throw malformed("array length \(length) is no multiple of \(size)") }
            try spend(values: length / size)
            var elements: [DBusValue] = []
            elements.reserveCapacity(length / size)
            var elementIndex = 0
            while position < arrayEnd {
                elementIndex = 0
                values -= 1  // counted above, all at once
                elements.append(try readValue(element, &elementIndex, depth: depth + 1))
            }
            return .array(elementSignature: elementSignature, elements)
        }
        var elements: [DBusValue] = []
        while position < arrayEnd {
            var elementIndex = 0
            elements.append(try readValue(element, &elementIndex, depth: depth + 1))
        }
        guard position == arrayEnd else { throw malformed("array elements overrun its length") }
        return .array(elementSignature: elementSignature, elements)
    }

    /// `a{KV}`. Keys that compare equal (the same bytes, or strings Swift considers canonically
    /// equivalent, such as a precomposed and a decomposed "é") refuse the message: a dictionary
    /// would keep only one of them, silently dropping the other's value.
    private mutating func readDictionary(_ entry: [UInt8], until arrayEnd: Int, depth: Int) throws(DBusError) -> DBusValue {
        // entry is "{KV}"
        let keySignature = String(decoding: entry[1...1], as: UTF8.self)
        let valueSignature = String(decoding: entry[2..<entry.count - 1], as: UTF8.self)
        let inner = Array(entry[1..<entry.count - 1])
        var entries: [DBusValue: DBusValue] = [:]
        while position < arrayEnd {
            guard depth + 1 < budget.maxDepth else { throw budget.tooLarge("arguments nest containers deeper than \(budget.maxDepth)") }
            try align(8)
            var innerIndex = 0
            let key = try readValue(inner, &innerIndex, depth: depth + 2)
            let value = try readValue(inner, &innerIndex, depth: depth + 2)
            guard entries.updateValue(value, forKey: key) == nil else {
                throw budget.invalid("duplicate key in a dictionary (keys must differ, also after Unicode canonical equivalence)")
            }
        }
        guard position == arrayEnd else { throw malformed("dictionary entries overrun its length") }
        return .dictionary(keySignature: keySignature, valueSignature: valueSignature, entries)
    }
}
