// SPDX-License-Identifier: LGPL-2.1-or-later
// MARK: - Validation
// Every string, name and signature is checked before it is marshalled: what is sent must be
// something any other implementation accepts.

enum DBusValidate {
    static func isValidSignature(_ s: String) -> Bool { DBusNames.isValidSignature(Array(s.utf8)) }
    static func isSingleCompleteType(_ s: String) -> Bool { DBusNames.isSingleCompleteType(Array(s.utf8)) }

    static func isBasicTypeSignature(_ s: String) -> Bool {
        guard s.utf8.count == 1, let code = s.utf8.first else { return false }
        return DBusNames.isBasicType(code)
    }

    static func isValidPath(_ s: String) -> Bool { DBusNames.isValidPath(s.utf8) }
    static func isValidInterface(_ s: String) -> Bool { DBusNames.isValidInterface(s.utf8) }
    static func isValidMember(_ s: String) -> Bool { DBusNames.isValidMember(s.utf8) }
    static func isValidErrorName(_ s: String) -> Bool { DBusNames.isValidInterface(s.utf8) }
    static func isValidBusName(_ s: String) -> Bool { DBusNames.isValidBusName(s.utf8) }
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

    /// The specification's nesting limits: 32 arrays and 32 structs (dictionary entries count as
    /// structs), and 64 containers in all counting variants, which a signature alone does not bound.
    static let maxArrayNesting = 32
    static let maxStructNesting = 32
    static let maxTotalNesting = 64

    /// How deep a value sits: arrays, structs and all containers (variants included) around it.
    struct Nesting {
        var arrays = 0
        var structs = 0
        var total = 0

        func entering(array: Bool = false, structure: Bool = false) throws(DBusError) -> Nesting {
            var inner = self
            if array { inner.arrays += 1 }
            if structure { inner.structs += 1 }
            inner.total += 1
            guard inner.arrays <= DBusValidate.maxArrayNesting, inner.structs <= DBusValidate.maxStructNesting,
                  inner.total <= DBusValidate.maxTotalNesting else {
                throw .invalidArgs("values nest deeper than D-Bus allows (\(DBusValidate.maxArrayNesting) arrays, "
                                   + "\(DBusValidate.maxStructNesting) structs, \(DBusValidate.maxTotalNesting) containers with variants)")
            }
            return inner
        }
    }

    /// Checks that `value` can be marshalled as-is.
    static func value(_ value: DBusValue, nesting: Nesting = Nesting()) throws(DBusError) {
        switch value {
        case .string(let s):
            guard isValidUTF8String(s) else { throw .invalidArgs("string contains a NUL character") }
        case .objectPath(let s):
            try path(s)
        case .signature(let s):
            guard isValidSignature(s) else { throw .invalidArgs("invalid signature value '\(s)'") }
        case .array(let elementSignature, let elements):
            try singleType(elementSignature)
            let inner = try nesting.entering(array: true)
            for element in elements {
                guard element.signature == elementSignature else {
                    throw .invalidArgs("array element of type '\(element.signature)' in array of '\(elementSignature)'")
                }
                try Self.value(element, nesting: inner)
            }
        case .dictionary(let keySignature, let valueSignature, let entries):
            guard isBasicTypeSignature(keySignature) else {
                throw .invalidArgs("dictionary key type '\(keySignature)' is not a basic type")
            }
            try singleType(valueSignature)
            let inner = try nesting.entering(array: true).entering(structure: true)
            for (key, entryValue) in entries {
                guard key.signature == keySignature, entryValue.signature == valueSignature else {
                    throw .invalidArgs("dictionary entry {\(key.signature)\(entryValue.signature)} in a{\(keySignature)\(valueSignature)}")
                }
                try Self.value(key, nesting: inner)
                try Self.value(entryValue, nesting: inner)
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw .invalidArgs("empty struct") }
            let inner = try nesting.entering(structure: true)
            for field in fields { try Self.value(field, nesting: inner) }
        case .variant(let inner):
            try Self.value(inner, nesting: try nesting.entering())
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

