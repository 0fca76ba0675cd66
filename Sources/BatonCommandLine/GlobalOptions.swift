// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonDBus

/// Options valid before or after the subcommand name.
public struct GlobalOptions: Sendable {
    public var bus: DBusBusKind = .system
    public var busName = BatonConnection.defaultBusName
    public var json = false
    public var help = false

    public init() {}

    public static let usage = """
        Global options:
          --bus session|system|ADDRESS  the bus batond is on (default: system); ADDRESS is a
                                        D-Bus address such as unix:path=/run/baton/bus
          --bus-name NAME               batond's bus name (default: org.baton)
          --json                        print results as JSON on stdout
          -h, --help                    show help (after a command: that command's help)
          --version                     print the version and exit (before a command)
        """

    /// Removes the global options from `arguments` (anywhere before `--`) and returns them with
    /// the arguments that are left.
    public static func extract(from arguments: [String]) throws(UsageError) -> (GlobalOptions, [String]) {
        var options = GlobalOptions()
        var rest: [String] = []
        var index = 0
        func value(_ name: String, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else { throw UsageError("\(name) needs a value") }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" {
                rest.append(contentsOf: arguments[index...])
                break
            }
            var name = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            switch name {
            case "--bus": options.bus = try parseBus(try value(name, inline: inline))
            case "--bus-name":
                let busName = try value(name, inline: inline)
                guard isValidWellKnownName(busName) else { throw UsageError("--bus-name: \(busName) is not a valid bus name") }
                options.busName = busName
            case "--json":
                guard inline == nil else { throw UsageError("--json takes no value") }
                options.json = true
            case "-h", "--help":
                guard inline == nil else { throw UsageError("\(name) takes no value") }
                options.help = true
            default:
                rest.append(argument)
            }
            index += 1
        }
        return (options, rest)
    }

    public static func parseBus(_ text: String) throws(UsageError) -> DBusBusKind {
        switch text {
        case "session": return .session
        case "system": return .system
        default:
            // D-Bus addresses are transport:key=value,...
            guard text.contains(":"), text.contains("=") else {
                throw UsageError("--bus: \(text) is neither session, system nor a D-Bus address (e.g. unix:path=/run/bus)")
            }
            return .address(text)
        }
    }

    /// Well-known bus name syntax: two or more dot-separated elements of [A-Za-z0-9_-], not starting
    /// with a digit, at most 255 bytes.
    public static func isValidWellKnownName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.unicodeScalars.first, !(first >= "0" && first <= "9") else { return false }
            return element.unicodeScalars.allSatisfy {
                ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "_" || $0 == "-"
            }
        }
    }
}
