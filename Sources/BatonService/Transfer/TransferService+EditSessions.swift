// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport

/// ClaimEditSession (§6.6), both sides: the owner saves and releases; the claimer journals its
/// claim, replays it unchanged until it is answered, fetches the granted snapshot and imports it.
extension TransferService {
    /// The owner's side. The save is the current activity's WillSave, bounded by the save timeout;
    /// the claimer's own wait is its request timeout, and it never takes the session without a grant.
    func claimRequested(_ request: Frame, from peer: DeviceID) async -> Frame {
        guard let sessions = await activities.editSessionsForTransfer() else {
            return Frame(type: .error, requestID: request.requestID, payload: ErrorFrame(code: .unknownActivity, message: "no documents here").payload)
        }
        let publication = await radio.currentPublication()
        // The claim names only a document id: it is the document of the user whose current activity
        // (the one advertised) carries it (§6.6); without one, nobody here releases anything.
        let (reply, fresh) = await sessions.answerClaim(request, from: peer, uid: publication?.uid) { [activities] claim in
            guard let publication else { return nil }
            return await activities.savedDocument(documentID: claim.documentID, uid: publication.uid)
        }
        if fresh { log("batond: edit session released to \(snapshot.memberName(peer))") }
        return reply
    }

    /// The claimer's side: claims `documentID` from `member` (a journalled claim for it is sent again
    /// instead, with its request id), lets `fetch` pull the granted snapshot, then imports it. A
    /// broken connection or a failed fetch leaves the claim journalled for the next call.
    /// The claim is `uid`'s (each user has their own documents); it is journalled with
    /// `activityType`, so that a replay can fetch the granted snapshot without the user
    /// (ContinuationService.replayPendingClaims).
    public func claimEditSession(member: DeviceID, documentID: String, sessions: EditSessions,
                                 activityType: String? = nil, uid: UInt32,
                                 fetch: @Sendable (EditSessionGrant) async -> Bool) async throws(EditSessionClaimError) -> DocumentImport {
        let pending: PendingClaim
        do {
            pending = try await sessions.startClaim(documentID, from: member, requestID: requestIDs.make(), activityType: activityType, uid: uid)
        } catch { throw .session(error) }
        let reply: Frame
        do throws(TransferError) {
            let conversation = try await open(pending.frame, member: member, forceSync: false)
            conversation.channel.close()
            guard let answer = conversation.reply else { throw .protocolError("no reply") }
            reply = answer
        } catch .remote(let refusal) {
            reply = Frame(type: .error, requestID: pending.requestID, payload: refusal.payload)
        } catch {
            throw .transfer(error)
        }
        if reply.type == .editSessionGrant, let grant = try? EditSessionGrant(payload: reply.payload) {
            guard await fetch(grant) else { throw .fetchFailed }
        }
        do { return try await sessions.settle(pending, reply: reply) } catch { throw .session(error) }
    }
}

/// Why a claim did not give this machine the session.
public enum EditSessionClaimError: Error, Equatable, Sendable {
    /// Refused or not recorded (the owner's error, a conflict, the journal full or not writable).
    case session(EditSessionFailure)
    /// The owner was not reached or the connection broke: the claim stays journalled.
    case transfer(TransferError)
    /// The granted snapshot could not be fetched: the claim stays journalled.
    case fetchFailed
}
