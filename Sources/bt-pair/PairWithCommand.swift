// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine

/// `bt-pair with TARGET`: pairs with a machine running `bt-pair accept`.
struct PairWithCommand: Subcommand {
    static let name = "with"
    static let summary = "pair with the machine running `bt-pair accept`"
    static let synopsis = "HOST:PORT|ble:ADDRESS/PSM --session ID | NAME-OR-SESSION [--seconds N] [--code CODE]"
    static let details = """
          --session ID  the session id `bt-pair accept` printed (needed with an address)
          --seconds N   how long to look for a NAME-OR-SESSION (1-30, default 5)
          --code CODE   the code `bt-pair accept` shows (asked for when absent)
        Once the code typed here matches, this machine shows a second code: type it on the
        accepting machine, which asks for it.
        """

    var target: String
    var session: String?
    var seconds: UInt32 = 5
    /// Hidden, for test harnesses only (bt-pair(1) TESTING): answers "Add them to this ring?" with yes.
    var testAutoConfirm = false
    var code: String?

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        var target: String?
        while !arguments.isEmpty {
            if let option = arguments.popOption() {
                switch option.name {
                case "--session": session = try arguments.value(for: option)
                case "--seconds": seconds = try parseSeconds(try arguments.value(for: option))
                case "--code": code = try arguments.value(for: option)
                case testAutoConfirmOption:
                    try arguments.flag(option)
                    testAutoConfirm = true
                case "--yes": throw UsageError(yesIsGone)
                default: throw UsageError("unknown option \(option.name)")
                }
            } else if let operand = try arguments.popPositional() {
                guard target == nil else { throw UsageError("with takes 1 operand(s)") }
                target = operand
            }
        }
        guard let target else { throw UsageError("with takes 1 operand(s)") }
        if session == nil && isEndpoint(target) {
            throw UsageError("with HOST:PORT or ble:ADDRESS/PSM needs --session ID (printed by bt-pair accept)")
        }
        self.target = target
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        var dial = target
        var peerLabel = "the other machine"
        var options = PairOptions(sessionID: session ?? "")
        if !isEndpoint(target) {
            switch TargetMatch(target, in: try await connection.discoverPairing(seconds: seconds)) {
            case .none:
                return context.fail("no machine waiting in `bt-pair accept` matches \(target)", PairExit.notFound)
            case .ambiguous:
                return context.fail("several machines match \(target); use the session id (bt-pair discover lists them)", PairExit.failure)
            case .found(let endpoint):
                context.output.message("Found \(endpoint.name) at \(endpoint.target).")
                dial = endpoint.target
                peerLabel = endpoint.name
                options.sessionID = endpoint.sessionID
                if endpoint.transport == "ble", ["public", "random"].contains(endpoint.addressType) { options.addressType = endpoint.addressType }
            }
        }
        let path = try await connection.pair(with: dial, options: options)
        context.output.message("Connected; exchanging keys...")
        return try await PairingFollower(connection: connection, context: context, path: path, commitWithoutAsking: testAutoConfirm,
                                         typedCode: code, peerLabel: peerLabel).follow()
    }
}
