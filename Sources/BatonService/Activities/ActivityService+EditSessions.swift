// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore

/// Edit sessions on the activities' side (§6.6): a snapshot is committed only by the session's
/// owner, and a claim's save is the activity's WillSave followed by the committed snapshot.
extension ActivityService {
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
            try? connection.emitSignal(path: id.objectPath, interface: "org.freedesktop.DBus.Properties", name: "PropertiesChanged",
                                       arguments: [.string(BatonInterface.activity), .propertyDictionary([Self.editSessionProperty: .string(text)]),
                                                   .stringArray([])],
                                       destination: activity.owner.connection)
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
    func commitEditSession(_ documentID: String, digest: [UInt8], uid: UInt32) async throws {
        guard let editSessions else { return }
        do { try await editSessions.commitLocal(documentID, digest: digest, uid: uid) } catch {
            throw Self.busError(error)
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

    static let editSessionProperty = "EditSession"

    /// Activity1.EditSession: who owns the edit session of the activity's document. Private like
    /// every property but Type and Status: a document id says what the user works on.
    func editSessionValue(of id: ActivityID, sender: String?) async throws -> DBusValue {
        guard let sender else { throw DBusError.notPermitted("private property") }
        guard registry.activities[id] != nil else { throw DBusError(RegistryError.unknownActivity) }
        guard try await callerUID(sender) == id.uid else { throw DBusError(RegistryError.notPermitted) }
        guard let document = registry.activities[id]?.document, let editSessions else { return .string("") }
        return .string(Self.editSessionText(await editSessions.owner(of: document.snapshot.info.documentID, uid: id.uid)))
    }

    /// "this" (owned here), the owning member's device id in hex, or "" (no session known).
    static func editSessionText(_ owner: EditSessionOwner?) -> String {
        switch owner {
        case .thisMachine: "this"
        case .peer(let device): device.bytes.hexString
        case nil: ""
        }
    }

    static func busError(_ failure: EditSessionFailure) -> DBusError {
        switch failure {
        case .session(.notOwner): .baton(BatonErrorName.editSessionNotOwned, "another machine owns this document's edit session")
        case .session(.conflict): .baton(BatonErrorName.documentConflict, "the document changed on both machines; this copy is kept")
        case .session(.tooManyDocuments(let limit)): .baton(BatonErrorName.limitExceeded, "at most \(limit) of your documents in use have edit sessions")
        case .tooManyClaims(let limit): .baton(BatonErrorName.limitExceeded, "at most \(limit) claims are pending")
        case .refused(.sessionBusy), .claimPendingElsewhere: .baton(BatonErrorName.editSessionBusy, "the edit session was not released")
        case .refused(.documentConflict): .baton(BatonErrorName.documentConflict, "the document changed on both machines; this copy is kept")
        case .store(let error):
            if case .io(_, _, let code) = error, code == ENOSPC || code == EDQUOT { .baton(BatonErrorName.diskFull, "no space left to record the edit session; nothing changed") }
            else { .failed("the edit session could not be recorded; nothing changed") }
        default: .failed("edit session: \(failure)")
        }
    }
}
