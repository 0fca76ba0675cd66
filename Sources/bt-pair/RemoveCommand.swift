// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine

/// `bt-pair remove DEVICE`: removes a member; the others re-key. The members it paired into the
/// ring (learned from it) are offered for removal too: asked, removed with --yes, listed with --json.
struct RemoveCommand: Subcommand {
    static let name = "remove"
    static let summary = "remove a member (its name, short id or device id); the others re-key"
    static let synopsis = "DEVICE [--yes]"
    static let details = """
          --yes         also remove the members DEVICE paired into the ring, without asking
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
        let members = try await connection.ringMembers()
        let target = members.filter { [$0.name, $0.shortID, $0.deviceID].contains(device) && !$0.isSelf }
        let introduced = target.count == 1 ? members.filter { !$0.isSelf && $0.introducedBy == target[0].shortID } : []
        try await connection.removeMember(device)
        var alsoRemove = yes
        if !introduced.isEmpty, !yes, !context.output.json {
            let names = introduced.map { "\($0.name) (\($0.shortID))" }.joined(separator: ", ")
            context.output.message("Removed \(device); the ring re-keys.")
            Output.write("\(device) paired these into the ring: \(names). Remove them too? [y/N] ", to: .standardError)
            let answer = (await PairingFollower.readAnswer() ?? "").whitespaceTrimmed.lowercased()
            alsoRemove = answer == "y" || answer == "yes"
        }
        if alsoRemove {
            for member in introduced { try await connection.removeMember(member.deviceID) }
        }
        let removedText = alsoRemove && !introduced.isEmpty
            ? "Removed \(device) and the \(introduced.count) member(s) it paired in; the ring re-keys."
            : "Removed \(device); the ring re-keys."
        context.output.result(json: OutputDocument.removed(device: device, introduced: introduced.map(\.shortID), alsoRemoved: alsoRemove),
                              text: removedText, compact: true)
        return PairExit.ok
    }
}
