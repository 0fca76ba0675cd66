import BatonClient
import BatonCommandLine

/// `bt-pair remove DEVICE`: removes a member; the others re-key.
struct RemoveCommand: Subcommand {
    static let name = "remove"
    static let summary = "remove a member (its name, short id or device id); the others re-key"
    static let synopsis = "DEVICE"
    static let details = ""

    let device: String

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        guard let device = try arguments.popPositional() else { throw UsageError("remove takes 1 operand(s)") }
        self.device = device
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        try await connection.removeMember(device)
        context.output.result(json: OutputDocument.removed(device: device),
                              text: "Removed \(device); the ring re-keys.", compact: true)
        return PairExit.ok
    }
}
