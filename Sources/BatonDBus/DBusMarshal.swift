internal import CDBus

// libdbus type codes (its macros are casts, which Swift cannot import).
enum TypeCode {
    static let invalid: Int32 = 0
    static let byte = Int32(UInt8(ascii: "y"))
    static let boolean = Int32(UInt8(ascii: "b"))
    static let int16 = Int32(UInt8(ascii: "n"))
    static let uint16 = Int32(UInt8(ascii: "q"))
    static let int32 = Int32(UInt8(ascii: "i"))
    static let uint32 = Int32(UInt8(ascii: "u"))
    static let int64 = Int32(UInt8(ascii: "x"))
    static let uint64 = Int32(UInt8(ascii: "t"))
    static let double = Int32(UInt8(ascii: "d"))
    static let string = Int32(UInt8(ascii: "s"))
    static let objectPath = Int32(UInt8(ascii: "o"))
    static let signature = Int32(UInt8(ascii: "g"))
    static let unixFD = Int32(UInt8(ascii: "h"))
    static let array = Int32(UInt8(ascii: "a"))
    static let variant = Int32(UInt8(ascii: "v"))
    static let structure = Int32(UInt8(ascii: "r"))
    static let dictEntry = Int32(UInt8(ascii: "e"))
}

// MARK: - Validation
// libdbus aborts the process on invalid arguments (its checks are fatal by default), so every
// string, name and signature is checked here before it reaches libdbus.

enum DBusValidate {
    static func isValidSignature(_ s: String) -> Bool {
        !s.utf8.contains(0) && dbus_signature_validate(s, nil) != 0
    }

    static func isSingleCompleteType(_ s: String) -> Bool {
        !s.utf8.contains(0) && dbus_signature_validate_single(s, nil) != 0
    }

    static func isBasicTypeSignature(_ s: String) -> Bool {
        guard s.utf8.count == 1, let code = s.utf8.first else { return false }
        return dbus_type_is_basic(Int32(code)) != 0
    }

    static func isValidPath(_ s: String) -> Bool { !s.utf8.contains(0) && dbus_validate_path(s, nil) != 0 }
    static func isValidInterface(_ s: String) -> Bool { !s.utf8.contains(0) && dbus_validate_interface(s, nil) != 0 }
    static func isValidMember(_ s: String) -> Bool { !s.utf8.contains(0) && dbus_validate_member(s, nil) != 0 }
    static func isValidErrorName(_ s: String) -> Bool { !s.utf8.contains(0) && dbus_validate_error_name(s, nil) != 0 }
    static func isValidBusName(_ s: String) -> Bool { !s.utf8.contains(0) && dbus_validate_bus_name(s, nil) != 0 }
    static func isValidUTF8String(_ s: String) -> Bool { !s.utf8.contains(0) }

    static func path(_ s: String) throws(DBusError) {
        guard isValidPath(s) else { throw .invalidArgs("invalid object path '\(s)'") }
    }
    static func interface(_ s: String) throws(DBusError) {
        guard isValidInterface(s) else { throw .invalidArgs("invalid interface name '\(s)'") }
    }
    static func member(_ s: String) throws(DBusError) {
        guard isValidMember(s) else { throw .invalidArgs("invalid member name '\(s)'") }
    }
    static func busName(_ s: String) throws(DBusError) {
        guard isValidBusName(s) else { throw .invalidArgs("invalid bus name '\(s)'") }
    }
    static func singleType(_ s: String) throws(DBusError) {
        guard isSingleCompleteType(s) else { throw .invalidArgs("invalid single complete type signature '\(s)'") }
    }

    /// Checks that `value` can be marshalled as-is.
    static func value(_ value: DBusValue) throws(DBusError) {
        switch value {
        case .string(let s):
            guard isValidUTF8String(s) else { throw .invalidArgs("string contains a NUL character") }
        case .objectPath(let s):
            try path(s)
        case .signature(let s):
            guard isValidSignature(s) else { throw .invalidArgs("invalid signature value '\(s)'") }
        case .array(let elementSignature, let elements):
            try singleType(elementSignature)
            for element in elements {
                guard element.signature == elementSignature else {
                    throw .invalidArgs("array element of type '\(element.signature)' in array of '\(elementSignature)'")
                }
                try Self.value(element)
            }
        case .dictionary(let keySignature, let valueSignature, let entries):
            guard isBasicTypeSignature(keySignature) else {
                throw .invalidArgs("dictionary key type '\(keySignature)' is not a basic type")
            }
            try singleType(valueSignature)
            for (key, entryValue) in entries {
                guard key.signature == keySignature, entryValue.signature == valueSignature else {
                    throw .invalidArgs("dictionary entry {\(key.signature)\(entryValue.signature)} in a{\(keySignature)\(valueSignature)}")
                }
                try Self.value(key)
                try Self.value(entryValue)
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw .invalidArgs("empty struct") }
            for field in fields { try Self.value(field) }
        case .variant(let inner):
            try Self.value(inner)
            try singleType(inner.signature)
        case .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .unixFD:
            break
        }
    }

