// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
// The tools' JSON values and parser are BatonJSON's (the one parser of the project); whoever
// imports BatonCommandLine sees them.
@_exported import BatonJSON

extension JSONValue {
    /// Compact JSON, or indented by two spaces when `pretty`.
    public func rendered(pretty: Bool = false) -> String {
        var out = ""
        render(into: &out, pretty: pretty, indent: 0)
        return out
    }

    private func render(into out: inout String, pretty: Bool, indent: Int) {
        let newline = pretty ? "\n" : ""
        func pad(_ level: Int) -> String { pretty ? String(repeating: "  ", count: level) : "" }
        switch self {
        case .null: out += "null"
        case .boolean(let b): out += b ? "true" : "false"
        case .integer(let i): out += String(i)
        case .double(let d): out += JSONWriter.double(d)
        case .number(let text): out += text
        case .string(let s): JSONWriter.appendQuoted(s, to: &out)
        case .array(let items):
            guard !items.isEmpty else { out += "[]"; return }
            out += "[" + newline
            for (index, item) in items.enumerated() {
                out += pad(indent + 1)
                item.render(into: &out, pretty: pretty, indent: indent + 1)
                out += (index == items.count - 1 ? "" : ",") + newline
            }
            out += pad(indent) + "]"
        case .object(let members):
            guard !members.isEmpty else { out += "{}"; return }
            out += "{" + newline
            for (index, member) in members.enumerated() {
                out += pad(indent + 1)
                JSONWriter.appendQuoted(member.key, to: &out)
                out += pretty ? ": " : ":"
                member.value.render(into: &out, pretty: pretty, indent: indent + 1)
                out += (index == members.count - 1 ? "" : ",") + newline
            }
            out += pad(indent) + "}"
        }
    }
}
