// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import Synchronization

/// Edit sessions on this machine (§6.6), durable and per local user: a document id names one
/// document of one user (records keyed by (uid, document id)), so another user's same id is
/// another document. Each user's book and applied grants are in one record (`document-sessions`),
/// written before a grant leaves; pending claims, each with its user, in a journal
/// (`document-claims`), written before a claim leaves. Both 0600, replaced atomically.
/// A write that fails (disk full) changes nothing in memory either: the previous state stands.
public actor EditSessions {
    public static let recordName = "document-sessions"
    public static let journalName = "document-claims"

    private let record: DurableRecord<EditSessionRecord>
    private let journal: Journal<JournalledClaim>
    private var state: EditSessionRecord
    /// Oldest first; entries without a user are journalled before claims were per user.
    private var pending: [PendingClaim]
    /// Per user: documents its activities carry now (their records are never evicted).
    private var inUse: [UInt32: Set<String>] = [:]
    private let documentLimit: Int
    private let claimLimit: Int
    /// Told (uid, document id) whenever a document's owner changes (Activity1.EditSession's signal).
    private let ownerObserver = Mutex<(@Sendable (UInt32, String) -> Void)?>(nil)

    /// `documentLimit` and `claimLimit` are per user. A record of the machine-wide format (before
    /// per-user sessions) names no user, so its documents are dropped, with `log` told why.
    public init(directory: StateDirectory, documentLimit: Int = EditSessionBook.defaultDocumentLimit,
                claimLimit: Int = ClaimQueue.defaultCapacity, log: @Sendable (String) -> Void = { _ in }) throws(StoreError) {
        record = try DurableRecord(name: Self.recordName, schemaVersion: EditSessionRecord.schemaVersion, in: directory)
        // Each user's queue is bounded by claimLimit: the journal itself never prunes a claim.
        journal = try Journal(name: Self.journalName, capacity: Int(Int32.max), in: directory)
        self.documentLimit = max(1, documentLimit)
        self.claimLimit = max(1, claimLimit)
        var loaded = try record.load() ?? EditSessionRecord()
        if let legacy = loaded.droppedLegacy {
            log("batond: edit sessions: \(legacy.book.ledgers.count) document record(s) of the machine-wide format dropped: "
                + "they name no local user (those documents start a new revision line at their next commit)")
            loaded = EditSessionRecord(users: loaded.users)
            try record.save(loaded)
        }
        state = loaded
        pending = try journal.entries().map(\.pending)
    }

    /// Sets the one observer of owner changes (nil: none); it is called on this actor, so it must not block.
    public nonisolated func observeOwners(_ observer: (@Sendable (UInt32, String) -> Void)?) { ownerObserver.withLock { $0 = observer } }

    public func owner(of documentID: String, uid: UInt32) -> EditSessionOwner? { state.keeper(uid: uid)?.book.owner(of: documentID) }
    public func ledger(_ documentID: String, uid: UInt32) -> DocumentLedger? { state.keeper(uid: uid)?.book.ledger(documentID) }
    /// Every user's pending claims, oldest first.
    public var pendingClaims: [PendingClaim] { pending }

    /// The documents `uid`'s activities carry now: their records are kept when room is made.
    public func setDocumentsInUse(_ documentIDs: Set<String>, uid: UInt32) { inUse[uid] = documentIDs.isEmpty ? nil : documentIDs }

    // MARK: Owner side

    /// `uid`'s app committed a snapshot: the next revision, or `notOwner` while another machine
    /// holds the session.
    @discardableResult
    public func commitLocal(_ documentID: String, digest: [UInt8], uid: UInt32) throws(EditSessionFailure) -> DocumentRevision {
        var next = sessions(of: uid)
        if next.keeper.book.ledger(documentID) == nil { makeRoom(in: &next, uid: uid) }
        let revision: DocumentRevision
        do { revision = try next.keeper.book.commitLocal(documentID, digest: digest) } catch { throw .session(error) }
        next.touch(documentID)
        try persist(next, uid: uid, movingOwnerOf: documentID)
        return revision
    }

    /// Answers a ClaimEditSession from `peer` for `uid`'s document (the user whose current activity
    /// carries it; nil: no activity here, so nobody releases; a stored grant is answered either way). `save` asks the app to save and
    /// returns the digest of the committed snapshot, or nil when it did not answer in time.
    /// `stillMember` is asked after the save: a claimer removed from the ring meanwhile gets nothing.
    public func answerClaim(_ request: Frame, from peer: DeviceID, uid: UInt32?,
                            stillMember: @Sendable () -> Bool = { true },
                            save: @Sendable (EditSessionClaim) async -> [UInt8]?) async -> (reply: Frame, fresh: Bool) {
        // A claim granted before (rule 1) gets its stored grant, whoever's activity is current now
        // (the owner may have restarted without it): its request id names it, not the activity.
        for user in state.users.values {
            if case .answer(let frame) = user.keeper.screen(request, from: peer), frame.type == .editSessionGrant { return (frame, false) }
        }
        guard let uid else {
            let busy = ErrorFrame(code: .sessionBusy, message: "no current activity here carries the document")
            return (Frame(type: .error, requestID: request.requestID, payload: busy.payload), false)
        }
        let claim: EditSessionClaim
        switch sessions(of: uid).keeper.screen(request, from: peer) {
        case .answer(let frame): return (frame, false)
        case .save(let asked): claim = asked
        }
        let saved = sessions(of: uid).keeper.needsSave(claim, from: peer) ? await save(claim) : nil
        guard stillMember() else {
            return (Frame(type: .error, requestID: request.requestID, payload: ErrorFrame(code: .notPermitted, message: "not a ring member").payload), false)
        }
        // The actor may have served other calls during the save: screen again on the current state.
        var next = sessions(of: uid)
        if case .answer(let frame) = next.keeper.screen(request, from: peer) { return (frame, false) }
        let reply = next.keeper.grant(request, claim: claim, from: peer, savedDigest: saved)
        guard reply.type == .editSessionGrant else { return (reply, false) }
        next.touch(claim.documentID)
        do { try persist(next, uid: uid, movingOwnerOf: claim.documentID) } catch {
            let refusal = ErrorFrame(code: .internalError, message: "cannot record the release")
            return (Frame(type: .error, requestID: request.requestID, payload: refusal.payload), false)
        }
        return (reply, true)
    }

    // MARK: Claimer side

    /// Journals `uid`'s claim of `documentID` from `peer` (or returns the pending one to send again),
    /// with the activity type a replay needs to fetch the granted snapshot itself. A claim journalled
    /// without a user for the same document and member becomes this user's (sent again, same id).
    public func startClaim(_ documentID: String, from peer: DeviceID, requestID: UInt32,
                           activityType: String? = nil, uid: UInt32) throws(EditSessionFailure) -> PendingClaim {
        if let unattributed = pending.first(where: { $0.uid == nil && $0.peer == peer && $0.claim.documentID == documentID }) {
            return try adopt(unattributed, uid: uid, activityType: activityType)
        }
        let claim: EditSessionClaim
        do { claim = try EditSessionClaim(documentID: documentID, baseRevision: ledger(documentID, uid: uid)?.current.revision ?? 0) } catch {
            throw .invalidDocumentID
        }
        var queue = ClaimQueue(capacity: claimLimit, pending: pending.filter { $0.uid == uid })
        let start: ClaimQueue.Start
        do { start = try queue.start(claim, from: peer, requestID: requestID, activityType: activityType, uid: uid) } catch {
            switch error {
            case .full(let limit): throw .tooManyClaims(limit: limit)
            case .pendingElsewhere(let earlier): throw .claimPendingElsewhere(earlier.peer)
            }
        }
        switch start {
        case .replay(let earlier): return earlier
        case .send(let new):
            do { try journal.record(JournalledClaim(new)) } catch { throw .store(error) }
            pending.append(new)
            return new
        }
    }

    /// Claims to send again, unchanged, on a new connection to `peer` (every user's).
    public func replays(for peer: DeviceID) -> [PendingClaim] { pending.filter { $0.peer == peer } }

    /// Claims towards machines that are not ring members any more (removed, removed by a RingSync,
    /// or every member after this machine took a new identity) can never be answered within the
    /// ring (§6.6): each is dropped from the journal (one atomic rewrite per claim) and returned, so
    /// its document's session is lost here and a later claim of it towards another member works.
    /// A journal write that fails stops there: the claims not yet dropped stay, and are tried again
    /// at the next ring change; `failure` says why.
    public func abandonClaims(keepingMembers members: Set<DeviceID>) -> (abandoned: [PendingClaim], failure: StoreError?) {
        var abandoned: [PendingClaim] = []
        for claim in pending where !members.contains(claim.peer) {
            do { _ = try journal.remove(id: JournalledClaim(claim).id) } catch {
                pending.removeAll { abandoned.contains($0) }
                return (abandoned, error)
            }
            abandoned.append(claim)
        }
        pending.removeAll { abandoned.contains($0) }
        return (abandoned, nil)
    }

    /// The owner answered `pending` with `reply`. A grant is imported into its user's records with
    /// the revision check (the caller has fetched its snapshot); a refusal settles the claim. A
    /// conflict keeps this copy. A claim without a user is settled only after a user adopted it.
    @discardableResult
    public func settle(_ pending: PendingClaim, reply: Frame) throws(EditSessionFailure) -> DocumentImport {
        guard let uid = pending.uid, self.pending.contains(where: {
            $0.uid == uid && $0.peer == pending.peer && $0.requestID == reply.requestID && $0.claim.documentID == pending.claim.documentID
        }) else { throw .notPending }
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
        let documentID = pending.claim.documentID
        var next = sessions(of: uid)
        if next.keeper.book.ledger(documentID) == nil { makeRoom(in: &next, uid: uid, keeping: documentID) }
        let outcome: DocumentImport
        do { outcome = try next.keeper.book.importGranted(documentID, base: pending.claim.baseRevision, granted: granted, from: pending.peer) } catch {
            try forget(pending)
            throw .session(error)
        }
        next.touch(documentID)
        // Imported first, then out of the journal: a crash between replays the claim and finds it applied.
        try persist(next, uid: uid, movingOwnerOf: documentID)
        try forget(pending)
        return outcome
    }

    // MARK: Private

    private func sessions(of uid: UInt32) -> UserEditSessions {
        state.users[String(uid)] ?? UserEditSessions(documentLimit: documentLimit)
    }

    /// At the user's limit, evicts the least recently used record that no activity of the user
    /// carries and no pending claim of theirs names (one, oldest first), so the limit is never held
    /// for good by documents nobody uses any more. Only a record about to be added needs the room.
    private func makeRoom(in sessions: inout UserEditSessions, uid: UInt32, keeping kept: String? = nil) {
        guard sessions.keeper.book.ledgers.count >= documentLimit else { return }
        let carried = inUse[uid] ?? []
        let claimed = Set(pending.filter { $0.uid == uid }.map(\.claim.documentID))
        let unused = sessions.keeper.book.ledgers.keys.filter { !carried.contains($0) && !claimed.contains($0) && $0 != kept }
        let ordered = sessions.lastUsed.filter(unused.contains) + unused.filter { !sessions.lastUsed.contains($0) }
        guard let oldest = ordered.first else { return }
        sessions.keeper.book.evict(oldest)
        sessions.lastUsed.removeAll { $0 == oldest }
    }

    private func adopt(_ unattributed: PendingClaim, uid: UInt32, activityType: String?) throws(EditSessionFailure) -> PendingClaim {
        var adopted = unattributed
        adopted.uid = uid
        adopted.activityType = adopted.activityType ?? activityType
        // Recorded under the new key before the old one goes: a crash between keeps the claim.
        do {
            try journal.record(JournalledClaim(adopted))
            try journal.remove(id: JournalledClaim(unattributed).id)
        } catch { throw .store(error) }
        pending = pending.map { $0 == unattributed ? adopted : $0 }
        return adopted
    }

    private func forget(_ settled: PendingClaim) throws(EditSessionFailure) {
        do { try journal.remove(id: JournalledClaim(settled).id) } catch { throw .store(error) }
        pending.removeAll { $0.uid == settled.uid && $0.claim.documentID == settled.claim.documentID }
    }

    /// Saves `next` as `uid`'s sessions; when `documentID`'s owner changed with it, the observer hears of it.
    private func persist(_ next: UserEditSessions, uid: UInt32, movingOwnerOf documentID: String) throws(EditSessionFailure) {
        var updated = state
        updated.users[String(uid)] = next
        do { try record.save(updated) } catch { throw .store(error) }
        let before = owner(of: documentID, uid: uid)
        state = updated
        if before != owner(of: documentID, uid: uid), let observer = ownerObserver.withLock({ $0 }) { observer(uid, documentID) }
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
