// SPDX-License-Identifier: GPL-2.0-or-later
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
            return usageFailure(error.message, usage: usage)
        }
        let output = Output(json: options.json)
        let command: any Subcommand.Type
        if let first = rest.first, first != "--", let named = subcommands.first(where: { $0.name == first }) {
            rest.removeFirst()
            command = named
        } else if let first = rest.first, first == "help" {
            Output.write(usage, to: .standardOutput)
            return ExitStatus.success
        } else if let first = rest.first, first != "--", !first.hasPrefix("-") || defaultSubcommand == nil {
            return usageFailure("unknown command '\(first)'", usage: usage)
        } else if let fallback = defaultSubcommand, !options.help {
            command = fallback
        } else {
            if options.help {
                Output.write(usage, to: .standardOutput)
                return ExitStatus.success
            }
            return usageFailure("no command given", usage: usage)
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
            return usageFailure("\(command.name): \(error.message)", usage: command.help(program: name))
        }
        do {
            return try await parsed.run(CommandContext(options: options, output: output, program: name))
        } catch {
            let explanation = DaemonReachability.explanation(for: error, options: options) ?? "\(error.name): \(error.message)"
            output.message("\(name) \(command.name): \(explanation)")
            return failureStatus(error)
        }
    }

    func usageFailure(_ message: String, usage: String) -> Int32 {
        Output.write("\(name): \(message)\n\n\(usage)", to: .standardError)
        return ExitStatus.usage
    }
}
