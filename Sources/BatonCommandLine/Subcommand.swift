// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient

/// One subcommand of a command-line tool (`baton publish`, `bt-pair accept`). To add one: write a
/// type conforming to this protocol in its own file and list it in its program's `subcommands`.
public protocol Subcommand: Sendable {
    /// The word after the tool's name, e.g. "publish".
    static var name: String { get }
    /// One line for the command list.
    static var summary: String { get }
    /// Arguments after the name, e.g. "--type T --title X [--for SECONDS]".
    static var synopsis: String { get }
    /// Option descriptions shown by `TOOL NAME --help` (may be empty).
    static var details: String { get }

    /// Parses the arguments after the subcommand name (global options already removed).
    init(parsing arguments: inout ArgumentList) throws(UsageError)

    /// Runs the command; returns the exit status. Daemon failures are thrown.
    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32
}

extension Subcommand {
    public static func usageLine(program: String) -> String {
        "usage: \(program) [GLOBAL OPTIONS] \(name)\(synopsis.isEmpty ? "" : " " + synopsis)"
    }

    public static func help(program: String) -> String {
        var text = usageLine(program: program) + "\n\n" + summary + "\n"
        if !details.isEmpty { text += "\n" + details + "\n" }
        return text
    }
}

/// What every command gets: the output channels and a way to reach the daemon.
public struct CommandContext: Sendable {
    public let options: GlobalOptions
    public let output: Output
    /// The tool's name, for messages ("baton", "bt-pair").
    public let program: String

    public init(options: GlobalOptions, output: Output, program: String) {
        self.options = options
        self.output = output
        self.program = program
    }

    /// Opens the connection the command works through; a bus that cannot be reached is said in words.
    public func connect() throws(BatonClientError) -> BatonConnection {
        do {
            return try BatonConnection(bus: options.bus, busName: options.busName)
        } catch {
            throw DaemonReachability.connectionFailure(error, options: options)
        }
    }
}

public enum ExitStatus {
    public static let success: Int32 = 0
    /// The daemon or the bus reported an error.
    public static let failure: Int32 = 1
    /// The command line was wrong (sysexits EX_USAGE).
    public static let usage: Int32 = 64
}
