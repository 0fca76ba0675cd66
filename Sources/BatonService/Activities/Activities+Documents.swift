// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonStore

/// Activity1.AttachDocument and the source side of documents (§6.5, docs/dbus-api.md): a snapshot
/// is copied into the daemon's per-user store from the descriptor the app passes, hashed, and only
/// then advertised.
extension Activities {
    /// Turns documents on with `store` (batond: `<state directory>/documents`).
    public func useDocuments(_ store: SnapshotStore) { documents = store }

    static func snapshotPrefix(_ id: ActivityID) -> String { "a\(id.serial)-" }

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
        guard let store = documents else { throw .service(.notReady("documents are not enabled")) }
        snapshotSerial += 1
        let name = Self.snapshotPrefix(id) + String(snapshotSerial)
        let replaced = activity.document.map { $0.snapshot.path.split(separator: "/").last.map(String.init) ?? "" }
        // The copy runs off the actor: a large snapshot must not hold up every other call.
        let outcome = await Task.detached { () -> Result<StoredSnapshot, SnapshotError> in
            do throws(SnapshotError) { return .success(try store.commit(from: descriptor, uid: uid, name: name, replacing: replaced)) } catch { return .failure(error) }
        }.value
        let stored: StoredSnapshot
        switch outcome {
        case .success(let value): stored = value
        case .failure(let error): throw .snapshot(error)
        }
        let info: DocumentInfo
        do { info = try DocumentInfo(totalSize: stored.size, digest: stored.digest, mediaType: mediaType, documentID: documentID) } catch {
            store.remove(uid: uid, name: name)
            throw .failed("snapshot description refused")
        }
        do { try await commitEditSession(documentID, digest: info.digest, uid: uid) } catch {
            store.remove(uid: uid, name: name)
            throw error
        }
        do {
            try await transition(id, uid: uid) { registry, id, uid throws(RegistryError) in
                try registry.attachDocument(id, by: uid, AttachedDocument(path: stored.path, info: info))
            }
        } catch {
            // The activity ended while the copy ran.
            store.remove(uid: uid, name: name)
            throw error
        }
        if let replaced, replaced != name { store.remove(uid: uid, name: replaced) }
        await refreshDocumentsInUse(uid: uid)
        logger.log("batond: activity \(id.objectPath) document committed (\(stored.size) bytes)")
    }

    func removeSnapshots(of id: ActivityID) {
        documents?.removeAll(uid: id.uid, prefix: Self.snapshotPrefix(id))
    }

    public func documentForTransfer(uid: UInt32) async -> AttachedDocument? {
        registry.documentForTransfer(uid: uid)
    }

    /// Where `uid`'s incoming documents are pulled to (`<store>/received/<uid>`); nil without a store.
    public func holdsReceivedDocument(digest: [UInt8]) async -> Bool {
        guard let store = documents else { return false }
        let received = store.directory + "/received"
        guard let handle = opendir(received) else { return false }
        defer { closedir(handle) }
        while let entry = readdir(handle) {
            let user = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard user.first != "." else { continue }
            if (try? DocumentInbox(directory: received + "/" + user))?.received(digest: digest) != nil { return true }
        }
        return false
    }

    public func documentInbox(uid: UInt32) async -> DocumentInbox? {
        guard let store = documents else { return nil }
        do throws(SnapshotError) { return try DocumentInbox.ofUser(uid, under: store.directory) } catch {
            logger.log("batond: no inbox for incoming documents: \(error)")
            return nil
        }
    }
}
