// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine

/// `bt-pair discover`: machines waiting in `bt-pair accept`, over DNS-SD and Bluetooth.
struct DiscoverCommand: Subcommand {
    static let name = "discover"
    static let summary = "machines waiting in `bt-pair accept` nearby (DNS-SD and Bluetooth)"
    static let synopsis = "[--seconds N]"
    static let details = "  --seconds N   browse for N seconds (default 5, at most 30)"

    var seconds: UInt32 = 5

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        while let option = arguments.popOption() {
            guard option.name == "--seconds" else { throw UsageError("unknown option \(option.name)") }
            seconds = try parseSeconds(try arguments.value(for: option))
        }
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let found = try await connection.discoverPairing(seconds: seconds)
        if context.output.json {
            context.output.jsonLine(.array(found.map(OutputDocument.pairingEndpoint)))
        } else {
            context.output.line("NAME                           SESSION           ADDRESS")
            for endpoint in found {
                context.output.line(endpoint.name.padded(to: 30) + " " + endpoint.sessionID + "  " + endpoint.target)
            }
        }
        if found.isEmpty { context.output.message("No machine is waiting in `bt-pair accept` nearby.") }
        return found.isEmpty ? PairExit.notFound : PairExit.ok
    }
}
