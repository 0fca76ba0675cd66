// SPDX-License-Identifier: GPL-2.0-or-later

/// One element tag: `<name a="v">` opens, `</name>` closes, `<name/>` does both.
struct XMLTag: Equatable {
    var name: String
    var attributes: [String: String]
    var opens: Bool
    var closes: Bool
}

/// The element tags of an XML document, in order, with their attributes' values unescaped: what
/// the recently-used list needs, without full Foundation's XMLParser (libxml2, and ICU with it).
/// Text, comments, CDATA, processing instructions and the document type are skipped. It stops at
/// the first damage (not UTF-8, a tag cut off or malformed, an unknown entity, a close tag that
/// does not match the open one): the tags before it stand, as XMLParser's events did.
/// No entity is ever expanded beyond the five predefined ones and character references.
struct XMLTagScanner {
    private let bytes: [UInt8]
    private var index = 0
    private var open: [String] = []
    private var stopped = false

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        // Only UTF-8 (a byte-order mark is skipped): what the list's writers produce.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        if String(validating: bytes[index...], as: UTF8.self) == nil { stopped = true }
    }

    mutating func next() -> XMLTag? {
        guard !stopped else { return nil }
        if let tag = scan() { return tag }
        stopped = true
        return nil
    }

    private mutating func scan() -> XMLTag? {
        while true {
            guard let lt = bytes[index...].firstIndex(of: UInt8(ascii: "<")) else { return nil }
            index = lt + 1
            if skip(ifAt: "!--", to: "-->") || skip(ifAt: "![CDATA[", to: "]]>") || skip(ifAt: "?", to: "?>") { continue }
            if at("!") {
                // The document type: skipped to its end; an internal subset ([...]) is refused.
                guard let gt = bytes[index...].firstIndex(of: UInt8(ascii: ">")),
                      !bytes[index..<gt].contains(UInt8(ascii: "[")) else { return nil }
                index = gt + 1
                continue
            }
            if at("/") {
                index += 1
                guard let name = name() else { return nil }
                skipSpace()
                guard at(">"), open.last == name else { return nil }
                index += 1
                open.removeLast()
                return XMLTag(name: name, attributes: [:], opens: false, closes: true)
            }
            return element()
        }
    }

    private mutating func element() -> XMLTag? {
        guard let name = name() else { return nil }
        var attributes: [String: String] = [:]
        while true {
            let hadSpace = skipSpace()
            if at("/>") {
                index += 2
                return XMLTag(name: name, attributes: attributes, opens: true, closes: true)
            }
            if at(">") {
                index += 1
                open.append(name)
                return XMLTag(name: name, attributes: attributes, opens: true, closes: false)
            }
            guard hadSpace, let key = self.name() else { return nil }
            skipSpace()
            guard at("=") else { return nil }
            index += 1
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else { return nil }
            let quote = bytes[index]
            guard let endQuote = bytes[(index + 1)...].firstIndex(of: quote),
                  let value = Self.unescaped(bytes[(index + 1)..<endQuote]),
                  attributes.updateValue(value, forKey: key) == nil else { return nil }
            index = endQuote + 1
        }
    }

    /// A name: up to white space or one of `/>=`; never empty, never with `<`, `&` or a quote.
    private mutating func name() -> String? {
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if Self.isSpace(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "=") { break }
            if byte == UInt8(ascii: "<") || byte == UInt8(ascii: "&") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") { return nil }
            index += 1
        }
        guard index > start, index < bytes.count else { return nil }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    @discardableResult
    private mutating func skipSpace() -> Bool {
        let start = index
        while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
        return index > start
    }

    private func at(_ text: String) -> Bool { bytes[index...].starts(with: text.utf8) }

    /// Skips a construct that begins with `opening` (after its `<`) to just past `closing`.
    private mutating func skip(ifAt opening: String, to closing: String) -> Bool {
        guard at(opening) else { return false }
        let closingBytes = Array(closing.utf8)
        var position = index + opening.utf8.count
        while position + closingBytes.count <= bytes.count {
            if bytes[position..<(position + closingBytes.count)].elementsEqual(closingBytes) {
                index = position + closingBytes.count
                return true
            }
            position += 1
        }
        index = bytes.count  // cut off: nothing follows
        return true
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// An attribute value with its references replaced; nil for `<`, an unknown entity or a bad
    /// character reference.
    static func unescaped(_ raw: ArraySlice<UInt8>) -> String? {
        guard !raw.contains(UInt8(ascii: "<")) else { return nil }
        guard raw.contains(UInt8(ascii: "&")) else { return String(decoding: raw, as: UTF8.self) }
        var text = ""
        var rest = raw[...]
        while let amp = rest.firstIndex(of: UInt8(ascii: "&")) {
            text += String(decoding: rest[..<amp], as: UTF8.self)
            guard let semicolon = rest[amp...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else { return nil }
            let reference = String(decoding: rest[(amp + 1)..<semicolon], as: UTF8.self)
            switch reference {
            case "amp": text += "&"
            case "lt": text += "<"
            case "gt": text += ">"
            case "quot": text += "\""
            case "apos": text += "'"
            default:
                let number: UInt32?
                if reference.hasPrefix("#x") { number = UInt32(reference.dropFirst(2), radix: 16) }
                else if reference.hasPrefix("#") { number = UInt32(reference.dropFirst(1), radix: 10) }
                else { number = nil }
                guard let number, number != 0, let scalar = Unicode.Scalar(number) else { return nil }
                text.unicodeScalars.append(scalar)
            }
            rest = rest[(semicolon + 1)...]
        }
        return text + String(decoding: rest, as: UTF8.self)
    }
}
