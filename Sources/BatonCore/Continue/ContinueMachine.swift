// SPDX-License-Identifier: LGPL-2.1-or-later
/// One Continue on the receiving side (docs/protocol.md §9 steps 2–4), as a pure state machine:
/// events in, actions out, no I/O. The continuation service performs each action and feeds what
/// came of it back as the next event; it owns the connection, the handler and the clock.
///
/// The path: ask the handler (WillContinue, before anything is fetched for nobody), fetch with the
/// versions it declares, check the record's type and version, pull its document, claim its edit
/// session, make sure the member is still in the ring, deliver, report (ActivityContinued). Every
/// way it ends without the activity after a handler accepted tells that handler the category
/// (`fail`, FailedToContinue). A held (prefetched) record skips the fetch, the document and the
/// claim (the service pulled the document before it started the machine).
///
/// Events that do not belong to the state (late, duplicate, after the end) change nothing and
/// produce no action. `Outcome` is the handler's answer (delivered, declined, …); `Failure` is how
/// the service describes a failed fetch, pull or claim to its caller.
public struct ContinueMachine<Outcome: Sendable & Equatable, Failure: Sendable & Equatable>: Sendable {
    public enum State: Sendable, Hashable {
        case idle
        /// WillContinue is being asked.
        case askingHandler
        /// Cancelled while WillContinue was asked: the caller has its answer; a handler that still
        /// accepts hears FailedToContinue(cancelled).
        case cancelledWhileAsking
        /// FetchActivity(OfVersions) is on the way.
        case fetching
        /// The record's document is being pulled (on the fetch's channel).
        case pullingDocument
        /// The document's edit session is being claimed from the source.
        case claimingSession
        /// Whether the member is still in the ring (and this machine still the identity that asked).
        case checkingRing
        /// The handler that accepted has the record.
        case delivering
        /// ActivityContinued is on the way.
        case reporting
        case finished
    }

    public enum Event: Sendable, Equatable {
        case start
        /// Nobody takes it (declined, no handler, no agent, launch or handler failure): nothing is fetched.
        case handlerRefused(Outcome)
        /// A handler accepted; its version declarations (nil: it accepts every version).
        case handlerAccepted(versions: [ActivityVersions]?)
        /// The record arrived: its type and version.
        case fetched(type: String, version: Int64)
        /// A fetch, pull or claim failed: the category and detail the handler hears, and what the caller gets.
        case fetchFailed(ContinueFailure, detail: String, Failure)
        /// The document was pulled (or there was none); `needsClaim`: its edit session moves here first.
        case documentPulled(needsClaim: Bool)
        case documentFailed(ContinueFailure, detail: String, Failure)
        case sessionClaimed
        case sessionRefused(ContinueFailure, detail: String, Failure)
        case stillInRing
        /// The member left the ring, or this machine took a new identity, while it was fetched (§7.4, §7.5).
        case memberLeft
        /// Dismissed (or the caller went): effective only before delivery began.
        case cancelled
        /// The handler's answer to the delivery; `handed`: it took the activity (then it is reported).
        case delivered(Outcome, handed: Bool)
        /// ActivityContinued went out (or failed, which is logged and changes nothing).
        case reported
    }

    /// How a Continue ended.
    public enum End: Sendable, Equatable {
        /// The handler's answer: a delivery, or a refusal before any fetch.
        case handled(Outcome)
        /// The member sent another type: nothing delivered, nothing reported.
        case otherType
        /// No handler here accepts the version (nil: the handler accepts none, nothing was fetched).
        case versionUnsupported(Int64?)
        /// Cancelled before delivery: nothing delivered, nothing reported.
        case cancelled
        /// The member left the ring while it was fetched: nothing delivered, nothing reported.
        case memberLeft
        /// A fetch, pull or claim failed.
        case failed(Failure)
    }

    public enum Action: Sendable, Equatable {
        /// WillContinue to the user's handler (or have the session agent launch one).
        case askHandler
        /// FetchActivityOfVersions with these ranges; nil: FetchActivity (the handler accepts every version).
        case fetch(versions: [ClosedRange<UInt64>]?)
        case pullDocument
        case claimSession
        case checkRing
        case deliver
        /// ActivityContinued to the source.
        case report
        /// FailedToContinue to the handler that accepted, with the category and a detail.
        case fail(ContinueFailure, detail: String)
        /// The caller's answer; the machine is finished.
        case finish(End)
    }

