// SPDX-License-Identifier: GPL-2.0-or-later
/// Writes an encoded tree as JSON text byte for byte as Foundation's `JSONEncoder` did with the
/// options this store used, so files written before and after it are the same bytes and an older
/// build reads what this one writes:
/// - keys sorted by their UTF-8 bytes (`.sortedKeys`);
/// - "/" escaped as "\/" (Foundation's default), `"` `\` and U+0000–U+001F escaped (\b \f \n \r \t
///   by name, the others as lower-case \u00xx), every other character (DEL, non-ASCII) raw;
/// - pretty: two spaces per level, `"key" : value`, an empty container as an opening bracket, a
///   blank line and the closing bracket on the container's indentation.
enum JSONText {
    /// Foundation's limit too: an encoder cannot recurse without end on a cyclic reference type.
    static let depthLimit = 512

    static func write(_ node: JSONEncodingNode, pretty: Bool) throws(JSONEncodingNode.TooDeep) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        try write(node, pretty: pretty, level: 0, to: &out)
        return out
    }

    /// `text` as a JSON string literal, quotes included (for messages).
    static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        appendQuoted(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static func write(_ node: JSONEncodingNode, pretty: Bool, level: Int, to out: inout [UInt8]) throws(JSONEncodingNode.TooDeep) {
        switch node.content {
        case .literal(let text):
            out.append(contentsOf: text.utf8)
        case .string(let text):
            appendQuoted(text, to: &out)
        case .array:
            guard level < depthLimit else { throw JSONEncodingNode.TooDeep() }
            out.append(UInt8(ascii: "["))
            if pretty { out.append(0x0A) }
            for (index, element) in node.elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")); if pretty { out.append(0x0A) } }
                if pretty { indent(level + 1, to: &out) }
                try write(element, pretty: pretty, level: level + 1, to: &out)
            }
            if pretty { out.append(0x0A); indent(level, to: &out) }
            out.append(UInt8(ascii: "]"))
        case .object, .empty:
            // A value that asked for no container at all is written as {} (Foundation's choice).
            guard level < depthLimit else { throw JSONEncodingNode.TooDeep() }
            out.append(UInt8(ascii: "{"))
            if pretty { out.append(0x0A) }
            let members = node.members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")); if pretty { out.append(0x0A) } }
                if pretty { indent(level + 1, to: &out) }
                appendQuoted(member.key, to: &out)
                if pretty { out.append(0x20) }
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(0x20) }
                try write(member.value, pretty: pretty, level: level + 1, to: &out)
            }
            if pretty { out.append(0x0A); indent(level, to: &out) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func indent(_ level: Int, to out: inout [UInt8]) {
        out.append(contentsOf: repeatElement(0x20, count: 2 * level))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            let escaped: UInt8
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): escaped = byte
            case 0x08: escaped = UInt8(ascii: "b")
            case 0x0C: escaped = UInt8(ascii: "f")
            case 0x0A: escaped = UInt8(ascii: "n")
            case 0x0D: escaped = UInt8(ascii: "r")
            case 0x09: escaped = UInt8(ascii: "t")
            case 0..<0x20:
                out.append(UInt8(ascii: "\\"))
                out.append(UInt8(ascii: "u"))
                out.append(UInt8(ascii: "0"))
                out.append(UInt8(ascii: "0"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
                continue
            default:
                out.append(byte)
                continue
            }
            out.append(UInt8(ascii: "\\"))
            out.append(escaped)
        }
        out.append(UInt8(ascii: "\""))
    }
}
