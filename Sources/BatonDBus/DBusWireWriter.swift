// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// Marshals values in the D-Bus wire format, little-endian ("Marshaling (Wire Format)" in the
/// specification). Offsets count from the start of the buffer, which is where alignment is measured:
/// a message body starts 8-aligned, so a body written alone aligns as it will inside the message.
///
/// File descriptors are duplicated as they are written (the message owns its duplicates, the caller
/// keeps its descriptor); `closeDescriptors()` releases them when the message is not sent.
struct DBusWireWriter {
    /// The specification's limits.
    static let maxArrayBytes = 64 << 20
    static let maxMessageBytes = 128 << 20
    /// What the kernel passes in one message (SCM_MAX_FD).
    static let maxDescriptors = 253

    private(set) var bytes: [UInt8] = []
    private(set) var descriptors: [Int32] = []

    mutating func pad(to alignment: Int) {
        let remainder = bytes.count % alignment
        if remainder != 0 { bytes.append(contentsOf: repeatElement(0, count: alignment - remainder)) }
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func uint16(_ value: UInt16) {
        pad(to: 2)
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    mutating func uint32(_ value: UInt32) {
        pad(to: 4)
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    mutating func uint64(_ value: UInt64) {
        pad(to: 8)
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    /// `s` and `o`: length, bytes, NUL.
    mutating func string(_ text: String) throws(DBusError) {
        let utf8 = text.utf8
        guard !utf8.contains(0) else { throw .invalidArgs("string contains a NUL character") }
        guard utf8.count < DBusWireWriter.maxMessageBytes else { throw .invalidArgs("string of \(utf8.count) bytes is too long") }
        uint32(UInt32(utf8.count))
        bytes.append(contentsOf: utf8)
        bytes.append(0)
    }

    /// `g`: one length byte, bytes, NUL.
    mutating func signature(_ text: String) throws(DBusError) {
        let utf8 = Array(text.utf8)
        guard DBusNames.isValidSignature(utf8) else { throw .invalidArgs("invalid signature '\(text)'") }
        bytes.append(UInt8(utf8.count))
        bytes.append(contentsOf: utf8)
        bytes.append(0)
    }

    /// Writes `value`, which `DBusValidate.value` has accepted.
    mutating func write(_ value: DBusValue) throws(DBusError) {
        switch value {
        case .byte(let v): byte(v)
        case .boolean(let v): uint32(v ? 1 : 0)
        case .int16(let v): uint16(UInt16(bitPattern: v))
        case .uint16(let v): uint16(v)
        case .int32(let v): uint32(UInt32(bitPattern: v))
        case .uint32(let v): uint32(v)
        case .int64(let v): uint64(UInt64(bitPattern: v))
        case .uint64(let v): uint64(v)
        case .double(let v): uint64(v.bitPattern)
        case .unixFD(let descriptor):
            guard descriptors.count < DBusWireWriter.maxDescriptors else {
                throw .invalidArgs("more than \(DBusWireWriter.maxDescriptors) file descriptors in one message")
            }
            let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
            guard duplicate >= 0 else { throw .invalidArgs("cannot pass file descriptor \(descriptor): errno \(errno)") }
            descriptors.append(duplicate)
            uint32(UInt32(descriptors.count - 1))
        case .string(let s), .objectPath(let s): try string(s)
        case .signature(let s): try signature(s)
        case .array(let elementSignature, let elements):
            try array(elementAlignment: DBusNames.alignment(of: elementSignature.utf8.first ?? 0)) { (writer) throws(DBusError) in
                for element in elements { try writer.write(element) }
            }
        case .dictionary(_, _, let entries):
            try array(elementAlignment: 8) { (writer) throws(DBusError) in
                for (key, entryValue) in entries {
                    writer.pad(to: 8)
                    try writer.write(key)
                    try writer.write(entryValue)
                }
            }
        case .structure(let fields):
            pad(to: 8)
            for field in fields { try write(field) }
        case .variant(let inner):
            try signature(inner.signature)
            try write(inner)
        }
    }

    /// Length, padding to the elements' alignment (also when there are none), then the elements;
    /// the length counts from after that padding.
    mutating func array(elementAlignment: Int, _ elements: (inout DBusWireWriter) throws(DBusError) -> Void) throws(DBusError) {
        uint32(0)
        let lengthOffset = bytes.count - 4
        pad(to: elementAlignment)
        let start = bytes.count
        try elements(&self)
        let length = bytes.count - start
        guard length <= DBusWireWriter.maxArrayBytes else {
            throw .invalidArgs("array of \(length) bytes is over the limit of \(DBusWireWriter.maxArrayBytes)")
        }
        for index in 0..<4 { bytes[lengthOffset + index] = UInt8(truncatingIfNeeded: length >> (8 * index)) }
    }

    /// Closes the duplicates made for descriptors written (a message that will not be sent).
    mutating func closeDescriptors() {
        DescriptorNumbers.close(descriptors)
        descriptors = []
    }

    /// Hands over the duplicates: the caller closes them once the message was sent (or dropped).
    mutating func takeDescriptors() -> [Int32] {
        defer { descriptors = [] }
        return descriptors
    }
}
