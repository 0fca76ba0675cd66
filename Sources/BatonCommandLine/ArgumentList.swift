// SPDX-License-Identifier: GPL-2.0-or-later
/// A command line was wrong; `message` says how.
public struct UsageError: Error, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// The arguments of one command, consumed front to back. Options may be written `--name value` or
/// `--name=value`; `--` ends options.
public struct ArgumentList: Sendable {
    public private(set) var remaining: [String]
    private var optionsEnded = false

    public init(_ arguments: [String]) { remaining = arguments }

    public var isEmpty: Bool { remaining.isEmpty }

    /// The next argument if it is an option (`--name`, `--name=value` or `-x`), without consuming it.
    public var nextOption: String? {
        guard !optionsEnded, let first = remaining.first, first.hasPrefix("-"), first != "-" else { return nil }
        return first
    }

    /// Consumes the next argument as an option; returns its name and inline `=value`, if any.
    /// Returns nil at the end, at a positional argument, or after `--`.
    public mutating func popOption() -> (name: String, inlineValue: String?)? {
        while !optionsEnded, remaining.first == "--" {
            remaining.removeFirst()
            optionsEnded = true
        }
        guard let option = nextOption else { return nil }
        remaining.removeFirst()
        if option.hasPrefix("--"), let equals = option.firstIndex(of: "=") {
            return (String(option[..<equals]), String(option[option.index(after: equals)...]))
        }
        return (option, nil)
    }

    /// The value of an option just popped: its inline value or the next argument.
    public mutating func value(for option: (name: String, inlineValue: String?)) throws(UsageError) -> String {
        if let inline = option.inlineValue { return inline }
        guard let next = remaining.first else { throw UsageError("\(option.name) needs a value") }
        remaining.removeFirst()
        return next
    }

    /// Refuses an inline value for a flag (`--current=yes`).
    public func flag(_ option: (name: String, inlineValue: String?)) throws(UsageError) {
        if option.inlineValue != nil { throw UsageError("\(option.name) takes no value") }
    }

    /// Consumes the next positional argument, or nil when none is left.
    public mutating func popPositional() throws(UsageError) -> String? {
        while !optionsEnded, remaining.first == "--" {
            remaining.removeFirst()
            optionsEnded = true
        }
        guard let first = remaining.first else { return nil }
        if !optionsEnded, first.hasPrefix("-"), first != "-" { throw UsageError("unknown option \(first)") }
        remaining.removeFirst()
        return first
    }

    /// Fails if anything is left.
    public func expectEnd() throws(UsageError) {
        guard let first = remaining.first else { return }
        if !optionsEnded, first.hasPrefix("-"), first != "-" { throw UsageError("unknown option \(first)") }
        throw UsageError("unexpected argument \(first)")
    }
}
