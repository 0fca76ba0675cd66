// SPDX-License-Identifier: LGPL-2.1-or-later
// Validity of names and signatures, as the D-Bus specification defines them ("Valid Names",
// "Type System"). Everything sent is checked here first, and everything received is checked again
// while it is parsed: a message is built only from values that another implementation would accept.

enum DBusNames {
    static let maxNameBytes = 255
    static let maxSignatureBytes = 255
    /// Arrays and structs may each nest 32 deep (the specification's limits).
    static let maxArrayDepth = 32
    static let maxStructDepth = 32

    private static func isLetterOrUnderscore(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
    }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// `/`, or `/`-separated non-empty elements of `[A-Za-z0-9_]`, no trailing `/`.
    static func isValidPath<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        var previousWasSlash = false
        for byte in bytes {
            if byte == UInt8(ascii: "/") {
                if previousWasSlash { return false }
                previousWasSlash = true
            } else {
                guard isLetterOrUnderscore(byte) || isDigit(byte) else { return false }
                previousWasSlash = false
            }
        }
        return !previousWasSlash
    }

    /// Interface and error names: at least two `.`-separated elements of `[A-Za-z_][A-Za-z0-9_]*`.
    static func isValidInterface<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maxNameBytes else { return false }
        var elements = 0
        var elementLength = 0
        for byte in bytes {
            if byte == UInt8(ascii: ".") {
                guard elementLength > 0 else { return false }
                elements += 1
                elementLength = 0
            } else {
                guard isLetterOrUnderscore(byte) || (elementLength > 0 && isDigit(byte)) else { return false }
                elementLength += 1
            }
        }
        return elementLength > 0 && elements >= 1
    }

    /// `[A-Za-z_][A-Za-z0-9_]*`, at most 255 bytes.
    static func isValidMember<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maxNameBytes else { return false }
        var first = true
        for byte in bytes {
            guard isLetterOrUnderscore(byte) || (!first && isDigit(byte)) else { return false }
            first = false
        }
        return true
    }

    /// Unique (`:1.42`: elements may start with a digit) or well-known (`org.baton.Daemon`) bus names;
    /// elements of `[A-Za-z0-9_-]`, at least two, at most 255 bytes in all.
    ///
    /// With `asReceived`, a unique name is taken as libdbus (and so the bus) takes it: any of those
    /// characters and dots, no empty element after a dot; one element is enough (`:1` included).
    /// What is sent always follows the specification.
    static func isValidBusName<Bytes: Collection<UInt8>>(_ bytes: Bytes, asReceived: Bool = false) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maxNameBytes else { return false }
        let unique = bytes.first == UInt8(ascii: ":")
        if unique, asReceived {
            var previousWasDot = false
            for byte in bytes.dropFirst() {
                if byte == UInt8(ascii: ".") {
                    guard !previousWasDot else { return false }
                    previousWasDot = true
                    continue
                }
                guard isLetterOrUnderscore(byte) || isDigit(byte) || byte == UInt8(ascii: "-") else { return false }
                previousWasDot = false
            }
            return !previousWasDot
        }
        var elements = 0
        var elementLength = 0
        for byte in unique ? bytes.dropFirst() : bytes[...] {
            if byte == UInt8(ascii: ".") {
                guard elementLength > 0 else { return false }
                elements += 1
                elementLength = 0
            } else {
                let allowed = isLetterOrUnderscore(byte) || byte == UInt8(ascii: "-") || (isDigit(byte) && (unique || elementLength > 0))
                guard allowed else { return false }
                elementLength += 1
            }
        }
        return elementLength > 0 && elements >= 1
    }

    static func isBasicType(_ code: UInt8) -> Bool {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "b"), UInt8(ascii: "n"), UInt8(ascii: "q"), UInt8(ascii: "i"), UInt8(ascii: "u"),
             UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "h"), UInt8(ascii: "s"), UInt8(ascii: "o"),
             UInt8(ascii: "g"): true
        default: false
        }
    }

    /// Where the single complete type starting at `start` ends (one past it), or nil if none starts
    /// there. Checks the nesting limits and the dictionary entry rules on the way.
    static func endOfSingleType(_ signature: [UInt8], from start: Int, arrayDepth: Int = 0, structDepth: Int = 0,
                                insideArray: Bool = false) -> Int? {
        guard start < signature.count else { return nil }
        let code = signature[start]
        if isBasicType(code) || code == UInt8(ascii: "v") { return start + 1 }
        switch code {
        case UInt8(ascii: "a"):
            guard arrayDepth < maxArrayDepth else { return nil }
            return endOfSingleType(signature, from: start + 1, arrayDepth: arrayDepth + 1, structDepth: structDepth, insideArray: true)
        case UInt8(ascii: "("):
            guard structDepth < maxStructDepth else { return nil }
            var position = start + 1
            var fields = 0
            while position < signature.count, signature[position] != UInt8(ascii: ")") {
                guard let end = endOfSingleType(signature, from: position, arrayDepth: arrayDepth, structDepth: structDepth + 1) else { return nil }
                position = end
                fields += 1
            }
            guard position < signature.count, fields > 0 else { return nil }
            return position + 1
        case UInt8(ascii: "{"):
            // Only as an array's element: a basic key, then exactly one value.
            guard insideArray, structDepth < maxStructDepth, start + 1 < signature.count, isBasicType(signature[start + 1]),
                  let valueEnd = endOfSingleType(signature, from: start + 2, arrayDepth: arrayDepth, structDepth: structDepth + 1),
                  valueEnd < signature.count, signature[valueEnd] == UInt8(ascii: "}")
            else { return nil }
            return valueEnd + 1
        default:
            return nil
        }
    }

    /// Zero or more complete types, at most 255 bytes.
    static func isValidSignature(_ signature: [UInt8]) -> Bool {
        guard signature.count <= maxSignatureBytes else { return false }
        var position = 0
        while position < signature.count {
            guard let end = endOfSingleType(signature, from: position) else { return false }
            position = end
        }
        return true
    }

    static func isSingleCompleteType(_ signature: [UInt8]) -> Bool {
        signature.count <= maxSignatureBytes && !signature.isEmpty && endOfSingleType(signature, from: 0) == signature.count
    }

    /// Alignment of a type on the wire, by its first signature byte.
    static func alignment(of code: UInt8) -> Int {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "g"), UInt8(ascii: "v"): 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): 2
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "{"): 8
        default: 4
        }
    }

    /// Size of a fixed-size basic type (nil for strings, containers and variants).
    static func fixedSize(of code: UInt8) -> Int? {
        switch code {
        case UInt8(ascii: "y"): 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): 2
        case UInt8(ascii: "b"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "h"): 4
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"): 8
        default: nil
        }
    }
}
