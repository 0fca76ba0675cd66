internal import CDBus
import Glibc

// MARK: - Unmarshalling within a budget

extension DBusMarshal {
    /// Reads every argument of `message`, refusing it (a typed error, never a trap) once it holds
    /// more than `budget` allows or anything the Swift model cannot hold faithfully, such as a
    /// dictionary with two keys that compare equal. Stops at the first refusal: an oversized
    /// message never costs more than the budget in Swift values.
    static func read(_ message: OpaquePointer, budget: DBusArgumentBudget = .standard) throws(DBusError) -> [DBusValue] {
        let iter = UnsafeMutablePointer<DBusMessageIter>.allocate(capacity: 1)
        defer { iter.deallocate() }
        guard dbus_message_iter_init(message, iter) != 0 else { return [] }
        var reader = BudgetedReader(budget: budget)
        return try reader.readAll(iter, depth: 0)
    }
}

/// Walks a libdbus iterator, counting values and string bytes against a budget as it goes.
struct BudgetedReader {
    let budget: DBusArgumentBudget
    private(set) var values = 0
    private(set) var stringBytes = 0

    init(budget: DBusArgumentBudget) { self.budget = budget }

    /// Counts `count` more values; throws before anything is allocated for them.
    private mutating func spend(values count: Int) throws(DBusError) {
        values += count
        guard values <= budget.maxValues else {
            throw budget.tooLarge("arguments hold more than \(budget.maxValues) values")
        }
    }

    private mutating func spend(stringBytes count: Int) throws(DBusError) {
        stringBytes += count
        guard stringBytes <= budget.maxStringBytes else {
            throw budget.tooLarge("arguments hold more than \(budget.maxStringBytes) bytes of strings")
        }
    }

    mutating func readAll(_ iter: UnsafeMutablePointer<DBusMessageIter>, depth: Int) throws(DBusError) -> [DBusValue] {
        var result: [DBusValue] = []
        while dbus_message_iter_get_arg_type(iter) != TypeCode.invalid {
            result.append(try readValue(iter, depth: depth))
            dbus_message_iter_next(iter)
        }
        return result
    }

    private func readBasic<T: BitwiseCopyable>(_ iter: UnsafeMutablePointer<DBusMessageIter>, _ initial: T) -> T {
        var value = initial
        dbus_message_iter_get_basic(iter, &value)
        return value
    }

    private mutating func readString(_ iter: UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(iter, &pointer)
        guard let pointer else { return "" }
        try spend(stringBytes: strlen(pointer))
        return String(cString: pointer)
    }

    private func currentSignature(_ iter: UnsafeMutablePointer<DBusMessageIter>) -> String {
        guard let raw = dbus_message_iter_get_signature(iter) else { return "" }
        defer { dbus_free(raw) }
        return String(cString: raw)
    }

    private mutating func readValue(_ iter: UnsafeMutablePointer<DBusMessageIter>, depth: Int) throws(DBusError) -> DBusValue {
        try spend(values: 1)
        let type = dbus_message_iter_get_arg_type(iter)
        switch type {
        case TypeCode.byte: return .byte(readBasic(iter, UInt8(0)))
        case TypeCode.boolean: return .boolean(readBasic(iter, dbus_bool_t(0)) != 0)
        case TypeCode.int16: return .int16(readBasic(iter, Int16(0)))
        case TypeCode.uint16: return .uint16(readBasic(iter, UInt16(0)))
        case TypeCode.int32: return .int32(readBasic(iter, Int32(0)))
        case TypeCode.uint32: return .uint32(readBasic(iter, UInt32(0)))
        case TypeCode.int64: return .int64(readBasic(iter, Int64(0)))
        case TypeCode.uint64: return .uint64(readBasic(iter, UInt64(0)))
        case TypeCode.double: return .double(readBasic(iter, Double(0)))
        case TypeCode.unixFD: return .unixFD(readBasic(iter, Int32(-1)))
        case TypeCode.string: return .string(try readString(iter))
        case TypeCode.objectPath: return .objectPath(try readString(iter))
        case TypeCode.signature: return .signature(try readString(iter))
        case TypeCode.array, TypeCode.structure, TypeCode.variant:
            guard depth < budget.maxDepth else {
                throw budget.tooLarge("arguments nest containers deeper than \(budget.maxDepth)")
            }
            let sub = UnsafeMutablePointer<DBusMessageIter>.allocate(capacity: 1)
            defer { sub.deallocate() }
            dbus_message_iter_recurse(iter, sub)
            switch type {
            case TypeCode.array: return try readArray(iter, elements: sub, depth: depth)
            case TypeCode.structure:
                let fields = try readAll(sub, depth: depth + 1)
                guard !fields.isEmpty else { throw budget.invalid("empty struct in message") }
                return .structure(fields)
            default:
                let inner = try readAll(sub, depth: depth + 1)
                guard inner.count == 1 else { throw budget.invalid("variant does not hold exactly one value") }
                return .variant(inner[0])
            }
        default:
            throw budget.invalid("unsupported D-Bus type code \(type)")
        }
    }

