import BatonCore
import BatonStore

/// Journalled edit-session claims sent again without waiting for the user (§6.6): at start and
/// when their owner is heard again, unchanged (same request id). A grant is imported only when its
/// snapshot is already here (the Continue that claimed pulled it first); otherwise the claim stays
/// journalled and the next Continue of that document fetches and finishes it. Meanwhile the
/// journal lets no other revision of that document in.
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
        for pending in await sessions.replays(for: owner) {
            let activities = self.activities
            do throws(EditSessionClaimError) {
                let outcome = try await transfer.claimEditSession(member: owner, documentID: pending.claim.documentID, sessions: sessions) { grant in
                    await activities.holdsReceivedDocument(digest: grant.granted.digest)
                }
                imports.append(outcome)
                log("batond: a journalled edit-session claim was replayed and settled (\(outcome))")
            } catch {
                log("batond: a journalled edit-session claim is still pending: \(error)")
            }
        }
        return imports
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
