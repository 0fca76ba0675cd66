import BatonClient

enum CommandLineTool {
    /// Every subcommand, in the order `baton --help` lists them.
    static let subcommands: [any Subcommand.Type] = [
        PublishCommand.self,
        StatusCommand.self,
        ListCommand.self,
        ContinueCommand.self,
        HandledTypesCommand.self,
        SuggestionsCommand.self,
        DiagCommand.self,
    ]

    static var usage: String {
        // Plain loops: key paths on existential metatypes crash the 6.3 compiler.
        var width = 0
        for command in subcommands { width = max(width, command.name.count) }
        var commands: [String] = []
        for command in subcommands {
            commands.append("  " + command.name + String(repeating: " ", count: width - command.name.count + 2) + command.summary)
        }
        return """
            usage: baton [GLOBAL OPTIONS] COMMAND [ARGUMENTS]

            Commands:
            \(commands.joined(separator: "\n"))

            \(GlobalOptions.usage)

            Run 'baton COMMAND --help' for a command's arguments.
            Exit status: 0 success, 1 error from the daemon or the bus, 64 usage error.

            """
    }

    static func run(arguments: [String]) async -> Int32 {
        let options: GlobalOptions
        var rest: [String]
        do {
            (options, rest) = try GlobalOptions.extract(from: arguments)
        } catch {
            return usageFailure(error.message, usage: usage)
        }
        let output = Output(json: options.json)
        guard let name = rest.first, name != "--" else {
            if options.help {
                Output.write(usage, to: .standardOutput)
                return ExitStatus.success
            }
            return usageFailure("no command given", usage: usage)
        }
        rest.removeFirst()
        guard let command = subcommands.first(where: { $0.name == name }) else {
            if name == "help" {
                Output.write(usage, to: .standardOutput)
                return ExitStatus.success
            }
            return usageFailure("unknown command '\(name)'", usage: usage)
        }
        if options.help {
            Output.write(command.help, to: .standardOutput)
            return ExitStatus.success
        }
        var list = ArgumentList(rest)
        let parsed: any Subcommand
        do {
            parsed = try command.init(parsing: &list)
            try list.expectEnd()
        } catch {
            return usageFailure("\(name): \(error.message)", usage: command.help)
        }
        do {
            return try await parsed.run(CommandContext(options: options, output: output))
        } catch {
            output.message("baton \(name): \(error.name): \(error.message)")
            return ExitStatus.failure
        }
    }

    static func usageFailure(_ message: String, usage: String) -> Int32 {
        Output.write("baton: \(message)\n\n\(usage)", to: .standardError)
        return ExitStatus.usage
    }
}