    private mutating func readArray(_ iter: UnsafeMutablePointer<DBusMessageIter>, elements sub: UnsafeMutablePointer<DBusMessageIter>,
                                    depth: Int) throws(DBusError) -> DBusValue {
        let signature = currentSignature(iter)
        let elementType = dbus_message_iter_get_element_type(iter)
        if elementType == TypeCode.dictEntry {
            return try readDictionary(signature: signature, entries: sub, depth: depth)
        }
        let elementSignature = String(signature.dropFirst())
        if let fixed = try readFixedArray(elementType, sub) {
            return .array(elementSignature: elementSignature, fixed)
        }
        return .array(elementSignature: elementSignature, try readAll(sub, depth: depth + 1))
    }

    /// Arrays of fixed-size numbers: the element count is known before anything is read, so an
    /// oversized one is refused at once, and the elements come from one contiguous block.
    private mutating func readFixedArray(_ elementType: Int32, _ sub: UnsafeMutablePointer<DBusMessageIter>) throws(DBusError) -> [DBusValue]? {
        func elements<T: BitwiseCopyable>(_: T.Type, _ wrap: (T) -> DBusValue) throws(DBusError) -> [DBusValue] {
            var start: UnsafeMutableRawPointer? = nil
            var count: Int32 = 0
            withUnsafeMutablePointer(to: &start) { dbus_message_iter_get_fixed_array(sub, $0, &count) }
            guard let start, count > 0 else { return [] }
            try spend(values: Int(count))
            let buffer = UnsafeBufferPointer(start: start.assumingMemoryBound(to: T.self), count: Int(count))
            return buffer.map(wrap)
        }
        switch elementType {
        case TypeCode.byte: return try elements(UInt8.self) { .byte($0) }
        case TypeCode.boolean: return try elements(dbus_bool_t.self) { .boolean($0 != 0) }
        case TypeCode.int16: return try elements(Int16.self) { .int16($0) }
        case TypeCode.uint16: return try elements(UInt16.self) { .uint16($0) }
        case TypeCode.int32: return try elements(Int32.self) { .int32($0) }
        case TypeCode.uint32: return try elements(UInt32.self) { .uint32($0) }
        case TypeCode.int64: return try elements(Int64.self) { .int64($0) }
        case TypeCode.uint64: return try elements(UInt64.self) { .uint64($0) }
        case TypeCode.double: return try elements(Double.self) { .double($0) }
        default: return nil
        }
    }

    /// `a{KV}`. Keys that compare equal (the same bytes, or strings Swift considers canonically
    /// equivalent, such as a precomposed and a decomposed "é") refuse the message: a dictionary
    /// would keep only one of them, silently dropping the other's value.
    private mutating func readDictionary(signature: String, entries sub: UnsafeMutablePointer<DBusMessageIter>,
                                         depth: Int) throws(DBusError) -> DBusValue {
        let inner = signature.utf8.dropFirst(2).dropLast()
        guard let keyByte = inner.first, signature.hasPrefix("a{"), signature.hasSuffix("}") else {
            throw budget.invalid("malformed dictionary signature")
        }
        let keySignature = String(decoding: [keyByte], as: UTF8.self)
        let valueSignature = String(decoding: inner.dropFirst(), as: UTF8.self)
        var entries: [DBusValue: DBusValue] = [:]
        let entry = UnsafeMutablePointer<DBusMessageIter>.allocate(capacity: 1)
        defer { entry.deallocate() }
        while dbus_message_iter_get_arg_type(sub) == TypeCode.dictEntry {
            guard depth + 1 < budget.maxDepth else {
                throw budget.tooLarge("arguments nest containers deeper than \(budget.maxDepth)")
            }
            dbus_message_iter_recurse(sub, entry)
            let pair = try readAll(entry, depth: depth + 2)
            guard pair.count == 2 else { throw budget.invalid("dictionary entry without key and value") }
            guard entries.updateValue(pair[1], forKey: pair[0]) == nil else {
                throw budget.invalid("duplicate key in a dictionary (keys must differ, also after Unicode canonical equivalence)")
            }
            dbus_message_iter_next(sub)
        }
        return .dictionary(keySignature: keySignature, valueSignature: valueSignature, entries)
    }
}
