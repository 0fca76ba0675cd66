// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonCrypto
import BatonStore

/// Suggestions and Continue: a heard advert of a member becomes a suggestion when some local user
/// can continue its type; Continue fetches the activity over the transfer, delivers it to the
/// user's handler and reports ActivityContinued on the same TLS channel.
/// Depends on the ring (snapshot, advert keys), the transfer and the activities; none of them on it.
public actor ContinuationService {
    let ring: RingService
    let transfer: TransferService
    let activities: any ContinuationActivities
    let board: (any SuggestionBoard)?
    let log: @Sendable (String) -> Void
    let configuration: Configuration
    var book = SuggestionBook()
    /// Which members are near enough for their suggestion to be shown (RSSI and silence).
    var presence: PresenceTracker
    /// Withdraws suggestions of members that fell silent; runs only while some member is tracked.
    var sweeper: Task<Void, Never>?
    let origin = ContinuousClock.now
    /// What the board shows for each offered suggestion, by number.
    var shown: [Int: ShownSuggestion] = [:]
    /// Continues of a suggestion still running, by suggestion number (Dismiss cancels them).
    var attempts: [Int: [ContinueAttempt]] = [:]
    /// Activities fetched ahead, by suggestion number, in memory only (dropped with the suggestion).
    var prefetched: [Int: Prefetched] = [:]
    var prefetching: [Int: Task<Void, Never>] = [:]
    /// Owners whose journalled edit-session claims are being replayed, and when that last began.
    var replayingClaims: Set<DeviceID> = []
    var lastClaimReplay: [DeviceID: ContinuousClock.Instant] = [:]
    /// Members' names as last seen in the ring, for the words of a claim lost when one leaves.
    var knownMemberNames: [DeviceID: String] = [:]
    /// Members' advert keys by the secret they were derived from (Suggestions.swift: `advertKeys(of:)`).
    var derivedAdvertKeys: [DeviceID: (secret: AdvertisingSecret, keys: DerivedKeys)] = [:]
    /// Type hashes of members' secrets (`typeHash(_:of:)`), by member.
    var typeHashes: [DeviceID: (secret: AdvertisingSecret, hashes: [String: TypeHash])] = [:]
    static let typeHashLimit = 64

    static let observerKey = "continuation"

    public struct Configuration: Sendable {
        /// Near/far thresholds (batond --near-rssi sets `enterNear`).
        public var proximity: PresenceTracker.Thresholds
        /// How often silent members are looked for while any is tracked.
        public var sweepInterval: Duration
        /// A suggestion shown this long is fetched ahead (nil, the default: no prefetch; batond
        /// --prefetch-after). Off by default because a held payload is delivered even when the
        /// source moved on after it was fetched and its new advert is not heard yet.
        public var prefetchAfter: Duration?
        /// A prefetched activity older than this at accept is fetched afresh.
        public var prefetchMaxAge: Duration

        public init(proximity: PresenceTracker.Thresholds = .init(), sweepInterval: Duration = .seconds(1),
                    prefetchAfter: Duration? = nil, prefetchMaxAge: Duration = .seconds(10)) {
            self.proximity = proximity
            self.sweepInterval = sweepInterval
            self.prefetchAfter = prefetchAfter
            self.prefetchMaxAge = prefetchMaxAge
        }
    }

    public init(ring: RingService, transfer: TransferService, activities: any ContinuationActivities, board: (any SuggestionBoard)?,
                configuration: Configuration = .init(), log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.presence = PresenceTracker(configuration.proximity)
        self.ring = ring
        self.transfer = transfer
        self.activities = activities
        self.board = board
        self.log = log
    }

    /// Starts following sightings and ring changes.
    public func start() async {
        await ring.radio.onSighting(Self.observerKey) { [weak self] sighting, rssi, _ in await self?.suggest(for: sighting, rssi: rssi) }
        await ring.observe(Self.observerKey) { [weak self] change in await self?.ringChanged(change.snapshot) }
        Task { await self.replayPendingClaims() }
    }

    public func stop() async {
        await ring.radio.onSighting(Self.observerKey, nil)
        await ring.stopObserving(Self.observerKey)
        sweeper?.cancel()
        sweeper = nil
        await carry(book.withdrawAll())
    }

    // MARK: Suggestions

    /// The suggestions on offer, by path.
    public func suggestions() -> [ShownSuggestion] { shown.values.sorted { $0.suggestion.number < $1.suggestion.number } }

    /// Suggestion1.Continue: continues exactly the suggested revision for `uid` (a ring user: the bus glue
    /// checked the privilege): FetchActivity(h, r), never "whatever is current" (§9 step 2). When the member has
    /// moved on the suggestion goes and the call fails with UnknownActivity "noLongerCurrent"; any
    /// other failure leaves the suggestion for a retry. Dismiss while it runs cancels it (nothing
    /// is delivered afterwards).
    /// `caller` (a bus name) gets Manager1.DocumentProgress while the activity's document arrives.
    public func take(_ path: String, uid: UInt32, caller: String? = nil) async throws(ServiceFailure) -> String {
        guard let number = ShownSuggestion.number(inPath: path), let suggestion = book.suggestion(number: number) else {
            throw .unknownObject("the suggestion is gone")
        }
        guard !suggestion.opensInBrowser else { throw .invalidArguments("no local handler: take it with ContinueInBrowser") }
        let snapshot = ring.view.current
        guard let member = snapshot.roster.members[suggestion.member] else {
            await carry(book.withdraw(suggestion.member))
            throw .unknownDevice("the member left the ring")
        }
        if let outcome = try await deliverPrefetched(suggestion, from: member, uid: uid, caller: caller) { return Self.outcomeName(outcome) }
        let attempt = ContinueAttempt()
        attempts[number, default: []].append(attempt)
        defer { attempts[number]?.removeAll { $0 === attempt } }
        let result = await attempt.run { [self] in
            await runContinue(from: member, type: suggestion.activityType, source: .fetch(revision: suggestion.revision), uid: uid,
                              caller: caller, attempt: attempt)
        }
        let delivered: DeliveryOutcome
        switch result {
        case .cancelled, .finished(.cancelled):
            throw .continuation(.cancelled, "the suggestion was dismissed")
        case .finished(.failed(.transfer(.remote(let frame)))) where frame.code == .unknownActivity:
            // The member published something newer (or nothing): this revision is gone for good;
            // a suggestion for the newer one comes with its advert (§9 step 3).
            await carry(book.settle(number: number))
            throw .continuation(.noLongerCurrent)
        case .finished(let end):
            delivered = try Self.outcome(of: end)
        }
        if delivered == .delivered { await carry(book.settle(number: number)) }
        return Self.outcomeName(delivered)
    }

    /// The message of Suggestion1.Continue's UnknownActivity when the member moved on (§9, dbus-api.md).
    public static let noLongerCurrent = ContinuationFailure.noLongerCurrent.rawValue

    /// Suggestion1.Dismiss: the suggestion goes, and a Continue of it still fetching is cancelled.
    public func dismiss(_ path: String) async {
        guard let number = ShownSuggestion.number(inPath: path) else { return }
        for attempt in attempts.removeValue(forKey: number) ?? [] { attempt.cancel() }
        await carry(book.settle(number: number))
    }

    // MARK: Continue

    /// Ring1.Continue (by hand, no advert heard): fetches `device`'s current activity of `type`
    /// (revision 0xFFFFFFFF, §9 step 2), delivers it to `uid`'s handler and, when it was delivered,
    /// tells the source on the same channel (ActivityContinued → WasContinued).
    /// Returns the delivery outcome's name.
    public func continueActivity(from device: String, type: String, uid: UInt32, caller: String? = nil) async throws(ServiceFailure) -> String {
        let snapshot = ring.view.current
        guard let member = snapshot.member(matching: device), member.deviceID != snapshot.deviceID else {
            throw .unknownDevice("no single ring member matches")
        }
        do { try ActivityRecord.validateType(type) } catch { throw .invalidArguments("invalid activity type") }
        let end = await runContinue(from: member, type: type, source: .fetch(revision: ActivityReference.anyRevision), uid: uid, caller: caller)
        return Self.outcomeName(try Self.outcome(of: end))
    }

    static let otherType = ServiceFailure.failed("the member sent another activity type")

    /// The caller's answer: the handler's outcome, or the failure in the caller's words (the bus
    /// edge writes it; nothing reads it back).
    static func outcome(of end: ContinueEnd) throws(ServiceFailure) -> DeliveryOutcome {
        switch end {
        case .handled(let outcome): outcome
        case .otherType: throw otherType
        case .versionUnsupported(let version?): throw .continuation(.versionUnsupported, "no handler here accepts version \(version)")
        case .versionUnsupported(nil): throw .continuation(.versionUnsupported, "no handler here accepts any activity version")
        case .cancelled: throw .continuation(.cancelled)
        case .memberLeft: throw .unknownDevice("the member left the ring")
        case .failed(.transfer(let error)): throw failure(error)
        case .failed(.document(let error)): throw documentFailure(error)
        case .failed(.session(let error)): throw claimFailure(error)
        }
    }

    /// Whether the handler that accepted WillContinue (and gets the activity) declared `version`:
    /// the rule `ContinueMachine.accepts` applies to the declarations asked once after the accept.
    static func accepts(_ version: Int64, _ ticket: HandlerTicket, _ activities: any ContinuationActivities) async -> Bool {
        guard let declared = await activities.versionDeclarations(of: ticket) else { return true }
        return declared.contains { $0.accepts(version) }
    }

    static func outcomeName(_ outcome: DeliveryOutcome) -> String {
        switch outcome {
        case .delivered: "delivered"
        case .declined: "declined"
        case .noHandler: "no-handler"
        case .noAgent: "no-agent"
        case .launchFailed: "launch-failed"
        case .failed: "failed"
        }
    }

    /// The category the accepting handler hears for a failed fetch, and the detail after it.
    static func handlerCategory(of error: TransferError) -> (ContinuationFailure, String) {
        switch error {
        case .notAMember: (.unreachable, "not a ring member")
        case .noEndpoints: (.unreachable, "no endpoint known for the member")
        case .unreachable(let why): (.unreachable, "the member cannot be reached: \(why)")
        case .interrupted(let why): (.interrupted, "the connection to the member broke: \(why)")
        case .timedOut(let why): (.timedOut, "the member did not answer in time: \(why)")
        case .remote(let frame) where frame.code == .unknownActivity: (.noLongerCurrent, "the member has no such current activity")
        // The member refused before it sent anything: its activity's version is not one asked for (§9 step 3).
        case .remote(let frame) where frame.code == .versionUnsupported: (.versionUnsupported, "the member's activity has a version no handler here accepts")
        case .remote(let frame) where frame.code == .notPermitted: (.interrupted, "the member refused")
        // The source was reached but its activity did not arrive: what the handler hears too (retryable).
        case .remote(let frame): (.interrupted, "the member answered \(frame.code)")
        case .protocolError(let why): (.interrupted, "protocol error: \(why)")
        }
    }

    /// A failed request to the member in the caller's words: a continuation category where there
    /// is one, another error where the member is no member or has no such activity or refused.
    static func failure(_ error: TransferError) -> ServiceFailure {
        let (category, detail) = handlerCategory(of: error)
        return switch error {
        case .notAMember: .unknownDevice(detail)
        case .remote(let frame) where frame.code == .unknownActivity: .unknownActivity(detail)
        case .remote(let frame) where frame.code == .notPermitted: .notPermitted(detail)
        default: .continuation(category, detail)
        }
    }
}

