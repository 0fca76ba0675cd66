// SPDX-License-Identifier: GPL-2.0-or-later
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
