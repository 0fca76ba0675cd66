// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine

/// `baton handled-types`: what this user's apps can continue.
struct HandledTypesCommand: Subcommand {
    static let name = "handled-types"
    static let summary = "list the activity types this user can continue (running and installed apps)"
    static let synopsis = ""
    static let details = "Prints one type per line (with --json: an array of strings)."

    init(parsing arguments: inout ArgumentList) throws(UsageError) {}

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let types = try await connection.handledTypes().sorted()
        context.output.result(json: OutputDocument.handledTypes(types), text: types.joined(separator: "\n"))
        return ExitStatus.success
    }
}
