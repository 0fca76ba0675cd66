// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonSystem

/// Results go to stdout (as text or, with --json, as one JSON document); messages go to stderr.
public struct Output: Sendable {
    public let json: Bool

    public init(json: Bool) { self.json = json }

    /// Prints a command's result: `json` with --json (indented, or on one line when `compact`),
    /// else `text` (nothing when empty).
    public func result(json document: JSONValue, text: String, compact: Bool = false) {
        if json {
            Output.write(document.rendered(pretty: !compact) + "\n", to: .standardOutput)
        } else if !text.isEmpty {
            Output.write(text.hasSuffix("\n") ? text : text + "\n", to: .standardOutput)
        }
    }

    /// One compact JSON document on one line of stdout, for tools whose readers go line by line.
    public func jsonLine(_ document: JSONValue) {
        Output.write(document.rendered() + "\n", to: .standardOutput)
    }

    /// A line of text on stdout.
    public func line(_ text: String) {
        Output.write(text + "\n", to: .standardOutput)
    }

    /// A progress or informational message on stderr.
    public func message(_ text: String) {
        Output.write(text + "\n", to: .standardError)
    }

    public enum Stream: Int32 {
        case standardOutput = 1
        case standardError = 2
    }

    /// Writes unbuffered, so that a reader sees results while the command keeps running.
    public static func write(_ text: String, to stream: Stream) {
        // A stream closed early (a reader that went away) loses the rest; there is nobody left to tell.
        FileDescriptor.borrowing(stream.rawValue) { output in _ = try? output.writeAll(Array(text.utf8)) }
    }
}
