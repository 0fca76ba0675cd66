// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCommandLine

public enum CommandLineTool {
    /// Every subcommand, in the order `baton --help` lists them.
    static let subcommands: [any Subcommand.Type] = [
        PublishCommand.self,
        StatusCommand.self,
        ListCommand.self,
        ContinueCommand.self,
        HandledTypesCommand.self,
        PublishersCommand.self,
        ClipboardCommand.self,
        SuggestionsCommand.self,
        DiagCommand.self,
        DoctorCommand.self,
    ]

    static var usage: String {
        """
        usage: baton [GLOBAL OPTIONS] COMMAND [ARGUMENTS]

        Commands:
        \(CommandLineProgram.commandList(subcommands))

        \(GlobalOptions.usage)

        Run 'baton COMMAND --help' for a command's arguments.
        Exit status: 0 success, 1 error from the daemon or the bus, 64 usage error;
        continue exits 10-15 by failure category (baton continue --help).

        """
    }

    /// A failed continuation exits with its category's status; every other failure with 1.
    public static let program = CommandLineProgram(name: "baton", subcommands: subcommands, usage: usage) { error in
        error.continuationFailure.map(ContinueCommand.exitStatus) ?? ExitStatus.failure
    }
}
