// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

/// Activity1.AttachDocument and the source side of documents (§6.5, docs/dbus-api.md): a snapshot
/// is copied into the daemon's per-user store (`Documents`) from the descriptor the app passes,
/// hashed, and only then advertised; the registry records which activity carries it.
extension Activities {
    /// Turns documents on with `store` (batond: `<state directory>/documents`).
    public func useDocuments(_ store: SnapshotStore) async { await documents.use(store) }

    /// Activity1.AttachDocument, decoded (ownership was checked first): the descriptor is the
    /// caller's, closed by the bus once the call returns.
    func attachDocument(_ id: ActivityID, uid: UInt32, descriptor: Int32, mediaType: String, documentID: String) async throws(ActivityFailure) {
        let activity = try activity(id, for: uid)
        do {
            try DocumentInfo.checkText(mediaType, "mediaType")
            try DocumentInfo.checkText(documentID, "documentId")
        } catch {
            throw .invalidArguments("mediaType and documentId must be 1 to 255 bytes of UTF-8 without control characters")
        }
        let replaced = activity.document.map { $0.snapshot.path.split(separator: "/").last.map(String.init) ?? "" }
        let (attached, name) = try await documents.commit(id, uid: uid, descriptor: descriptor, mediaType: mediaType, documentID: documentID,
                                                          replacing: replaced)
        do {
            try await transition(id, uid: uid) { registry, id, uid throws(RegistryError) in try registry.attachDocument(id, by: uid, attached) }
        } catch {
            // The activity ended while the copy ran.
            await documents.discard(uid: uid, name: name)
            throw error
        }
        if let replaced, replaced != name { await documents.discard(uid: uid, name: replaced) }
        await refreshDocumentsInUse(uid: uid)
        logger.log("batond: activity \(id.objectPath) document committed (\(attached.info.totalSize) bytes)")
    }

    /// Tells the edit sessions which documents `uid`'s activities carry now: those records are
    /// never evicted to make room (called when a document is attached and when an activity ends).
    func refreshDocumentsInUse(uid: UInt32) async {
        guard editSessionsOn else { return }
        let carried = registry.activities.filter { $0.key.uid == uid }.compactMap { $0.value.document?.snapshot.info.documentID }
        await documents.setDocumentsInUse(Set(carried), uid: uid)
    }
}
