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
    var book = SuggestionList()

    static let observerKey = "continuation"

    public init(ring: RingService, transfer: TransferService, activities: any ContinuationActivities, board: (any SuggestionBoard)?,
                log: @escaping @Sendable (String) -> Void) {
        self.ring = ring
        self.transfer = transfer
        self.activities = activities
        self.board = board
        self.log = log
    }

    /// Starts following sightings and ring changes.
    public func start() async {
        await ring.radio.onSighting(Self.observerKey) { [weak self] sighting, _, near in await self?.suggest(for: sighting, near: near) }
        await ring.observe(Self.observerKey) { [weak self] change in await self?.ringChanged(change.snapshot) }
    }

    public func stop() async {
        await ring.radio.onSighting(Self.observerKey, nil)
        await ring.stopObserving(Self.observerKey)
        for member in Array(book.byMember.keys) { await withdraw(member) }
    }

    // MARK: Suggestions

    /// The suggestions on offer, by path.
    public func suggestions() -> [Suggestion] { book.byMember.values.sorted { $0.path < $1.path } }

    /// Keeps the member's suggestion in step with its newest accepted advert.
    func suggest(for sighting: Sighting, near: Bool) async {
        let member = sighting.member
        let body = sighting.body
        guard body.isActivity else {
            await withdraw(member)
            return
        }
        guard book.wantsOffer(member, revision: body.revision), let keys = await ring.radio.advertKeys(of: member) else { return }
        // The type hash is keyed with the member's secret: hash what we handle and compare (§4.3 step 7).
        let handled = await activities.allHandledTypes()
        guard let type = handled.sorted().first(where: { keys.typeHash($0) == body.typeHash }) else {
            await withdraw(member)
            return
        }
        // Checked again: another sighting may have offered this revision while we asked.
        guard book.wantsOffer(member, revision: body.revision) else { return }
        await withdraw(member)
        let name = await ring.memberName(member)
        let suggestion = Suggestion(path: book.nextPath(), member: member, memberName: name, activityType: type,
                                    revision: body.revision, hasWebpageURL: body.flags.contains(.hasWebpageURL), near: near)
        book.byMember[member] = suggestion
        do {
            try await board?.offer(suggestion)
            log("batond: suggestion \(suggestion.path): continue \(type) from \(name)")
        } catch {
            book.byMember[member] = nil
            log("batond: cannot offer a suggestion: \(error)")
        }
    }

    private func withdraw(_ member: DeviceID) async {
        guard let old = book.byMember.removeValue(forKey: member) else { return }
        await board?.withdraw(old)
    }

    private func ringChanged(_ snapshot: RingSnapshot) async {
        for member in Array(book.byMember.keys) where !snapshot.isMember(member) { await withdraw(member) }
    }

    /// Suggestion1.Continue: continues the suggested activity for `uid` (any local user may take it).
    public func take(_ path: String, uid: UInt32) async throws(ServiceFailure) -> String {
        guard let suggestion = book.suggestion(at: path) else { throw .unknownObject("the suggestion is gone") }
        let outcome = try await continueActivity(from: suggestion.member.description, type: suggestion.activityType, uid: uid)
        if outcome == "delivered" {
            book.settle(suggestion)
            await withdraw(suggestion.member)
        }
        return outcome
    }

    public func dismiss(_ path: String) async {
        guard let suggestion = book.suggestion(at: path) else { return }
        book.settle(suggestion)
        await withdraw(suggestion.member)
    }

    // MARK: Continue

    /// Fetches `device`'s current activity of `type`, delivers it to `uid`'s handler and, when it was
    /// delivered, tells the source on the same channel (ActivityContinued → WasContinued).
    /// Returns the delivery outcome's name.
    public func continueActivity(from device: String, type: String, uid: UInt32) async throws(ServiceFailure) -> String {
        let snapshot = await ring.snapshot()
        guard let member = snapshot.member(matching: device), member.deviceID != snapshot.deviceID else {
            throw .unknownDevice("no single ring member matches")
        }
        do { try ActivityRecord.validateType(type) } catch { throw .invalidArguments("invalid activity type") }
        // The type hash is keyed with the sender's secret (§3).
        let typeHash = DerivedKeys(secret: member.secret).typeHash(type)
        let activities = self.activities
        let result: (record: ActivityRecord, outcome: DeliveryOutcome?)
        do {
            result = try await transfer.fetchAndReport(member: member.deviceID, typeHash: typeHash, revision: ActivityReference.anyRevision) { record in
                // Another type is refused before any handler sees it (nil: not delivered, not reported).
                guard record.activityType == type else { return (nil, false) }
                let outcome = await activities.deliver(activity: record, from: member.name, to: uid)
                return (outcome, outcome == .delivered)
            }
        } catch {
            throw Self.failure(error)
        }
        guard let outcome = result.outcome else { throw .failed("the member sent another activity type") }
        return Self.outcomeName(outcome)
    }

    static func outcomeName(_ outcome: DeliveryOutcome) -> String {
        switch outcome {
        case .delivered: "delivered"
        case .declined: "declined"
        case .noHandler: "no-handler"
        case .launchFailed: "launch-failed"
        case .failed: "failed"
        }
    }

    static func failure(_ error: TransferError) -> ServiceFailure {
        switch error {
        case .notAMember: .unknownDevice("not a ring member")
        case .noEndpoints: .notReady("no endpoint known for the member")
        case .unreachable(let why): .notReady("the member cannot be reached: \(why)")
        case .remote(let frame) where frame.code == .unknownActivity: .unknownActivity("the member has no such current activity")
        case .remote(let frame) where frame.code == .notPermitted: .notPermitted("the member refused")
        case .remote(let frame): .failed("the member answered \(frame.code)")
        case .protocolError(let why): .failed("protocol error: \(why)")
        }
    }
}
