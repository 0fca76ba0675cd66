// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore

/// Journalled edit-session claims sent again without waiting for the user (§6.6): at start and
/// when their owner is heard again, unchanged (same request id). A grant is imported only with its
/// snapshot: one already here (the Continue that claimed pulled it first), else the replay pulls the
/// owner's current snapshot into the inbox of the user the claim was journalled for (the type hash
/// recomputed from the journalled activity type and the owner's secret) and takes it only when its
/// digest is the grant's. Entries journalled without a type (older journals) wait for the next
/// Continue of that document. Meanwhile the journal lets no other revision of that document in.
extension ContinuationService {
    /// A member's journalled claims are replayed at most this often on sightings (adverts repeat).
    static let claimReplayInterval = Duration.seconds(10)

    /// Replays every journalled claim, owner by owner (at start).
    public func replayPendingClaims() async {
        guard let sessions = await activities.editSessionsForContinue() else { return }
        var owners: [DeviceID] = []
        for pending in await sessions.pendingClaims where !owners.contains(pending.peer) { owners.append(pending.peer) }
        for owner in owners { await replayPendingClaims(towards: owner) }
    }

    /// Replays the journalled claims towards `owner`, one run at a time per owner.
    @discardableResult
    public func replayPendingClaims(towards owner: DeviceID) async -> [DocumentImport] {
        guard let sessions = await activities.editSessionsForContinue(), replayingClaims.insert(owner).inserted else { return [] }
        defer { replayingClaims.remove(owner) }
        lastClaimReplay[owner] = ContinuousClock.now
        var imports: [DocumentImport] = []
        // A claim journalled without its user waits for the next Continue of its document, which adopts it.
        for pending in await sessions.replays(for: owner) {
            guard let uid = pending.uid else { continue }
            do throws(EditSessionClaimError) {
                let answer = try await transfer.requestEditSession(member: owner, documentID: pending.claim.documentID, sessions: sessions, uid: uid)
                if let grant = answer.grant {
                    let held = await activities.holdsReceivedDocument(digest: grant.granted.digest)
                    if !held, !(await fetchGrantedSnapshot(grant, for: pending)) { throw .fetchFailed }
                }
                let outcome = try await transfer.settleEditSession(answer, sessions: sessions)
                imports.append(outcome)
                log("batond: a journalled edit-session claim was replayed and settled (\(outcome))")
            } catch {
                log("batond: a journalled edit-session claim is still pending: \(error)")
            }
        }
        return imports
    }

    /// Pulls the snapshot a replayed claim was granted (the receiver stopped before it arrived):
    /// the owner's current snapshot, resumable, accepted only when it is the granted one.
    private func fetchGrantedSnapshot(_ grant: EditSessionGrant, for pending: PendingClaim) async -> Bool {
        guard let type = pending.activityType, let uid = pending.uid,
              let member = await ring.snapshot().roster.members[pending.peer],
              let inbox = await activities.documentInbox(uid: uid) else { return false }
        let typeHash = self.typeHash(type, of: member)
        do throws(DocumentPullError) {
            let pulled = try await transfer.pullDocument(member: pending.peer, typeHash: typeHash, revision: ActivityReference.anyRevision,
                                                         inbox: inbox, progress: { _, _ in })
            return pulled.info.digest == grant.granted.digest && pulled.info.documentID == pending.claim.documentID
        } catch {
            log("batond: the snapshot granted to a journalled claim could not be fetched yet: \(error)")
            return false
        }
    }

    /// A sighting of `member`: its journalled claims go first, before anything newer is fetched.
    /// Synchronous on purpose: a suspension here would reorder the sightings' proximity updates.
    func replayClaimsOnSighting(of member: DeviceID) {
        guard !replayingClaims.contains(member),
              lastClaimReplay[member].map({ ContinuousClock.now - $0 >= Self.claimReplayInterval }) ?? true else { return }
        lastClaimReplay[member] = ContinuousClock.now
        Task {
            guard let sessions = await activities.editSessionsForContinue(), !(await sessions.replays(for: member)).isEmpty else { return }
            await self.replayPendingClaims(towards: member)
        }
    }
}
