// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine

/// `bt-pair remove DEVICE`: removes a member; the others re-key. Asked first (--yes: without
/// asking) whether to remove it with what it introduced: one signed mark then also removes the
/// members it paired into the ring, transitively, and whatever it or they pair in later.
struct RemoveCommand: Subcommand {
    static let name = "remove"
    static let summary = "remove a member (its name, short id or device id); the others re-key"
    static let synopsis = "DEVICE [--yes]"
    static let details = """
          --yes         also remove what DEVICE paired into the ring, now and later, without asking
        """

    var device: String
    var yes = false

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        var device: String?
        while !arguments.isEmpty {
            if let option = arguments.popOption() {
                guard option.name == "--yes" else { throw UsageError("unknown option \(option.name)") }
                try arguments.flag(option)
                yes = true
            } else if let operand = try arguments.popPositional() {
                guard device == nil else { throw UsageError("remove takes 1 operand(s)") }
                device = operand
            }
        }
        guard let device else { throw UsageError("remove takes 1 operand(s)") }
        self.device = device
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        // What a removal with what DEVICE introduced takes out now (also resolves DEVICE: an unknown
        // or ambiguous one fails here, before anything is asked or removed).
        let introduced = try await connection.introducedMembers(device)
        var withIntroduced = yes
        if !yes, !context.output.json {
            let names = introduced.map { "\($0.name) (\($0.shortID))" }.joined(separator: ", ")
            let now = introduced.isEmpty ? "It paired no member that is still in the ring." : "It paired these into the ring: \(names)."
            Output.write("Removing \(device). \(now) Also remove everything \(device) paired in, now and later "
                         + "(one signed removal; say no if you know those machines)? [y/N] ", to: .standardError)
            let answer = (await PairingFollower.readAnswer() ?? "").whitespaceTrimmed.lowercased()
            withIntroduced = answer == "y" || answer == "yes"
        }
        try await connection.removeMember(device, withIntroduced: withIntroduced)
        let removedText = withIntroduced
            ? "Removed \(device) and everything it paired in (\(introduced.count) member(s) now, and any later); the ring re-keys."
            : "Removed \(device); the ring re-keys."
        context.output.result(json: OutputDocument.removed(device: device, introduced: introduced.map(\.shortID), alsoRemoved: withIntroduced),
                              text: removedText, compact: true)
        return PairExit.ok
    }
}
