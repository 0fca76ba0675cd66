// SPDX-License-Identifier: LGPL-2.1-or-later
/// Why a continuation did not complete, in words an app can pass on to its user
/// (docs/dbus-api.md, "Continuation failures"). Suggestion1.Continue and Ring1.Continue report it
/// as the first word of the D-Bus error's message ("interrupted: …"); ActivityHandler1's
/// FailedToContinue carries it as its `error` argument. BatonAPI names it `ContinuationFailure`
/// (and adds the D-Bus error name); the daemon keeps it typed until the bus edge writes the text.
public enum ContinueFailure: String, Sendable, Hashable, CaseIterable {
    /// The user (Suggestion1.Dismiss while it ran) or the handler (WillContinue returned false) cancelled.
    case cancelled
    /// No transport reached the source: no endpoint known, none answered as that member.
    case unreachable
    /// The source was reached but the connection was lost before the activity arrived.
    case interrupted
    /// No handler here accepts the activity's version; refused before any fetch.
    case versionUnsupported
    /// The source withdrew the activity or moved on to a newer revision; the suggestion goes.
    case noLongerCurrent
    /// The source was reached but did not answer in time (e.g. its app's WillSave hung).
    case timedOut

    /// The error message: the category alone, or "category: detail".
    public func message(_ detail: String = "") -> String { detail.isEmpty ? rawValue : "\(rawValue): \(detail)" }

    /// The category an error message starts with; nil for messages of other errors.
    public init?(errorMessage: String) {
        let word = errorMessage.prefix { $0 != ":" }
        guard let category = ContinueFailure(rawValue: String(word)) else { return nil }
        self = category
    }

    /// Whether trying the same suggestion again may succeed (everything but noLongerCurrent,
    /// whose suggestion is gone, and versionUnsupported, which no retry changes).
    public var isRetryable: Bool { self != .noLongerCurrent && self != .versionUnsupported }
}
