// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine

/// `bt-pair accept`: waits for another machine to pair with this one.
struct AcceptCommand: Subcommand {
    static let name = "accept"
    static let summary = "wait up to 120 s for another machine to pair with this one"
    static let synopsis = "[--host ADDR]"
    static let details = """
          --host ADDR   the address the other machine should dial (only printed)
        This machine shows a code to type on the other machine; that machine then shows a second
        code to type here. Until it is typed here, any second machine that connects ends the session.
        """

    var host: String?
    /// Hidden, for test harnesses only (bt-pair(1) TESTING): answers "Add them to this ring?" with yes.
    var testAutoConfirm = false

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        while let option = arguments.popOption() {
            switch option.name {
            case "--host": host = try arguments.value(for: option)
            case testAutoConfirmOption:
                try arguments.flag(option)
                testAutoConfirm = true
            case "--yes": throw UsageError(yesIsGone)
            default: throw UsageError("unknown option \(option.name)")
            }
        }
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let path = try await connection.acceptPairing(AcceptOptions(host: host))
        let session = try await connection.pairingSession(at: path)
        context.output.message("Waiting up to 120 s. On the other machine run:\n  bt-pair with \(host ?? "THIS-HOST"):\(session.port) --session \(session.sessionID)")
        if context.output.json {
            context.output.jsonLine(OutputDocument.acceptOffer(port: session.port, sessionID: session.sessionID))
        }
        return try await PairingFollower(connection: connection, context: context, path: path, commitWithoutAsking: testAutoConfirm).follow()
    }
}