    /// Checks a whole argument list (total signature length and nesting limits included).
    static func arguments(_ values: [DBusValue]) throws(DBusError) {
        for value in values { try Self.value(value) }
        let signature = values.map(\.signature).joined()
        guard signature.isEmpty || isValidSignature(signature) else {
            throw .invalidArgs("argument signature '\(signature)' is too long or too deeply nested")
        }
    }
}

// MARK: - Marshalling

enum DBusMarshal {
    /// Appends `values` to `message`. Validates first, so libdbus never sees bad input.
    static func append(_ values: [DBusValue], to message: OpaquePointer) throws(DBusError) {
        try DBusValidate.arguments(values)
        let iter = UnsafeMutablePointer<DBusMessageIter>.allocate(capacity: 1)
        defer { iter.deallocate() }
        dbus_message_iter_init_append(message, iter)
        for value in values { try append(value, to: iter) }
    }

    private static func appendBasic<T: BitwiseCopyable>(_ type: Int32, _ value: T, _ iter: UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) {
        var copy = value
        guard dbus_message_iter_append_basic(iter, type, &copy) != 0 else { throw .noMemory() }
    }

    private static func appendString(_ type: Int32, _ s: String, _ iter: UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) {
        let ok = s.withCString { cString -> Bool in
            var pointer: UnsafePointer<CChar>? = cString
            return dbus_message_iter_append_basic(iter, type, &pointer) != 0
        }
        guard ok else { throw .noMemory() }
    }

    private static func withContainer(
        _ iter: UnsafeMutablePointer<DBusMessageIter>, _ type: Int32, _ contained: String?,
        _ body: (UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) -> Void
    ) throws(DBusError) {
        let sub = UnsafeMutablePointer<DBusMessageIter>.allocate(capacity: 1)
        defer { sub.deallocate() }
        let opened: Bool
        if let contained {
            opened = dbus_message_iter_open_container(iter, type, contained, sub) != 0
        } else {
            opened = dbus_message_iter_open_container(iter, type, nil, sub) != 0
        }
        guard opened else { throw .noMemory() }
        do {
            try body(sub)
        } catch {
            dbus_message_iter_abandon_container(iter, sub)
            throw error
        }
        guard dbus_message_iter_close_container(iter, sub) != 0 else { throw .noMemory() }
    }

    private static func append(_ value: DBusValue, to iter: UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) {
        switch value {
        case .byte(let v): try appendBasic(TypeCode.byte, v, iter)
        case .boolean(let v): try appendBasic(TypeCode.boolean, dbus_bool_t(v ? 1 : 0), iter)
        case .int16(let v): try appendBasic(TypeCode.int16, v, iter)
        case .uint16(let v): try appendBasic(TypeCode.uint16, v, iter)
        case .int32(let v): try appendBasic(TypeCode.int32, v, iter)
        case .uint32(let v): try appendBasic(TypeCode.uint32, v, iter)
        case .int64(let v): try appendBasic(TypeCode.int64, v, iter)
        case .uint64(let v): try appendBasic(TypeCode.uint64, v, iter)
        case .double(let v): try appendBasic(TypeCode.double, v, iter)
        case .unixFD(let v): try appendBasic(TypeCode.unixFD, v, iter)
        case .string(let s): try appendString(TypeCode.string, s, iter)
        case .objectPath(let s): try appendString(TypeCode.objectPath, s, iter)
        case .signature(let s): try appendString(TypeCode.signature, s, iter)
        case .array(let elementSignature, let elements):
            try withContainer(iter, TypeCode.array, elementSignature) { (sub) throws(DBusError) in
                for element in elements { try append(element, to: sub) }
            }
        case .dictionary(let keySignature, let valueSignature, let entries):
            try withContainer(iter, TypeCode.array, "{" + keySignature + valueSignature + "}") { (sub) throws(DBusError) in
                for (key, entryValue) in entries {
                    try withContainer(sub, TypeCode.dictEntry, nil) { (entry) throws(DBusError) in
                        try append(key, to: entry)
                        try append(entryValue, to: entry)
                    }
                }
            }
        case .structure(let fields):
            try withContainer(iter, TypeCode.structure, nil) { (sub) throws(DBusError) in
                for field in fields { try append(field, to: sub) }
            }
        case .variant(let inner):
            try withContainer(iter, TypeCode.variant, inner.signature) { (sub) throws(DBusError) in
                try append(inner, to: sub)
            }
        }
    }
}
