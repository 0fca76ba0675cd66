import BatonClient

/// One `baton` subcommand. To add one: write a type conforming to this protocol in its own file
/// under Commands/ and list it in `CommandLineTool.subcommands`.
protocol Subcommand: Sendable {
    /// The word after `baton`, e.g. "publish".
    static var name: String { get }
    /// One line for the command list.
    static var summary: String { get }
    /// Arguments after the name, e.g. "--type T --title X [--for SECONDS]".
    static var synopsis: String { get }
    /// Option descriptions shown by `baton NAME --help` (may be empty).
    static var details: String { get }

    /// Parses the arguments after the subcommand name (global options already removed).
    init(parsing arguments: inout ArgumentList) throws(UsageError)

    /// Runs the command; returns the exit status. Daemon failures are thrown.
    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32
}

extension Subcommand {
    static var usageLine: String { "usage: baton [GLOBAL OPTIONS] \(name)\(synopsis.isEmpty ? "" : " " + synopsis)" }
    static var help: String {
        var text = usageLine + "\n\n" + summary + "\n"
        if !details.isEmpty { text += "\n" + details + "\n" }
        return text
    }
}

/// What every command gets: the output channels and a way to reach the daemon.
struct CommandContext: Sendable {
    let options: GlobalOptions
    let output: Output

    /// Opens the connection the command works through.
    func connect() throws(BatonClientError) -> BatonConnection {
        try BatonConnection(bus: options.bus, busName: options.busName)
    }
}

enum ExitStatus {
    static let success: Int32 = 0
    /// The daemon or the bus reported an error.
    static let failure: Int32 = 1
    /// The command line was wrong (sysexits EX_USAGE).
    static let usage: Int32 = 64
}
