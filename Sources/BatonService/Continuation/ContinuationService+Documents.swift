// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore
import Synchronization

/// The document side of Continue: progress for the caller, and what a failed pull means to it.
extension ContinuationService {
    /// A document that could not be pulled, in the categories of "Continuation failures"
    /// (docs/dbus-api.md): a break is `interrupted` and retryable (the bytes received are kept).
    static func documentFailure(_ error: DocumentPullError) -> ServiceFailure {
        switch error {
        case .interrupted(let why): .continuation(.interrupted, "the document transfer broke (a retry resumes it): \(why)")
        case .refused(let frame): Self.failure(.remote(frame))
        case .protocolError(let why): .continuation(.interrupted, "protocol error in the document transfer: \(why)")
        case .digestMismatch: .failed("the document did not match its digest")
        case .cancelled: .continuation(.cancelled, "the document transfer was stopped (a retry resumes it)")
        case .store(.pullInProgress): .continuation(.interrupted, "another transfer of this document here did not finish; a retry resumes it")
        case .store(.diskFull): .failed("no space left for the document")
        case .store(.payloadTooLarge(let limit, let actual)): .failed("the document is \(actual) bytes, more than the \(limit) accepted here")
        case .store(let error): .failed("the document cannot be stored: \(error)")
        }
    }

    /// The category the accepting handler hears when the document could not be pulled.
    static func handlerCategory(of error: DocumentPullError) -> ContinuationFailure {
        switch error {
        case .cancelled: .cancelled
        case .refused(let frame) where frame.code == .versionUnsupported: .versionUnsupported
        default: .interrupted
        }
    }

    /// The category the accepting handler hears when the document's edit session did not move here.
    static func handlerCategory(of error: EditSessionClaimError) -> ContinuationFailure {
        switch error {
        case .session(.refused(.sessionBusy)), .transfer(.timedOut): .timedOut
        case .session(.claimPendingElsewhere), .fetchFailed: .interrupted
        case .transfer(.notAMember): .noLongerCurrent
        case .transfer(.remote(let frame)) where frame.code == .unknownActivity || frame.code == .notPermitted: .noLongerCurrent
        case .transfer(let transfer): handlerCategory(of: transfer).0
        case .session: .noLongerCurrent
        }
    }

    /// Claims the edit session of a pulled document from its source (§6.6, §9 step 4), before any
    /// handler sees it: journalled, answered by a grant after the source's app saved, imported once
    /// with the revision check. The document delivered is the granted snapshot: the one pulled, or
    /// the newer one the source saved on release (pulled again, resumable). Never a takeover: a
    /// source that does not release in time keeps the session and nothing is delivered.
    /// The claim is journalled with `activityType` and `uid`, so a restart can finish it alone.
    func claimEditSession(of document: PulledDocument, from member: DeviceID, activityType: String, uid: UInt32, typeHash: TypeHash,
                          inbox: DocumentInbox, sessions: EditSessions,
                          progress: @escaping @Sendable (UInt64, UInt64) -> Void) async -> Result<PulledDocument, EditSessionClaimError> {
        do throws(EditSessionClaimError) {
            let answer = try await transfer.requestEditSession(member: member, documentID: document.info.documentID, sessions: sessions,
                                                               activityType: activityType, uid: uid)
            var granted = document
            if let grant = answer.grant, grant.granted.digest != document.info.digest {
                // The source's app saved on release: that snapshot is now the source's current one.
                let newer = try? await transfer.pullDocument(member: member, typeHash: typeHash, revision: ActivityReference.anyRevision,
                                                             inbox: inbox, progress: progress)
                guard let newer, newer.info.digest == grant.granted.digest, newer.info.documentID == document.info.documentID else {
                    throw .fetchFailed
                }
                granted = newer
            }
            let outcome = try await transfer.settleEditSession(answer, sessions: sessions)
            log("batond: edit session of a continued document claimed (\(outcome))")
            return .success(granted)
        } catch .session(.notPending) {
            // A replay of the same journalled claim (at a sighting) may have settled it meanwhile.
            let id = document.info.documentID
            guard await sessions.owner(of: id, uid: uid) == .thisMachine, await sessions.ledger(id, uid: uid)?.current.digest == document.info.digest else {
                return .failure(.session(.notPending))
            }
            return .success(document)
        } catch .session(.refused(.unknownActivity)) {
            // The source keeps no edit session for it (sessions off there): a copy, nobody's session moves.
            return .success(document)
        } catch {
            return .failure(error)
        }
    }

    /// A claim that did not give this machine the session, as the Continue caller hears it.
    static func claimFailure(_ error: EditSessionClaimError) -> ServiceFailure {
        switch error {
        case .session(.refused(.sessionBusy)), .transfer(.timedOut):
            .editSessionBusy(ContinuationFailure.timedOut.message(
                "the source did not save and release the document's edit session in time; it keeps it (try again)"))
        case .session(.claimPendingElsewhere):
            .editSessionBusy(ContinuationFailure.interrupted.message(
                "a claim of this document towards another member is still pending; continue from that member first"))
        case .session(.refused(.documentConflict)), .session(.session(.conflict)):
            .documentConflict("the document changed on both machines since this copy's revision; this copy is kept")
        case .session(.store(let store)):
            .failed("the edit session cannot be recorded here (\(store)); nothing changed")
        case .session(.tooManyClaims(let limit)):
            .limitExceeded("at most \(limit) edit-session claims may be pending")
        case .transfer(let transfer):
            failure(transfer)
        case .fetchFailed:
            .continuation(.interrupted, "the snapshot saved on release could not be fetched; the claim is kept and a retry finishes it")
        case .session(let other):
            .failed("the edit session was not handed over: \(other)")
        }
    }
}
