// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine
import BatonDBus
import BatonPublishers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `baton doctor`: why no suggestion appears, line by line, with the fix for each failure.
struct DoctorCommand: Subcommand {
    static let name = "doctor"
    static let summary = "check, in order, everything a suggestion needs and say how to fix what is missing"
    static let synopsis = "[--bluez-bus system|ADDRESS] [--session-bus session|ADDRESS]"
    static let details = """
        Checks, in this order: adapter (a Bluetooth adapter exists and is powered, asked of
        BlueZ on the system bus), bluetoothd (its version, experimental interfaces on or off),
        batond (runs and owns its bus name, radio state), ring (the other members and when
        each was last heard), handled-types (what this user can continue), permissions (whether
        this user may continue suggestions and pair: group baton, or polkit's answer for this
        session), notifications (a
        notification server on the session bus), agent (baton-agent runs in this session),
        browser (with the browser publisher on: which browser here has Baton's extension
        installed system-wide, and what to do in those that do not), clipboard (whether the
        clipboard can be shared in this session: X11, or a Wayland compositor with data control; when on, whether
        baton-agent shares it).
        Each line is ok, warning, FAILED or skipped; every warning and failure is followed by
        "fix:" and what to do. Exit status 1 when a check failed, else 0.
        With --json: [{"Check", "Result", "Detail", "Fix" (when not ok)}].
          --bluez-bus system|ADDRESS     where bluetoothd is asked (default: the system bus)
          --session-bus session|ADDRESS  the session bus to check (default: this session's)
        """

    var bluezBus: DBusBusKind = .system
    var sessionBus: DBusBusKind = .session

    init(parsing arguments: inout ArgumentList) throws(UsageError) {
        while let option = arguments.popOption() {
            switch option.name {
            case "--bluez-bus": bluezBus = try GlobalOptions.parseBus(try arguments.value(for: option))
            case "--session-bus": sessionBus = try GlobalOptions.parseBus(try arguments.value(for: option))
            default: throw UsageError("unknown option \(option.name)")
            }
        }
        try arguments.expectEnd()
    }

    func run(_ context: CommandContext) async throws(BatonClientError) -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        let settings = PublisherSettings.load(environment: environment)
        let findings = await BlueZChecks(bus: bluezBus).run()
            + DaemonChecks(options: context.options, sessionBus: sessionBus).run()
            + [Self.browserFinding(settings: settings, statuses: PublishersCommand.browserExtensionStatuses()),
               Self.clipboardFinding(settings: settings, support: SessionClipboardSupport.probe(environment: environment),
                                     agent: ClipboardAgentStatus.load(environment: environment))]
        context.output.result(json: OutputDocument.doctor(findings), text: DoctorFinding.text(findings))
        return DoctorFinding.exitStatus(findings)
    }

    /// The universal clipboard: whether it can work in this session (X11, or a Wayland compositor
    /// with data control), and, when on, whether the agent shares it.
    static func clipboardFinding(settings: PublisherSettings, support: SessionClipboardSupport, agent: ClipboardAgentStatus?) -> DoctorFinding {
        let enabled = settings.isEnabled(.clipboard)
        if case .cannot(let session, let reason, let fix) = support {
            let detail = "the clipboard cannot be shared in this session (\(session)): " + reason
            return enabled ? DoctorFinding("clipboard", .warning, detail, fix: fix + "; or turn it off: baton clipboard disable")
                : DoctorFinding("clipboard", .ok, detail)
        }
        guard enabled else {
            return DoctorFinding("clipboard", .ok, "the clipboard can be shared here (\(support.session)); it is off (baton clipboard enable turns it on)")
        }
        guard let agent else {
            return DoctorFinding("clipboard", .warning, "the clipboard is on, but baton-agent does not run in this session, so nothing is shared",
                                 fix: "systemctl --user enable --now baton-agent")
        }
        if let problem = agent.problem {
            return DoctorFinding("clipboard", .warning, "the clipboard is on, but baton-agent cannot share it: \(problem)",
                                 fix: "fix what it says, then baton clipboard status")
        }
        guard agent.registered else {
            return DoctorFinding("clipboard", .warning, "the clipboard is on, but batond has not accepted baton-agent's clipboard",
                                 fix: "start batond (systemctl start batond); the agent registers again by itself")
        }
        return DoctorFinding("clipboard", .ok, "shared with the ring through the \(agent.sessionClipboard)")
    }

    /// The browser publisher: off is fine; on, it needs the extension in some browser (issue 26).
    static func browserFinding(settings: PublisherSettings, statuses: [BrowserExtensionInstall.Status]) -> DoctorFinding {
        guard settings.isEnabled(.browser) else {
            return DoctorFinding("browser", .ok, "the browser publisher is off (baton publishers enable browser turns it on)")
        }
        let installed = statuses.filter { $0.state == .installed }.map(\.browser.displayName)
        guard installed.isEmpty else {
            return DoctorFinding("browser", .ok, "Baton's extension is installed system-wide for \(installed.joined(separator: " and "))")
        }
        guard !statuses.isEmpty else {
            return DoctorFinding("browser", .warning, "the browser publisher is on, but no browser Baton knows is installed here",
                                 fix: "apt-get install chromium (or firefox-esr), then sudo scripts/install or the baton package installs the extension for it")
        }
        return DoctorFinding("browser", .warning, "the browser publisher is on, but no browser here has Baton's extension installed system-wide",
                             fix: statuses.map { "\($0.browser.displayName): \($0.advice)" }.joined(separator: "; "))
    }
}
