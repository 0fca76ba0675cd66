// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCommandLine
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

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
            // Names are chosen by whoever introduced the identity: no terminal escape reaches the screen.
            context.output.line(PairingReviewText.shown(member.name).padded(to: 20) + " " + member.shortID + "  "
                + since.padded(to: 17) + " " + seen.padded(to: 17)
                + " " + rssi + (Self.introduction(of: member, in: members).map { "  " + $0 } ?? ""))
        }
        return PairExit.ok
    }

    /// "introduced by NAME (xxxx-xxxx)" for a member this machine learned from another member's
    /// roster; "introduced by xxxx-xxxx (removed)" once that member has left the ring (its name
    /// left with it; the attribution stays). Nil for members paired here and for this machine.
    static func introduction(of member: RingMember, in members: [RingMember]) -> String? {
        guard let introducer = member.introducedBy else { return nil }
        if member.introducerRemoved == true { return "introduced by \(introducer) (removed)" }
        guard let name = members.first(where: { $0.shortID == introducer })?.name else { return "introduced by \(introducer)" }
        return "introduced by \(PairingReviewText.shown(name)) (\(introducer))"
    }

    static func formatTime(_ seconds: Int64?) -> String {
        guard let seconds else { return "never" }
        // Local time, "yyyy-MM-dd HH:mm" (Glibc: DateFormatter would bring ICU into the binary).
        var time = time_t(seconds)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return "never" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)):\(two(parts.tm_min))"
    }
}
