// SPDX-License-Identifier: LGPL-2.1-or-later
/// Why a continuation did not complete, in words an app can pass on to its user
/// (docs/dbus-api.md, "Continuation failures"). Suggestion1.Continue and Ring1.Continue report it
/// as the first word of the D-Bus error's message ("interrupted: …"); ActivityHandler1's
/// FailedToContinue carries it as its `error` argument.
public enum ContinuationFailure: String, Sendable, Hashable, CaseIterable {
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

    /// The D-Bus error the daemon sends for it (the name is kept from before the categories, so
    /// older callers keep working; the category is the message's first word).
    public var errorName: BatonErrorName {
        switch self {
        case .noLongerCurrent: .unknownActivity
        case .unreachable: .notReady
        case .cancelled, .interrupted, .versionUnsupported, .timedOut: .failed
        }
    }

    /// The error message: the category alone, or "category: detail".
    public func message(_ detail: String = "") -> String { detail.isEmpty ? rawValue : "\(rawValue): \(detail)" }

    /// Every error name a continuation failure is sent with (from `errorName`).
    public static let errorNames = Set(allCases.map(\.errorName))

    /// The category an error message starts with; nil for messages of other errors.
    public init?(errorMessage: String) {
        let word = errorMessage.prefix { $0 != ":" }
        guard let category = ContinuationFailure(rawValue: String(word)) else { return nil }
        self = category
    }

    /// Whether trying the same suggestion again may succeed (everything but noLongerCurrent,
    /// whose suggestion is gone, and versionUnsupported, which no retry changes).
    public var isRetryable: Bool { self != .noLongerCurrent && self != .versionUnsupported }
}
