// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import Testing

/// Issue 13: an app reads why a Continue failed from the daemon's error, as the client library
/// receives it (docs/dbus-api.md, "Continuation failures").
@Suite struct ContinuationFailureClientTests {
    @Test func theCategoryIsReadFromTheDocumentedErrors() {
        let cases: [(BatonClientError, BatonClientError.ContinuationCategory?)] = [
            (BatonClientError(.unknownActivity, "noLongerCurrent"), .noLongerCurrent),
            (BatonClientError(.notReady, "unreachable: the member cannot be reached: connectTimedOut"), .unreachable),
            (BatonClientError(.failed, "interrupted: the connection to the member broke: closed"), .interrupted),
            (BatonClientError(.failed, "timedOut: the member did not answer in time: timedOut"), .timedOut),
            (BatonClientError(.failed, "cancelled: the suggestion was dismissed"), .cancelled),
            (BatonClientError(.failed, "versionUnsupported: no handler here accepts version 1"), .versionUnsupported),
            // Other errors carry none, even when their text starts with a category's word.
            (BatonClientError(.unknownActivity, "the member has no such current activity"), nil),
            (BatonClientError(.invalidArguments, "cancelled: not a category here"), nil),
            (BatonClientError(name: "org.freedesktop.DBus.Error.NoReply", message: "timedOut"), nil),
        ]
        for (error, expected) in cases {
            #expect(error.continuationFailure == expected, "\(error)")
        }
        #expect(BatonClientError.ContinuationCategory.allCases.filter(\.isRetryable) == [.cancelled, .unreachable, .interrupted, .timedOut])
    }
}
