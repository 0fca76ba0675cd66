// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore

/// The calls to handlers and session agents (ActivityHandler1 and Agent1 on D-Bus,
/// Bus/ActivityApps): typed here, coded at the bus edge. No requirement has a default.
package protocol HandlerCalls: Sendable {
    /// Agent1.Launch: the session agent starts the app handling `type`; what it started, or why not.
    func launch(type: String, agent: HandlerKey) async -> Result<String?, ApplicationCallError>
    /// ActivityHandler1.WillContinue: the handler's yes or no.
    func willContinue(type: String, from device: String, handler: HandlerKey) async -> Result<Bool, ApplicationCallError>
    /// ActivityHandler1.Continue with the record (and the document's read-only descriptor).
    func continueActivity(_ record: ActivityRecord, document: PulledDocument?, from device: String, handler: HandlerKey) async -> ContinueCallOutcome
    /// ActivityHandler1.FailedToContinue(type, category, message); errors are ignored.
    func failedToContinue(type: String, _ failure: ContinuationFailure, message: String, handler: HandlerKey) async
}

/// Why a call to an application failed.
public enum ApplicationCallError: Error, Sendable, Hashable {
    /// The application did not answer in time.
    case timedOut
    /// Its connection is gone.
    case gone
    /// It answered with an error or a malformed reply; the detail is for the log.
    case failed(String)
}

/// How ActivityHandler1.Continue went.
public enum ContinueCallOutcome: Sendable, Hashable {
    case delivered
    /// The received document could not be opened for the handler: nothing was sent.
    case documentUnopenable
    case failed(ApplicationCallError)
}

/// What `deliver(activity:from:to:)` achieved.
public enum DeliveryOutcome: Sendable, Hashable {
    case delivered
    /// The handler's WillContinue returned false.
    case declined
    /// No running handler and no installed application for the type.
    case noHandler
    /// An installed application handles the type but no session agent of the user runs to start it.
    case noAgent
    /// An installed application was started but registered no handler in time, or could not start.
    case launchFailed
    /// The handler failed (error, timeout or disconnect); FailedToContinue was sent when possible.
    case failed
}
