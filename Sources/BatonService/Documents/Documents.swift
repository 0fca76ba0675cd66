// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonStore

/// The documents of activities (§6.5, §6.6): the per-user snapshot store an attached document is
/// copied into, the inbox of received ones and the edit sessions. The activities (which own
/// which activity carries which document) ask; this actor calls nobody back.
public actor Documents {
    let logger: any ServiceLog
    /// Where attached document snapshots are kept; nil: AttachDocument is refused (NotReady).
    var store: SnapshotStore?
    /// Edit sessions of documents (§6.6); nil: documents are not session-checked.
    var editSessions: EditSessions?
    var snapshotSerial: UInt64 = 0

    init(logger: any ServiceLog) { self.logger = logger }

    func use(_ store: SnapshotStore) { self.store = store }
    func use(_ sessions: EditSessions) { editSessions = sessions }

    static func snapshotPrefix(_ id: ActivityID) -> String { "a\(id.serial)-" }

    /// Copies the snapshot from `descriptor` into `uid`'s store (off the actor: a large snapshot
    /// must not hold up every other call), describes it and commits it to its edit session.
    /// Returns the snapshot and its name in the store (to discard if the activity ended meanwhile).
    func commit(_ id: ActivityID, uid: UInt32, descriptor: Int32, mediaType: String, documentID: String,
                replacing replaced: String?) async throws(ActivityFailure) -> (AttachedDocument, name: String) {
        guard let store else { throw .service(.notReady("documents are not enabled")) }
        snapshotSerial += 1
        let name = Self.snapshotPrefix(id) + String(snapshotSerial)
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
        if let editSessions {
            do { try await editSessions.commitLocal(documentID, digest: info.digest, uid: uid) } catch {
                store.remove(uid: uid, name: name)
                throw .editSession(error)
            }
        }
        return (AttachedDocument(path: stored.path, info: info), name)
    }

    /// Removes one snapshot of `uid` by its name in the store.
    func discard(uid: UInt32, name: String) { store?.remove(uid: uid, name: name) }

    func removeSnapshots(of id: ActivityID) {
        store?.removeAll(uid: id.uid, prefix: Self.snapshotPrefix(id))
    }

    /// Tells the edit sessions which documents `uid`'s activities carry now: those records are
    /// never evicted to make room.
    func setDocumentsInUse(_ carried: Set<String>, uid: UInt32) async {
        await editSessions?.setDocumentsInUse(carried, uid: uid)
    }

    /// "this" (owned here), the owning member's device id in hex, or "" (no session known).
    func editSessionText(documentID: String, uid: UInt32) async -> String {
        guard let editSessions else { return "" }
        return switch await editSessions.owner(of: documentID, uid: uid) {
        case .thisMachine: "this"
        case .peer(let device): device.bytes.hexString
        case nil: ""
        }
    }

    /// Whether a document with this digest was received whole here (any user's inbox).
    public func holdsReceivedDocument(digest: [UInt8]) async -> Bool {
        guard let store else { return false }
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

    /// Where `uid`'s incoming documents are pulled to (`<store>/received/<uid>`); nil without a store.
    public func documentInbox(uid: UInt32) async -> DocumentInbox? {
        guard let store else { return nil }
        do throws(SnapshotError) { return try DocumentInbox.ofUser(uid, under: store.directory) } catch {
            logger.log("batond: no inbox for incoming documents: \(error)")
            return nil
        }
    }
}
