// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine
#if canImport(Glibc)
import Glibc
#endif

/// `bt-pair reset-identity`: this machine leaves its ring and takes a new identity (protocol §7
/// "A new identity"). Always asked in a terminal (no --yes): the other machines keep the old id
/// until their owner removes it there, and this machine must then be paired again.
struct ResetIdentityCommand: Subcommand {
    static let name = "reset-identity"
    static let summary = "this machine leaves its ring and takes a new identity (asks first)"
    static let synopsis = ""
    static let details = ""

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        if let option = arguments.popOption() { throw UsageError("unknown option \(option.name)") }
        if try arguments.popPositional() != nil { throw UsageError("reset-identity takes no operand") }
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        // Asked of a person, never of a script: without a terminal on stdin nothing is reset.
        guard isatty(STDIN_FILENO) == 1 else {
            return context.fail("reset-identity asks before it makes this machine leave its ring; run it in a terminal", PairExit.failure)
        }
        let connection = try context.connect()
        defer { connection.close() }
        let members = try await connection.ringMembers()
        let before = members.first { $0.isSelf }
        let oldID = before?.deviceID ?? ""
        let oldShort = before?.shortID ?? "the old id"
        let alone = members.count <= 1
        // Alone (a removed machine starts over as a ring of one): the others may hold it as removed already.
        let others = alone
            ? "Machines that still list it as a member must remove it (`bt-pair remove \(oldShort)` on one of them) before it pairs with them again"
            : "The other machines are not told: on one of them, run `bt-pair remove \(oldShort)`, then pair this machine again"
        Output.write("This machine (\(oldShort)) leaves \(alone ? "its ring (a ring of one)" : "its ring of \(members.count) machines"), "
                     + "forgets the ring's keys and its own identity, and starts alone under a new device id. "
                     + others + " (`bt-pair accept` there, `bt-pair with` here). Reset this machine's identity? [y/N] ", to: .standardError)
        let answer = (await PairingFollower.readAnswer() ?? "").whitespaceTrimmed.lowercased()
        guard answer == "y" || answer == "yes" else {
            return context.fail("nothing changed: the identity was not reset", PairExit.rejected)
        }
        let newID = try await connection.resetIdentity()
        let newShort = try await connection.ringMembers().first { $0.isSelf }?.shortID ?? newID
        context.output.result(json: OutputDocument.identityReset(deviceID: newID, previousDeviceID: oldID),
                              text: "This machine is now \(newShort), a ring of one. "
                                  + (alone ? "Where another machine still lists \(oldShort), remove it there (`bt-pair remove \(oldShort)`); then "
                                           : "On another machine of the old ring, run `bt-pair remove \(oldShort)`; then ")
                                  + "pair again (`bt-pair accept` there, `bt-pair with` here).",
                              compact: true)
        return PairExit.ok
    }
}
