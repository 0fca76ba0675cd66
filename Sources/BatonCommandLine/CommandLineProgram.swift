// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient

/// A command-line tool made of subcommands: global options anywhere before `--`, then a
/// subcommand name and its arguments. `run` parses, runs and returns the exit status.
public struct CommandLineProgram: Sendable {
    /// "baton", "bt-pair": the prefix of every message.
    public var name: String
    /// In the order the usage lists them.
    public var subcommands: [any Subcommand.Type]
    /// Run when no subcommand is named (nil: that is a usage error).
    public var defaultSubcommand: (any Subcommand.Type)?
    /// The whole usage text (`NAME --help`).
    public var usage: String
    /// The exit status for a daemon or bus failure.
    public var failureStatus: @Sendable (BatonClientError) -> Int32

    public init(name: String, subcommands: [any Subcommand.Type], defaultSubcommand: (any Subcommand.Type)? = nil,
                usage: String, failureStatus: @escaping @Sendable (BatonClientError) -> Int32 = { _ in ExitStatus.failure }) {
        self.name = name
        self.subcommands = subcommands
        self.defaultSubcommand = defaultSubcommand
        self.usage = usage
        self.failureStatus = failureStatus
    }

    /// "  name   summary" lines for a usage text, names aligned.
    public static func commandList(_ subcommands: [any Subcommand.Type]) -> String {
        // Plain loops: key paths on existential metatypes crash the 6.3 compiler.
        var width = 0
        for command in subcommands { width = max(width, command.name.count) }
        var commands: [String] = []
        for command in subcommands {
            commands.append("  " + command.name + String(repeating: " ", count: width - command.name.count + 2) + command.summary)
        }
        return commands.joined(separator: "\n")
    }

    public func run(arguments: [String]) async -> Int32 {
        let options: GlobalOptions
        var rest: [String]
        do {
            (options, rest) = try GlobalOptions.extract(from: arguments)
        } catch {
            return usageFailure(error.message)
        }
        let output = Output(json: options.json)
        let command: any Subcommand.Type
        // No command named (bt-pair's default): a usage error points at the program's help.
        var named = true
        if rest.first == "--version" {
            // Only before a command: after one, --version may be that command's own option (publish).
            guard rest.count == 1 else { return usageFailure("--version takes no arguments") }
            Output.write("\(name) \(BatonRelease.version)\n", to: .standardOutput)
            return ExitStatus.success
        }
        if let first = rest.first, first != "--", let named = subcommands.first(where: { $0.name == first }) {
            rest.removeFirst()
            command = named
        } else if let first = rest.first, first == "help" {
            // `help` alone: the whole usage; `help COMMAND`: that command's help.
            guard rest.count <= 2 else { return usageFailure("help takes at most one command") }
            guard rest.count == 2 else {
                Output.write(usage, to: .standardOutput)
                return ExitStatus.success
            }
            guard let named = subcommands.first(where: { $0.name == rest[1] }) else {
                return usageFailure("no command '\(rest[1])' to show help for")
            }
            Output.write(named.help(program: name), to: .standardOutput)
            return ExitStatus.success
        } else if let first = rest.first, first != "--", !first.hasPrefix("-") || defaultSubcommand == nil {
            return usageFailure(first.hasPrefix("-") ? "unknown option \(first)" : "unknown command '\(first)'")
        } else if let fallback = defaultSubcommand, !options.help {
            command = fallback
            named = false
        } else {
            if options.help {
                Output.write(usage, to: .standardOutput)
                return ExitStatus.success
            }
            return usageFailure("no command given")
        }
        if options.help {
            Output.write(command.help(program: name), to: .standardOutput)
            return ExitStatus.success
        }
        var list = ArgumentList(rest)
        let parsed: any Subcommand
        do {
            parsed = try command.init(parsing: &list)
            try list.expectEnd()
        } catch {
            return named ? usageFailure("\(command.name): \(error.message)", helpFor: command.name) : usageFailure(error.message)
        }
        do {
            return try await parsed.run(CommandContext(options: options, output: output, program: name))
        } catch {
            let explanation = DaemonReachability.sentence(for: error, options: options, command: command.name)
            output.message("\(name) \(command.name): \(explanation)")
            return failureStatus(error)
        }
    }

    /// One line saying what was wrong and where help is, on stderr; exit 64. The whole usage is not
    /// repeated: it would bury the one line that matters.
    func usageFailure(_ message: String, helpFor command: String? = nil) -> Int32 {
        Output.write(Self.usageFailureText(program: name, message, helpFor: command), to: .standardError)
        return ExitStatus.usage
    }

    /// "PROG: message" and "Try 'PROG [COMMAND] --help'.", for every executable's usage errors.
    public static func usageFailureText(program: String, _ message: String, helpFor command: String? = nil) -> String {
        "\(program): \(message)\nTry '\(program)\(command.map { " " + $0 } ?? "") --help'.\n"
    }
}
