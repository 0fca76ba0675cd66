// SPDX-License-Identifier: LGPL-2.1-or-later
/// The JSON text writer of the project's outputs (no Foundation, no I/O): every component that
/// prints JSON by hand quotes strings and renders numbers through it, so they all escape alike.
/// (The state files are the exception: BatonStore's `JSONText` writes them in the bytes Foundation's
/// JSONEncoder wrote, which escapes differently.)
public enum JSONWriter {
    /// `text` as a JSON string literal, quotes included.
    public static func quoted(_ text: String) -> String {
        var out = ""
        appendQuoted(text, to: &out)
        return out
    }

    /// Escapes `"` `\` and control characters (U+0000-U+001F and DEL); everything else is written as is.
    public static func appendQuoted(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    /// An integer, or `null` for nil.
    public static func integer(_ value: Int?) -> String { value.map(String.init) ?? "null" }

    /// Doubles always carry a fraction or exponent so they read back as doubles. JSON has no
    /// infinities; ±1e999 reads back as ±infinity in most parsers. NaN renders as null.
    public static func double(_ value: Double) -> String {
        if value.isNaN { return "null" }
        if value.isInfinite { return value < 0 ? "-1e999" : "1e999" }
        let text = "\(value)"
        return text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) ? text : text + ".0"
    }

    /// A compact object from members whose values are already JSON text, in the given order.
    public static func object(_ members: [(name: String, json: String)]) -> String {
        "{" + members.map { quoted($0.name) + ":" + $0.json }.joined(separator: ",") + "}"
    }
}
