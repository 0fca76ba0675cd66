// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine
import Foundation

/// `bt-pair list`: the machines in this ring (the default command).
struct ListMembersCommand: Subcommand {
    static let name = "list"
    static let summary = "the machines in this ring (the default)"
    static let synopsis = ""
    static let details = ""

    init(parsing arguments: inout ArgumentList) throws(UsageError) {}

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let members = try await connection.ringMembers()
        if context.output.json {
            context.output.jsonLine(.array(members.map(OutputDocument.ringMember)))
            return PairExit.ok
        }
        context.output.line("NAME                 ID         PAIRED SINCE      LAST SEEN         RSSI")
        for member in members {
            let rssi = member.lastRSSI.map { String($0) } ?? "-"
            let since = member.isSelf ? "(this machine)" : Self.formatTime(member.pairedSince)
            let seen = member.isSelf ? "" : Self.formatTime(member.lastSeen)
            context.output.line(member.name.padding(toLength: 20, withPad: " ", startingAt: 0) + " " + member.shortID + "  "
                + since.padding(toLength: 17, withPad: " ", startingAt: 0) + " " + seen.padding(toLength: 17, withPad: " ", startingAt: 0)
                + " " + rssi + (member.introducedBy.map { "  learned from \($0)" } ?? ""))
        }
        return PairExit.ok
    }

    static func formatTime(_ seconds: Int64?) -> String {
        guard let seconds else { return "never" }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
