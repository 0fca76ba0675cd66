// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import BatonCommandLine
import BatonPublishers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `baton clipboard`: turns this user's universal clipboard on or off (publishers.conf's
/// `clipboard` key, read by baton-agent) and says what it does (docs/clipboard.md).
struct ClipboardCommand: Subcommand {
    static let name = "clipboard"
    static let summary = "share the clipboard with your other ring machines: enable, disable or show its status"
    static let synopsis = "[enable|disable|status]"
    static let details = """
        enable: copies you make here are offered to the ring (only that a copy exists; the bytes
        move when you paste on another machine), and copies you make there can be pasted here.
        Nothing marked secret by the app that copied (password managers) is ever offered; an offer
        expires after 2 minutes. Off until enabled; per user.
        The setting is `clipboard = on|off` in $XDG_CONFIG_HOME/baton/publishers.conf (default
        ~/.config), followed by baton-agent in your desktop session; the daemon is not needed.
        status (the default): whether it is on, whether baton-agent runs and shares it, which
        session clipboard it uses, and what is offered or was taken from another machine; and,
        from batond, how long your copy stays offered, which machines asked for its types and
        where it was pasted (its bytes leave only then), with the counts since batond started.
        With --json: {"Enabled", "AgentRunning", "Registered", "SessionClipboard", "Offer",
        "Taken", "Problem", "Daemon", "DaemonProblem"} (absent values are null; "Daemon" is
        Clipboard1.GetStatus: {"Registered", "Offer", "Taken", "OffersAnswered", "PastesAnswered"}).
        """

    enum Action: Sendable { case enable, disable, status }
    let action: Action

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        switch try arguments.popPositional() {
        case nil, "status": action = .status
        case "enable": action = .enable
        case "disable": action = .disable
        case let other?: throw UsageError("\(other): expected enable, disable or status")
        }
        try arguments.expectEnd()
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        var settings = PublisherSettings.load(environment: environment)
        if action != .status {
            if action == .enable { settings.enabled.insert(.clipboard) } else { settings.enabled.remove(.clipboard) }
            do { try settings.save(environment: environment) } catch {
                context.output.message("baton: cannot write \(PublisherSettings.fileURL(environment: environment)?.path ?? "publishers.conf"): \(error); check that the directory is yours and writable")
                return ExitStatus.failure
            }
        }
        // batond's side only for status, and only when it is on (enable and disable need no daemon).
        var daemon: Result<ClipboardAccountStatus, BatonClientError>?
        if action == .status, settings.isEnabled(.clipboard) {
            do throws(BatonClientError) {
                let connection = try context.connect()
                defer { connection.close() }
                daemon = .success(try await connection.clipboardStatus(timeout: .seconds(10)))
            } catch {
                daemon = .failure(error)
            }
        }
        let report = Self.report(enabled: settings.isEnabled(.clipboard), agent: ClipboardAgentStatus.load(environment: environment),
                                 support: SessionClipboardSupport.probe(environment: environment), daemon: daemon,
                                 busName: context.options.busName)
        context.output.result(json: report.json, text: report.lines.joined(separator: "\n"))
        return ExitStatus.success
    }

    struct Report {
        var lines: [String]
        var json: JSONValue
    }

    /// What `status` says, from the setting, the agent's status file (nil: no agent runs) and this
    /// session's environment.
    static func report(enabled: Bool, agent: ClipboardAgentStatus?, support: SessionClipboardSupport,
                       daemon: Result<ClipboardAccountStatus, BatonClientError>? = nil, busName: String = "org.baton") -> Report {
        var lines = [enabled ? "clipboard: on (baton clipboard disable turns it off)" : "clipboard: off (baton clipboard enable turns it on)"]
        let sessionClipboard = agent?.sessionClipboard ?? support.session
        var problem = agent?.problem
        if let agent {
            lines.append("agent: baton-agent runs (pid \(agent.pid))" + (enabled ? (agent.registered ? ", sharing with batond" : ", not registered with batond") : ""))
        } else {
            lines.append("agent: baton-agent does not run in this session" + (enabled ? "; start it (systemctl --user enable --now baton-agent)" : ""))
        }
        lines.append("session clipboard: \(sessionClipboard)")
        if agent == nil, case .cannot(_, let reason, let fix) = support {
            problem = problem ?? "\(reason); \(fix)"
        }
        if let problem, enabled { lines.append("problem: \(problem)") }
        if enabled {
            lines.append("offered to the ring: " + (agent?.offer ?? "nothing"))
            if let taken = agent?.taken { lines.append("on the clipboard from another machine: \(taken)") }
            if let note = agent?.note { lines.append("note: \(note)") }
            switch daemon {
            case .success(let status): lines += ClipboardDaemonReport.lines(status, busName: busName)
            case .failure(let error): lines.append("batond: \(error.message)")
            case nil: break
            }
        }
        func optional(_ text: String?) -> JSONValue { text.map { .string($0) } ?? .null }
        let json = JSONValue.object([
            (key: "Enabled", value: .boolean(enabled)),
            (key: "AgentRunning", value: .boolean(agent != nil)),
            (key: "Registered", value: .boolean(agent?.registered ?? false)),
            (key: "SessionClipboard", value: .string(sessionClipboard)),
            (key: "Offer", value: optional(agent?.offer)),
            (key: "Taken", value: optional(agent?.taken)),
            (key: "Problem", value: optional(enabled ? problem : nil)),
            (key: "Note", value: optional(enabled ? agent?.note : nil)),
            (key: "Daemon", value: (try? daemon?.get()).map(ClipboardDaemonReport.json) ?? .null),
            (key: "DaemonProblem", value: { if case .failure(let error) = daemon { .string(error.message) } else { .null } }()),
        ])
        return Report(lines: lines, json: json)
    }
}
