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
        let (ring, identity) = (ring, snapshot.deviceID)
        let (reply, fresh) = await sessions.answerClaim(request, from: peer, uid: publication?.uid,
                                                        stillMember: { ring.view.isMember(peer, asIdentity: identity) }) { [activities] claim in
            guard let publication else { return nil }
            return await activities.savedDocument(documentID: claim.documentID, uid: publication.uid)
        }
        if fresh { log("batond: edit session released to \(snapshot.memberName(peer))") }
        return reply
    }

    /// The claimer's side, first step: claims `documentID` from `member` (a journalled claim for it
    /// is sent again instead, with its request id) and returns the answer. The caller checks that it
    /// holds the granted snapshot (fetching it if need be), then settles the answer with
    /// `settleEditSession`; a broken connection, or an answer never settled, leaves the claim
    /// journalled for the next call. The claim is `uid`'s (each user has their own documents); it
    /// is journalled with `activityType`, so that a replay can fetch the granted snapshot without
    /// the user (ContinuationService.replayPendingClaims).
    public func requestEditSession(member: DeviceID, documentID: String, sessions: EditSessions,
                                   activityType: String? = nil, uid: UInt32) async throws(EditSessionClaimError) -> EditSessionAnswer {
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
        let grant = reply.type == .editSessionGrant ? try? EditSessionGrant(payload: reply.payload) : nil
        return EditSessionAnswer(pending: pending, reply: reply, grant: grant)
    }

    /// The claimer's side, second step: imports the granted snapshot (or records the refusal).
    public func settleEditSession(_ answer: EditSessionAnswer, sessions: EditSessions) async throws(EditSessionClaimError) -> DocumentImport {
        do { return try await sessions.settle(answer.pending, reply: answer.reply) } catch { throw .session(error) }
    }

    /// Both steps, with `fetch` saying whether the granted snapshot is here (tests and tools).
    public func claimEditSession(member: DeviceID, documentID: String, sessions: EditSessions,
                                 activityType: String? = nil, uid: UInt32,
                                 fetch: @Sendable (EditSessionGrant) async -> Bool) async throws(EditSessionClaimError) -> DocumentImport {
        let answer = try await requestEditSession(member: member, documentID: documentID, sessions: sessions, activityType: activityType, uid: uid)
        if let grant = answer.grant {
            guard await fetch(grant) else { throw .fetchFailed }
        }
        return try await settleEditSession(answer, sessions: sessions)
    }
}

/// A claim's answer before it is settled: the grant, if the owner granted (nil: refused).
public struct EditSessionAnswer: Sendable {
    let pending: PendingClaim
    let reply: Frame
    public let grant: EditSessionGrant?
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
