// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

/// Edit sessions on the activities' side (§6.6): a snapshot is committed only by the session's
/// owner, and a claim's save is the activity's WillSave followed by the committed snapshot.
extension Activities {
    /// Turns edit sessions on (batond: `<state directory>/sessions`).
    public func useEditSessions(_ sessions: EditSessions) {
        editSessions = sessions
        sessions.observeOwners { [weak self] uid, documentID in
            Task { await self?.editSessionMoved(documentID, uid: uid) }
        }
    }

    /// A claim (or the first commit) moved one of `uid`'s documents' session: each of that user's
    /// activities carrying it tells its owner's connection (EditSession is private, like Document;
    /// another user's same document id is another document and hears nothing).
    func editSessionMoved(_ documentID: String, uid: UInt32) async {
        guard let editSessions else { return }
        let text = Self.editSessionText(await editSessions.owner(of: documentID, uid: uid))
        for (id, activity) in registry.activities where id.uid == uid && activity.document?.snapshot.info.documentID == documentID {
            objects.editSessionChanged(activity, owner: text)
        }
    }

    /// Claims abandoned because their owner left the ring (§6.6): one `edit-session-lost` record
    /// each, and the words for the person in the log, naming the document by its id (as error
    /// records and the log never carry an activity's title).
    public func editSessionsLost(_ lost: [LostEditSession]) async {
        for claim in lost {
            logger.log("batond: " + claim.sentence(documentName: claim.documentID))
            recordError(.editSessionLost)
        }
    }

    public func editSessionsForTransfer() async -> EditSessions? { editSessions }
    public func editSessionsForContinue() async -> EditSessions? { editSessions }

    /// Records a committed snapshot as the document's next revision; refused while another machine
    /// owns the session (the app must claim it back by continuing there first).
    func commitEditSession(_ documentID: String, digest: [UInt8], uid: UInt32) async throws(ActivityFailure) {
        guard let editSessions else { return }
        do { try await editSessions.commitLocal(documentID, digest: digest, uid: uid) } catch {
            throw .editSession(error)
        }
    }

    /// Tells the edit sessions which documents `uid`'s activities carry now: those records are
    /// never evicted to make room (called when a document is attached and when an activity ends).
    func refreshDocumentsInUse(uid: UInt32) async {
        guard let editSessions else { return }
        let carried = registry.activities.filter { $0.key.uid == uid }.compactMap { $0.value.document?.snapshot.info.documentID }
        await editSessions.setDocumentsInUse(Set(carried), uid: uid)
    }

    public func savedDocument(documentID: String, uid: UInt32) async -> [UInt8]? {
        // WillSave first when the app asked for it; then the snapshot must be fresh.
        guard await recordForTransfer(uid: uid) != nil, let document = registry.documentForTransfer(uid: uid),
              document.info.documentID == documentID else { return nil }
        return document.info.digest
    }

    /// Activity1.EditSession: who owns the edit session of the activity's document. Private like
    /// every property but Type and Status: a document id says what the user works on.
    func editSessionOwner(of id: ActivityID, sender: String?) async throws(ActivityFailure) -> String {
        guard let sender else { throw .notPermitted("private property") }
        guard registry.activities[id] != nil else { throw .registry(.unknownActivity) }
        guard try await callerUID(sender) == id.uid else { throw .registry(.notPermitted) }
        guard let document = registry.activities[id]?.document, let editSessions else { return "" }
        return Self.editSessionText(await editSessions.owner(of: document.snapshot.info.documentID, uid: id.uid))
    }

    /// "this" (owned here), the owning member's device id in hex, or "" (no session known).
    static func editSessionText(_ owner: EditSessionOwner?) -> String {
        switch owner {
        case .thisMachine: "this"
        case .peer(let device): device.bytes.hexString
        case nil: ""
        }
    }
}
