// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

/// Edit sessions on the activities' side (§6.6): a snapshot is committed only by the session's
/// owner (`Documents.commit`), and a claim's save is the activity's WillSave followed by the
/// committed snapshot.
extension Activities {
    /// Turns edit sessions on (batond: `<state directory>/sessions`).
    public func useEditSessions(_ sessions: EditSessions) async {
        await documents.use(sessions)
        editSessionsOn = true
        sessions.observeOwners { [weak self] uid, documentID in
            Task { await self?.editSessionMoved(documentID, uid: uid) }
        }
    }

    /// A claim (or the first commit) moved one of `uid`'s documents' session: each of that user's
    /// activities carrying it tells its owner's connection (EditSession is private, like Document;
    /// another user's same document id is another document and hears nothing).
    func editSessionMoved(_ documentID: String, uid: UInt32) async {
        guard editSessionsOn else { return }
        let text = await documents.editSessionText(documentID: documentID, uid: uid)
        for (id, activity) in registry.activities where id.uid == uid && activity.document?.snapshot.info.documentID == documentID {
            objects.editSessionChanged(activity, owner: text)
        }
    }

    /// Activity1.EditSession: who owns the edit session of the activity's document ("this", a
    /// device id in hex, or ""). Private like every property but Type and Status: a document id
    /// says what the user works on.
    /// `reader`: the caller's uid, resolved by the bus (nil: no caller identity).
    func editSessionOwner(of id: ActivityID, reader: UInt32?) async throws(ActivityFailure) -> String {
        guard let reader else { throw .notPermitted("private property") }
        guard registry.activities[id] != nil else { throw .registry(.unknownActivity) }
        guard reader == id.uid else { throw .registry(.notPermitted) }
        guard let document = registry.activities[id]?.document, editSessionsOn else { return "" }
        return await documents.editSessionText(documentID: document.snapshot.info.documentID, uid: id.uid)
    }
}