    // The machine is generic over the service's types and stepped on every Continue: its methods
    // are inlinable so the service's build specializes them (unspecialized, each step cost about
    // 2 µs of generic metadata and witness calls: docs/benchmarks.md, issue 25).
    public let activityType: String
    /// The record held for this Continue (prefetched): its version; nil for a cold fetch.
    public let heldVersion: Int64?
    public var state: State { current }
    /// The accepting handler's declarations (nil: every version); set once it accepted.
    public var declarations: [ActivityVersions]? { declared }
    public var accepted: Bool { hasAccepted }
    @usableFromInline var current = State.idle
    @usableFromInline var declared: [ActivityVersions]?
    @usableFromInline var hasAccepted = false
    @usableFromInline var outcome: Outcome?

    @inlinable
    public init(activityType: String, heldVersion: Int64? = nil) {
        self.activityType = activityType
        self.heldVersion = heldVersion
    }

    /// Whether the handler that accepted declared `version`.
    @inlinable
    public func accepts(_ version: Int64) -> Bool {
        guard let declarations = declared else { return true }
        return declarations.contains { $0.accepts(version) }
    }

    /// Takes one event and returns the actions to perform, in order.
    @inlinable
    public mutating func handle(_ event: Event) -> [Action] {
        switch (current, event) {
        case (.idle, .start):
            current = .askingHandler
            return [.askHandler]
        case (.askingHandler, .handlerRefused(let outcome)):
            return finish(.handled(outcome))
        case (.askingHandler, .handlerAccepted(let versions)):
            hasAccepted = true
            declared = versions
            if let heldVersion {
                guard accepts(heldVersion) else { return versionRefused(heldVersion) }
                current = .delivering
                return [.deliver]
            }
            let ranges = versions.map(FetchActivityOfVersions.ranges(covering:))
            // None at all: nothing to fetch (§9 step 2).
            if ranges?.isEmpty == true {
                return [.fail(.versionUnsupported, detail: "this handler accepts no activity version")] + finish(.versionUnsupported(nil))
            }
            current = .fetching
            return [.fetch(versions: ranges)]
        case (.fetching, .fetched(let type, let version)):
            // Another type is refused before any handler sees it.
            guard type == activityType else {
                return [.fail(.noLongerCurrent, detail: "the member's current activity has another type")] + finish(.otherType)
            }
            // A version the handler does not accept is refused: never a wrong restore (the source
            // checked already; this holds for a source from before FetchActivityOfVersions).
            guard accepts(version) else { return versionRefused(version) }
            current = .pullingDocument
            return [.pullDocument]
        case (.fetching, .fetchFailed(let category, let detail, let failure)),
             (.pullingDocument, .documentFailed(let category, let detail, let failure)),
             (.claimingSession, .sessionRefused(let category, let detail, let failure)):
            return [.fail(category, detail: detail)] + finish(.failed(failure))
        case (.pullingDocument, .documentPulled(let needsClaim)):
            current = needsClaim ? .claimingSession : .checkingRing
            return [needsClaim ? .claimSession : .checkRing]
        case (.claimingSession, .sessionClaimed):
            current = .checkingRing
            return [.checkRing]
        case (.checkingRing, .stillInRing):
            current = .delivering
            return [.deliver]
        case (.checkingRing, .memberLeft):
            return [.fail(.unreachable, detail: "the member left the ring")] + finish(.memberLeft)
        case (.askingHandler, .cancelled):
            // Nobody accepted yet: the caller hears now, the handler when it answers.
            current = .cancelledWhileAsking
            return [.finish(.cancelled)]
        case (.cancelledWhileAsking, .handlerAccepted):
            hasAccepted = true
            current = .finished
            return [.fail(.cancelled, detail: "the suggestion was dismissed")]
        case (.cancelledWhileAsking, .handlerRefused):
            current = .finished
            return []
        case (.fetching, .cancelled), (.pullingDocument, .cancelled), (.claimingSession, .cancelled), (.checkingRing, .cancelled):
            return [.fail(.cancelled, detail: "the suggestion was dismissed")] + finish(.cancelled)
        case (.delivering, .delivered(let outcome, let handed)):
            guard handed else { return finish(.handled(outcome)) }
            self.outcome = outcome
            current = .reporting
            return [.report]
        case (.reporting, .reported):
            guard let outcome else { return [] }
            return finish(.handled(outcome))
        default:
            // Late, duplicate or out of order (a cancel once delivery began, anything after the end).
            return []
        }
    }

    @inlinable
    mutating func versionRefused(_ version: Int64) -> [Action] {
        [.fail(.versionUnsupported, detail: "version \(version) is not one this handler accepts")] + finish(.versionUnsupported(version))
    }

    @inlinable
    mutating func finish(_ end: End) -> [Action] {
        current = .finished
        return [.finish(end)]
    }
}

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
