// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine

/// `baton status`: the daemon's lifecycle state, radio and recent errors.
struct StatusCommand: Subcommand {
    static let name = "status"
    static let summary = "show the daemon's state, adapter, radio, version and recent errors"
    static let synopsis = ""
    static let details = """
        State is degraded when the radio batond was asked to use cannot work; Radio then says
        unavailable and why. With --json: {"State", "Adapter", "Radio", "RadioDetail" (only
        when unavailable), "LEPrivacy" (on, off or unknown: whether the adapter uses resolvable
        private addresses; only while the radio is ready), "LEPrivacyDetail" (when it matters:
        what the public address exposes and the fix, or why it is unknown), "Version", "BusName", "Errors": [{"Time", "Category", "Count"}],
        "SessionAgent" (whether your baton-agent runs: without it no app is started for a
        continued activity), "SecretsAtRest" ("plain", or "sealed-host", "sealed-host+tpm2",
        "sealed-tpm2": the keys sealed with systemd-creds), "RingChangeRefused" and
        "RingChangeRefusedTime" (only after a pairing, removal or RingSync was refused because
        the ring record could not be saved: what, why and the fix; when)}.
        """

    init(parsing arguments: inout ArgumentList) throws(UsageError) {}

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let connection = try context.connect()
        defer { connection.close() }
        let status = try await connection.status()
        var text = """
            State:    \(status.state)
            Adapter:  \(status.adapter)
            Radio:    \(status.radio)\(status.radioDetail.map { " (\($0))" } ?? "")
            \(Self.privacyLine(status))Version:  \(status.version)
            Bus name: \(status.busName)
            """
        if let agent = status.sessionAgent {
            text += agent ? "\nAgent:    baton-agent runs (apps are started for continued activities)"
                : "\nAgent:    none (no app is started for a continued activity: run baton-agent in your session)"
        }
        if let secrets = status.secretsAtRest { text += "\nSecrets:  " + DaemonChecks.secretsAtRestText(secrets) }
        if let refused = status.ringChangeRefused {
            text += "\nRing:     last change refused" + (status.ringChangeRefusedTime.map { " (at \($0))" } ?? "") + ": " + refused
        }
        if status.errors.isEmpty {
            text += "\nErrors:   none"
        } else {
            text += "\nErrors:"
            for record in status.errors { text += "\n  \(record.category) ×\(record.count) (last at \(record.time))" }
        }
        context.output.result(json: OutputDocument.status(status), text: text)
        return ExitStatus.success
    }

    /// "Privacy:  off (LE privacy is off: …; set `Privacy = device` …)\n", or nothing when the daemon does not say.
    static func privacyLine(_ status: DaemonStatus) -> String {
        guard let privacy = status.lePrivacy else { return "" }
        return "Privacy:  LE privacy \(privacy)" + (status.lePrivacyDetail.map { " (\($0))" } ?? "") + "\n"
    }
}