// MARK: - The continuation's port to the handlers, and what crosses it

/// What the continuation needs from the activities: which types some local user can continue,
/// and delivery to a user's handler. `Handlers` conforms; no requirement has a default, so
/// a conformer that misspells one does not compile (fakes: Tests/Support/BatonServiceFakes).
public protocol ContinuationActivities: Sendable {
    func allHandledTypes() async -> Set<String>
    /// Whether some handler of `uid` for `type` (registered, or an installed app) accepts this
    /// activity version; checked before any handler is asked (versionUnsupported otherwise).
    func acceptsVersion(_ version: Int64, type: String, uid: UInt32) async -> Bool
    /// The version declarations of the handlers that decide for `type`: `uid`'s, or for nil (a
    /// prefetch, before anyone accepted) every local user's. nil: one of them accepts every version.
    /// The fetch names them (FetchActivityOfVersions), so the source refuses a mismatch before it sends.
    func versionDeclarations(type: String, uid: UInt32?) async -> [ActivityVersions]?
    /// The declaration of the handler that accepted WillContinue, as registered now: it gets the
    /// activity, so it decides, whatever registered since (nil: every version).
    func versionDeclarations(of ticket: HandlerTicket) async -> [ActivityVersions]?
    /// Finds (or has the session agent launch) `uid`'s handler and asks WillContinue, before the fetch.
    func willContinue(type: String, from device: String, uid: UInt32) async -> HandlerAnswer
    /// Tells the handler that accepted that the continuation ended without an activity.
    func failedToContinue(_ ticket: HandlerTicket, _ failure: ContinuationFailure, detail: String) async
    /// Delivery to the handler that accepted, with the activity's document (pulled and checked)
    /// beside the userInfo.
    func deliver(activity: ActivityRecord, document: PulledDocument?, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome
    /// Where `uid`'s incoming documents are kept; nil: documents are not pulled (delivered without).
    func documentInbox(uid: UInt32) async -> DocumentInbox?
    /// This machine's edit sessions (§6.6): a continued document's session is claimed before the
    /// handler gets it. nil: no sessions (the document is delivered without a claim).
    func editSessionsForContinue() async -> EditSessions?
    /// Whether a document with this digest was received whole here (any user's inbox): a replayed
    /// claim's grant is imported only then.
    func holdsReceivedDocument(digest: [UInt8]) async -> Bool
    /// Journalled claims abandoned because their owner left the ring (§6.6): their users are told
    /// (an `edit-session-lost` error record and a sentence in the log).
    func editSessionsLost(_ lost: [LostEditSession]) async
}

/// A journalled edit-session claim abandoned because the member it was sent to left the ring.
public struct LostEditSession: Sendable, Hashable {
    /// The user the claim was journalled for (nil: journalled before claims were per user).
    public var uid: UInt32?
    public var documentID: String
    public var member: DeviceID
    /// The member's name as this machine last knew it (its short id when it never did).
    public var memberName: String

