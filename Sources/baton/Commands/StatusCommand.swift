import BatonClient
import BatonCommandLine

/// `baton status`: the daemon's lifecycle state, radio and recent errors.
struct StatusCommand: Subcommand {
    static let name = "status"
    static let summary = "show the daemon's state, adapter, radio, version and recent errors"
    static let synopsis = ""
    static let details = """
        With --json: {"state", "adapter", "radio", "version", "busName",
        "errors": [{"time", "category", "count"}]}.
        """

    init(parsing arguments: inout ArgumentList) throws(UsageError) {}

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let status = try await connection.status()
        let errors = status.errors.map { record in
            JSONValue.object([("time", .integer(record.time)), ("category", .string(record.category)),
                              ("count", .integer(Int64(record.count)))])
        }
        var text = """
            State:    \(status.state)
            Adapter:  \(status.adapter)
            Radio:    \(status.radio)
            Version:  \(status.version)
            Bus name: \(status.busName)
            """
        if status.errors.isEmpty {
            text += "\nErrors:   none"
        } else {
            text += "\nErrors:"
            for record in status.errors { text += "\n  \(record.category) ×\(record.count) (last at \(record.time))" }
        }
        context.output.result(
            json: .object([
                ("state", .string(status.state)), ("adapter", .string(status.adapter)), ("radio", .string(status.radio)),
                ("version", .string(status.version)), ("busName", .string(status.busName)), ("errors", .array(errors)),
            ]),
            text: text)
        return ExitStatus.success
    }
}
