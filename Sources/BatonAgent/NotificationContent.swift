// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCommandLine
import BatonDBus

/// One org.freedesktop.Notifications.Notify call, before it is sent.
public struct NotificationRequest: Sendable, Hashable {
    public var replacesID: UInt32
    public var summary: String
    public var body: String
    /// Alternating action keys and labels, as the Notify signature wants them.
    public var actions: [String]
    public var hints: [String: DBusValue]
    /// -1: the server's default expiry.
    public var timeout: Int32 = -1

    public static let appName = "Baton"
    public static let icon = "computer"
}

/// Action keys the agent offers. "default" is what servers invoke when the notification itself is clicked.
public enum AgentActionKey {
    public static let clicked = "default"
    public static let continueHere = "continue"
    public static let openInBrowser = "browser"
}

/// What the server can do (GetCapabilities).
public struct NotificationCapabilities: Sendable, Hashable {
    public var actions: Bool
    public var persistence: Bool

    public init(actions: Bool = true, persistence: Bool = false) {
        self.actions = actions
        self.persistence = persistence
    }

    public init(_ capabilities: [String]) {
        self.init(actions: capabilities.contains("actions"), persistence: capabilities.contains("persistence"))
    }
}

/// Builds the notification for a suggestion: pure, so every wording rule is tested.
public enum NotificationContent {
    public static func request(for suggestion: SuggestionSnapshot, capabilities: NotificationCapabilities,
                               replacing replacesID: UInt32) -> NotificationRequest {
        let what = suggestion.title ?? (suggestion.activityType.isEmpty ? "a web page" : readableType(suggestion.activityType))
        let browserOnly = suggestion.onlyBrowserCanServe
        let summary = browserOnly
            ? "Open ‘\(what)’ from \(suggestion.deviceName) in the browser"
            : "Continue ‘\(what)’ from \(suggestion.deviceName)"
        var body = "\(suggestion.deviceName) is working on this nearby."
        var actions: [String] = []
        if capabilities.actions {
            if browserOnly {
                actions = [AgentActionKey.clicked, "Open in browser", AgentActionKey.openInBrowser, "Open in browser"]
            } else {
                actions = [AgentActionKey.clicked, "Continue", AgentActionKey.continueHere, "Continue"]
            }
        } else {
            // A server without actions cannot take a click: say the command that does the same.
            body += " To continue here, run: baton continue \(suggestion.path)"
        }
        let hints: [String: DBusValue] = [
            "desktop-entry": .string("baton-agent"),
            "category": .string("device"),
            "urgency": .byte(1),
            // Stays until the suggestion goes, where the server keeps notifications after an action.
            "resident": .boolean(true),
        ]
        return NotificationRequest(replacesID: replacesID, summary: summary, body: body, actions: actions, hints: hints)
    }

    /// "org.example.Reader.reading" → "Reader reading": the last two reverse-DNS labels read best.
    public static func readableType(_ type: String) -> String {
        let labels = type.split(separator: ".")
        guard labels.count >= 2 else { return type }
        return labels.suffix(2).joined(separator: " ")
    }
}

/// The notification posted when a Continue the person started from a notification fails (issue
/// 26: before, the notification closed and only a log line said why). Pure, so each wording is tested.
public enum ContinueFailureNotice {
    /// Why the Continue failed, for a person, or nil when nothing failed (delivered) or the app
    /// itself said no (declined: the app shows its own reason).
    public static func reason(outcome: String) -> String? {
        switch outcome {
        case "delivered", "declined": nil
        case "no-handler": "No app on this machine handles this activity: install one that does, then try again."
        case "no-agent": "No baton-agent runs in this session to start the app: start baton-agent or the app itself."
        case "launch-failed": "The app that handles it could not be started: `journalctl --user -u baton-agent` says why."
        default: "batond could not continue it (\(outcome)): `baton doctor` checks what it needs."
        }
    }

    /// Why the Continue call failed, for a person: by category when batond says one, else what the
    /// bus refused, in words (never the D-Bus error text).
    public static func reason(_ error: BatonClientError) -> String {
        switch error.continuationFailure {
        case .cancelled: return "It was cancelled (dismissed here, or the app declined)."
        case .unreachable: return "The other machine could not be reached: bring it nearer or onto the same network, then try again."
        case .interrupted: return "The transfer was interrupted before it finished: try again."
        case .versionUnsupported:
            return "The app here cannot read the version the other machine's app sent: update the app on one of the machines."
        case .noLongerCurrent: return "The other machine has moved on: it is no longer doing this."
        case .timedOut: return "The other machine did not answer in time: try again."
        case nil:
            // batond's refusal says who may continue and the fix (group baton, the active session,
            // polkit not running): shown as written, without the error's name.
            if error.code == .notPermitted, !error.message.isEmpty { return "Not permitted: " + error.message }
            return DaemonReachability.sentence(for: error, options: GlobalOptions(), command: "continue")
        }
    }

    public static func request(reason: String) -> NotificationRequest {
        NotificationRequest(replacesID: 0, summary: "Could not continue here", body: reason, actions: [], hints: [
            "desktop-entry": .string("baton-agent"),
            "category": .string("device.error"),
            "urgency": .byte(1),
        ])
    }
}
