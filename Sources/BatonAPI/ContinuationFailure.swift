// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCore

/// Why a continuation did not complete (docs/dbus-api.md, "Continuation failures"): the core's one
/// category enum (`BatonCore.ContinueFailure`) under its API name.
public typealias ContinuationFailure = ContinueFailure

extension ContinueFailure {
    /// The D-Bus error the daemon sends for it (the name is kept from before the categories, so
    /// older callers keep working; the category is the message's first word).
    public var errorName: BatonErrorName {
        switch self {
        case .noLongerCurrent: .unknownActivity
        case .unreachable: .notReady
        case .cancelled, .interrupted, .versionUnsupported, .timedOut: .failed
        }
    }

    /// Every error name a continuation failure is sent with (from `errorName`).
    public static let errorNames = Set(allCases.map(\.errorName))
}
