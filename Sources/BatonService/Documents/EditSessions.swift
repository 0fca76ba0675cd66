import BatonCore
import BatonStore
import Synchronization

/// Edit sessions on this machine (§6.6), durable: the owner's book and applied grants in one
/// record (`document-sessions`), written before a grant leaves; the claimer's pending claims in a
/// journal (`document-claims`), written before a claim leaves. Both 0600, replaced atomically.
/// A write that fails (disk full) changes nothing in memory either: the previous state stands.
public actor EditSessions {
    public static let recordName = "document-sessions"
    public static let journalName = "document-claims"

    private let record: DurableRecord<EditSessionKeeper>
    private let journal: Journal<PendingClaim>
    private var keeper: EditSessionKeeper
    private var queue: ClaimQueue
    /// Told the document id whenever a document's owner changes (Activity1.EditSession's signal).
    private let ownerObserver = Mutex<(@Sendable (String) -> Void)?>(nil)

    public init(directory: StateDirectory, documentLimit: Int = EditSessionBook.defaultDocumentLimit,
                claimLimit: Int = ClaimQueue.defaultCapacity) throws(StoreError) {
        record = try DurableRecord(name: Self.recordName, schemaVersion: 1, in: directory)
        journal = try Journal(name: Self.journalName, capacity: claimLimit, in: directory)
        keeper = try record.load() ?? EditSessionKeeper(book: EditSessionBook(documentLimit: documentLimit))
        queue = ClaimQueue(capacity: claimLimit, pending: try journal.entries())
    }

    /// Sets the one observer of owner changes (nil: none); it is called on this actor, so it must not block.
    public nonisolated func observeOwners(_ observer: (@Sendable (String) -> Void)?) { ownerObserver.withLock { $0 = observer } }

    public func owner(of documentID: String) -> EditSessionOwner? { keeper.book.owner(of: documentID) }
    public func ledger(_ documentID: String) -> DocumentLedger? { keeper.book.ledger(documentID) }
    public var pendingClaims: [PendingClaim] { queue.pending }

    // MARK: Owner side

    /// The local app committed a snapshot: the next revision, or `notOwner` while another machine
    /// holds the session.
    @discardableResult
    public func commitLocal(_ documentID: String, digest: [UInt8]) throws(EditSessionFailure) -> DocumentRevision {
        var next = keeper
        let revision: DocumentRevision
        do { revision = try next.book.commitLocal(documentID, digest: digest) } catch { throw .session(error) }
        try persist(next, movingOwnerOf: documentID)
        return revision
    }

    /// Answers a ClaimEditSession from `peer`. `save` asks the app to save and returns the digest of
    /// the committed snapshot, or nil when it did not answer in time (the caller bounds the wait).
    public func answerClaim(_ request: Frame, from peer: DeviceID,
                            save: @Sendable (EditSessionClaim) async -> [UInt8]?) async -> (reply: Frame, fresh: Bool) {
        let claim: EditSessionClaim
        switch keeper.screen(request, from: peer) {
        case .answer(let frame): return (frame, false)
        case .save(let asked): claim = asked
        }
        let saved = keeper.needsSave(claim, from: peer) ? await save(claim) : nil
        // The actor may have served other calls during the save: screen again on the current state.
        if case .answer(let frame) = keeper.screen(request, from: peer) { return (frame, false) }
        var next = keeper
        let reply = next.grant(request, claim: claim, from: peer, savedDigest: saved)
        guard reply.type == .editSessionGrant else { return (reply, false) }
        do { try persist(next, movingOwnerOf: claim.documentID) } catch {
            let refusal = ErrorFrame(code: .internalError, message: "cannot record the release")
            return (Frame(type: .error, requestID: request.requestID, payload: refusal.payload), false)
        }
        return (reply, true)
    }

    // MARK: Claimer side

    /// Journals a claim of `documentID` from `peer` (or returns the pending one to send again), with
    /// the activity type and user a replay needs to fetch the granted snapshot itself.
    public func startClaim(_ documentID: String, from peer: DeviceID, requestID: UInt32,
                           activityType: String? = nil, uid: UInt32? = nil) throws(EditSessionFailure) -> PendingClaim {
        let claim: EditSessionClaim
        do { claim = try EditSessionClaim(documentID: documentID, baseRevision: keeper.book.ledger(documentID)?.current.revision ?? 0) } catch {
            throw .invalidDocumentID
        }
        var next = queue
        let start: ClaimQueue.Start
        do { start = try next.start(claim, from: peer, requestID: requestID, activityType: activityType, uid: uid) } catch {
            switch error {
            case .full(let limit): throw .tooManyClaims(limit: limit)
            case .pendingElsewhere(let earlier): throw .claimPendingElsewhere(earlier.peer)
            }
        }
        switch start {
        case .replay(let pending): return pending
        case .send(let pending):
            do { try journal.record(pending) } catch { throw .store(error) }
            queue = next
            return pending
        }
    }

    /// Claims to send again, unchanged, on a new connection to `peer`.
    public func replays(for peer: DeviceID) -> [PendingClaim] { queue.replays(for: peer) }

    /// The owner answered `pending` with `reply`. A grant is imported with the revision check (the
    /// caller has fetched its snapshot); a refusal settles the claim. A conflict keeps this copy.
    @discardableResult
    public func settle(_ pending: PendingClaim, reply: Frame) throws(EditSessionFailure) -> DocumentImport {
        guard queue.mayImport(pending.claim.documentID, answering: reply.requestID, from: pending.peer) else { throw .notPending }
        guard reply.type == .editSessionGrant else {
            try forget(pending)
            let code = (try? ErrorFrame(payload: reply.payload))?.code ?? .malformed
            throw .refused(code)
        }
        let granted: DocumentRevision
        do { granted = try EditSessionGrant(payload: reply.payload).granted } catch {
            try forget(pending)
            throw .refused(.malformed)
        }
        var next = keeper
        let outcome: DocumentImport
        do { outcome = try next.book.importGranted(pending.claim.documentID, base: pending.claim.baseRevision, granted: granted, from: pending.peer) } catch {
            try forget(pending)
            throw .session(error)
        }
        // Imported first, then out of the journal: a crash between replays the claim and finds it applied.
        try persist(next, movingOwnerOf: pending.claim.documentID)
        try forget(pending)
        return outcome
    }

    private func forget(_ pending: PendingClaim) throws(EditSessionFailure) {
        do { try journal.remove(id: pending.id) } catch { throw .store(error) }
        queue.settle(pending.claim.documentID)
    }

    /// Saves `next`; when `documentID`'s owner changed with it, the observer hears of it.
    private func persist(_ next: EditSessionKeeper, movingOwnerOf documentID: String? = nil) throws(EditSessionFailure) {
        do { try record.save(next) } catch { throw .store(error) }
        let before = documentID.map { keeper.book.owner(of: $0) }
        keeper = next
        if let documentID, before != keeper.book.owner(of: documentID), let observer = ownerObserver.withLock({ $0 }) { observer(documentID) }
    }
}

/// Why an edit-session step failed, typed for the D-Bus errors (BusErrors) and the CLI.
public enum EditSessionFailure: Error, Equatable, Sendable {
    case session(EditSessionError)
    case refused(ErrorFrame.Code)
    case invalidDocumentID
    case tooManyClaims(limit: Int)
    case claimPendingElsewhere(DeviceID)
    /// A reply that answers no journalled claim.
    case notPending
    /// The state could not be written (disk full, permissions): nothing changed.
    case store(StoreError)
}