    public init(uid: UInt32?, documentID: String, member: DeviceID, memberName: String) {
        self.uid = uid
        self.documentID = documentID
        self.member = member
        self.memberName = memberName
    }

    /// Words for the person whose session it was; the names (the app's and the member's own
    /// words) are quoted, cut and stripped of control characters.
    public func sentence(documentName: String) -> String {
        "The edit session of \(echoed(documentName, limit: 64)) was being taken over from \(echoed(memberName, limit: 40)) "
            + "(\(member.shortForm)), "
            + "which left the ring; it is lost. Open the document on this machine to edit it here."
    }
}

/// A handler that answered WillContinue with yes before the fetch: it gets the activity
/// (`deliver(activity:document:from:to:)`) or FailedToContinue with the category (`failedToContinue`).
public struct HandlerTicket: Sendable, Hashable {
    public let uid: UInt32
    public let type: String
    /// The registered handler object; nil for activities without handler objects (fakes).
    package let handler: HandlerKey?

    public init(uid: UInt32, type: String) {
        self.init(uid: uid, type: type, handler: nil)
    }

    package init(uid: UInt32, type: String, handler: HandlerKey?) {
        self.uid = uid
        self.type = type
        self.handler = handler
    }
}

/// The handler's answer before any fetch.
public enum HandlerAnswer: Sendable, Hashable {
    case accepted(HandlerTicket)
    /// Nobody takes it: declined, no handler, no agent to launch one, launch or handler failure.
    case refused(DeliveryOutcome)
}
