// SPDX-License-Identifier: GPL-2.0-or-later
/// Caller input quoted in an error message or a log line: at most `limit` characters, control and
/// format characters replaced by "?", quoted, and cut with "..." when longer, so that no message
/// repeats unbounded or unprintable input (a 100 KB Host, a newline forging a log line).
func echoed(_ text: some StringProtocol, limit: Int = 40) -> String {
    var out = ""
    var count = 0
    for character in text {
        guard count < limit else { return "\"\(out)...\"" }
        let printable = character.unicodeScalars.allSatisfy { scalar in
            !(scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
              || scalar.properties.generalCategory == .lineSeparator || scalar.properties.generalCategory == .paragraphSeparator)
        }
        out.append(printable ? character : "?")
        count += 1
    }
    return "\"\(out)\""
}

extension ServiceFailure {
    /// The longest message a D-Bus error carries; longer ones are cut (a last guard: messages
    /// quote caller input only through `echoed`).
    static let maxMessageCharacters = 300

    var message: String {
        switch self {
        case .invalidArguments(let text), .payloadTooLarge(let text), .notPermitted(let text), .notReady(let text), .failed(let text), .unknownObject(let text),
             .unknownDevice(let text), .unknownActivity(let text), .limitExceeded(let text), .editSessionBusy(let text),
             .documentConflict(let text): text
        }
    }
}
