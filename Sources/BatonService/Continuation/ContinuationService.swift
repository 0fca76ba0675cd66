// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonCrypto

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
        let snapshot = await ring.snapshot()
        guard let member = snapshot.roster.members[suggestion.member] else {
            await carry(book.withdraw(suggestion.member))
            throw .unknownDevice("the member left the ring")
        }
        if let outcome = try await deliverPrefetched(suggestion, from: member, uid: uid, caller: caller) { return outcome }
        let attempt = ContinueAttempt()
        attempts[number, default: []].append(attempt)
        defer { attempts[number]?.removeAll { $0 === attempt } }
        let result = await attempt.run { [self] () async throws(TransferError) -> Handover in
            try await fetchAndDeliver(from: member, type: suggestion.activityType, revision: suggestion.revision, uid: uid,
                                      caller: caller, attempt: attempt)
        }
        let delivered: DeliveryOutcome
        switch result {
        case .cancelled, .finished(.success(.cancelled)):
            throw .continuation(.cancelled, "the suggestion was dismissed")
        case .finished(.success(let handover)):
            delivered = try Self.outcome(of: handover)
        case .finished(.failure(.remote(let frame))) where frame.code == .unknownActivity:
            // The member published something newer (or nothing): this revision is gone for good;
            // a suggestion for the newer one comes with its advert (§9 step 3).
            await carry(book.settle(number: number))
            throw .continuation(.noLongerCurrent)
        case .finished(.failure(let error)):
            throw Self.failure(error)
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
        let snapshot = await ring.snapshot()
        guard let member = snapshot.member(matching: device), member.deviceID != snapshot.deviceID else {
            throw .unknownDevice("no single ring member matches")
        }
        do { try ActivityRecord.validateType(type) } catch { throw .invalidArguments("invalid activity type") }
        let handover: Handover
        do {
            handover = try await fetchAndDeliver(from: member, type: type, revision: ActivityReference.anyRevision, uid: uid, caller: caller)
        } catch {
            throw Self.failure(error)
        }
        return Self.outcomeName(try Self.outcome(of: handover))
    }

    static let otherType = ServiceFailure.failed("the member sent another activity type")

    static func outcome(of handover: Handover) throws(ServiceFailure) -> DeliveryOutcome {
        switch handover {
        case .handled(let outcome): outcome
        case .otherType: throw otherType
        case .versionUnsupported(let version?): throw .continuation(.versionUnsupported, "no handler here accepts version \(version)")
        case .versionUnsupported(nil): throw .continuation(.versionUnsupported, "no handler here accepts any activity version")
        case .cancelled: throw .continuation(.cancelled)
        case .documentFailed(let error): throw documentFailure(error)
        case .sessionRefused(let failure): throw failure
        case .memberLeft: throw .unknownDevice("the member left the ring")
        }
    }

    /// WillContinue first (nothing is fetched for nobody), then one TLS session: FetchActivity(h,
    /// revision) or FetchActivityOfVersions with the accepting handler's versions, the version
    /// check, the document (FetchDocument on the same channel, §6.5), delivery, ActivityContinued when delivered. Another type, an unaccepted version, a failed
    /// document or a cancel deliver and report nothing; the handler that accepted hears
    /// FailedToContinue with the category of every way it ends without the activity.
    private func fetchAndDeliver(from member: RosterMember, type: String, revision: UInt32, uid: UInt32, caller: String?,
                                 attempt: ContinueAttempt? = nil) async throws(TransferError) -> Handover {
        let activities = self.activities
        let ticket: HandlerTicket
        switch await activities.willContinue(type: type, from: member.name, uid: uid) {
        case .refused(let outcome): return .handled(outcome)
        case .accepted(let accepted): ticket = accepted
        }
        // The versions the handler that accepted declares go with the fetch, so the source refuses another
        // version before its app saves or anything is sent (§9 step 2); none at all: nothing to fetch.
        // That handler's, not the user's newest: one registered since WillContinue does not get it.
        let versions = await activities.versionDeclarations(of: ticket).map(FetchActivityOfVersions.ranges(covering:))
        if versions?.isEmpty == true {
            await activities.failedToContinue(ticket, .versionUnsupported, detail: "this handler accepts no activity version")
            return .versionUnsupported(nil)
        }
        // The type hash is keyed with the sender's secret (§3).
        let typeHash = DerivedKeys(secret: member.secret).typeHash(type)
        let inbox = await activities.documentInbox(uid: uid)
        let relay = progressRelay(to: caller)
        defer { relay.finish() }
        let report = relay.report(activityType: type)
        let result: (record: ActivityRecord, outcome: Handover)
        do throws(TransferError) {
            result = try await transfer.fetchAndReport(member: member.deviceID, typeHash: typeHash, revision: revision,
                                                       versions: versions) { record, document -> (outcome: Handover, report: Bool) in
                // Another type is refused before any handler sees it.
                guard record.activityType == type else { return (.otherType, false) }
                // A version no handler here accepts is refused: never a wrong restore. The source checked
                // already; this holds for a source from before FetchActivityOfVersions and for >16 ranges.
                guard await Self.accepts(record.version, ticket, activities) else { return (.versionUnsupported(record.version), false) }
                // The document arrives whole and checked before the handler gets anything.
                var pulled: PulledDocument?
                if let inbox {
                    do throws(DocumentPullError) { pulled = try await document.pull(into: inbox, progress: report) } catch { return (.documentFailed(error), false) }
                }
                // The document's edit session moves here before any handler sees the document.
                if let document = pulled, let inbox, let sessions = await activities.editSessionsForContinue() {
                    switch await self.claimEditSession(of: document, from: member.deviceID, activityType: type, uid: uid, typeHash: typeHash, inbox: inbox,
                                                       sessions: sessions, progress: report) {
                    case .success(let granted): pulled = granted
                    case .failure(let failure): return (.sessionRefused(failure), false)
                    }
                }
                // Removed here, or a new identity here, while it was fetched (§7.4, §7.5): the
                // ring left delivers nothing (ResetIdentityAttackTests).
                guard await document.stillInRing() else { return (.memberLeft, false) }
                // Cancelled while fetching: nothing reaches a handler, nothing is reported.
                guard attempt?.beginDelivery() ?? true else { return (.cancelled, false) }
                let outcome = await activities.deliver(activity: record, document: pulled, from: member.name, to: ticket)
                return (.handled(outcome), outcome == .delivered)
            }
        } catch {
            let (category, detail) = Self.handlerCategory(of: error)
            await activities.failedToContinue(ticket, category, detail: detail)
            throw error
        }
        switch result.outcome {
        case .handled: break
        case .otherType: await activities.failedToContinue(ticket, .noLongerCurrent, detail: "the member's current activity has another type")
        case .versionUnsupported(let version?): await activities.failedToContinue(ticket, .versionUnsupported, detail: "version \(version) is not one this handler accepts")
        case .versionUnsupported(nil): break // told before any fetch
        case .cancelled: await activities.failedToContinue(ticket, .cancelled, detail: "the suggestion was dismissed")
        case .documentFailed(let error):
            let failure = Self.documentFailure(error)
            await activities.failedToContinue(ticket, failure.continuationFailure ?? .interrupted, detail: failure.message)
        case .sessionRefused(let failure):
            await activities.failedToContinue(ticket, failure.continuationFailure ?? .noLongerCurrent, detail: failure.message)
        case .memberLeft: await activities.failedToContinue(ticket, .unreachable, detail: "the member left the ring")
        }
        return result.outcome
    }

    /// Whether the handler that accepted WillContinue (and gets the activity) declared `version`.
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
        let failure = failure(error)
        if let category = failure.continuationFailure {
            let message = failure.message
            let detail = message.hasPrefix(category.rawValue + ": ") ? String(message.dropFirst(category.rawValue.count + 2)) : ""
            return (category, detail)
        }
        return switch failure {
        case .unknownDevice: (.unreachable, failure.message)
        case .unknownActivity: (.noLongerCurrent, failure.message)
        default: (.interrupted, failure.message)
        }
    }

    static func failure(_ error: TransferError) -> ServiceFailure {
        switch error {
        case .notAMember: .unknownDevice("not a ring member")
        case .noEndpoints: .continuation(.unreachable, "no endpoint known for the member")
        case .unreachable(let why): .continuation(.unreachable, "the member cannot be reached: \(why)")
        case .interrupted(let why): .continuation(.interrupted, "the connection to the member broke: \(why)")
        case .timedOut(let why): .continuation(.timedOut, "the member did not answer in time: \(why)")
        case .remote(let frame) where frame.code == .unknownActivity: .unknownActivity("the member has no such current activity")
        // The member refused before it sent anything: its activity's version is not one asked for (§9 step 3).
        case .remote(let frame) where frame.code == .versionUnsupported:
            .continuation(.versionUnsupported, "the member's activity has a version no handler here accepts")
        case .remote(let frame) where frame.code == .notPermitted: .notPermitted("the member refused")
        // The source was reached but its activity did not arrive: what the handler hears too (retryable).
        case .remote(let frame): .continuation(.interrupted, "the member answered \(frame.code)")
        case .protocolError(let why): .continuation(.interrupted, "protocol error: \(why)")
        }
    }
}
