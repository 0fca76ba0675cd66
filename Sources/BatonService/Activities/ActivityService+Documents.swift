// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonDBus
import BatonStore

/// Activity1.AttachDocument and the source side of documents (§6.5, docs/dbus-api.md): a snapshot
/// is copied into the daemon's per-user store from the descriptor the app passes, hashed, and only
/// then advertised.
extension ActivityService {
    /// Per document and per user, by default; `useDocuments` takes others.
    public static let defaultDocumentLimit: UInt64 = 4 << 30
    public static let defaultUserDocumentLimit: UInt64 = 8 << 30

    /// Turns documents on with `store` (batond: `<state directory>/documents`).
    public func useDocuments(_ store: SnapshotStore) { documents = store }

    static func snapshotPrefix(_ id: ActivityID) -> String { "a\(id.serial)-" }

    func attachDocument(_ id: ActivityID, uid: UInt32, arguments: [DBusValue]) async throws {
        // The descriptor is ours until this call returns; the bus connection closes it then, whatever happens.
        guard case .unixFD(let descriptor) = arguments[0] else { throw DBusError.invalidArguments("snapshot must be a file descriptor (h)") }
        // Ownership first: another user learns nothing from validation errors.
        let activity = try Self.decode { () throws(RegistryError) in try registry.activity(id, for: uid) }
        guard case .string(let mediaType) = arguments[1], case .string(let documentID) = arguments[2] else {
            throw DBusError.invalidArguments("mediaType and documentId must be strings (s)")
        }
        do {
            try DocumentInfo.checkText(mediaType, "mediaType")
            try DocumentInfo.checkText(documentID, "documentId")
        } catch {
            throw DBusError.invalidArguments("mediaType and documentId must be 1 to 255 bytes of UTF-8 without control characters")
        }
        guard let store = documents else { throw DBusError.baton(BatonErrorName.notReady, "documents are not enabled") }
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
        case .failure(let error): throw Self.busError(error)
        }
        let info: DocumentInfo
        do { info = try DocumentInfo(totalSize: stored.size, digest: stored.digest, mediaType: mediaType, documentID: documentID) } catch {
            store.remove(uid: uid, name: name)
            throw DBusError.failed("snapshot description refused")
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

    /// What a handler gets for a received document (ActivityHandler1.Continue, info "Document"): a
    /// read-only descriptor of the daemon's checked copy, never a path (docs/dbus-api.md says why),
    /// and what the wire said of it. Returns the value and the descriptor the caller closes.
    static func handlerDocument(_ document: PulledDocument) -> (DBusValue, Int32)? {
        let descriptor = open(document.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        var entries = documentDescription(document.info)
        entries["Fd"] = .unixFD(descriptor)
        return (.propertyDictionary(entries), descriptor)
    }

    /// Id, MediaType, Size and Digest (hex) of a document: what Activity1.Document shows and a
    /// handler gets; never a path.
    static func documentDescription(_ info: DocumentInfo) -> [String: DBusValue] {
        ["Id": .string(info.documentID), "MediaType": .string(info.mediaType), "Size": .uint64(info.totalSize),
         "Digest": .string(info.digest.hexString)]
    }

    static func busError(_ error: SnapshotError) -> DBusError {
        switch error {
        case .payloadTooLarge(let limit, let actual):
            .payloadTooLarge("the document is \(actual) bytes or more, the limit left is \(limit)")
        case .diskFull: .baton(BatonErrorName.diskFull, "no space left for the snapshot; the previous one is kept")
        case .notARegularFile: .invalidArguments("the snapshot must be a regular file")
        case .notReadable: .invalidArguments("the snapshot must be a descriptor opened for reading")
        case .digestMismatch, .invalidName: .failed("snapshot refused")
        case .io(let operation, let code): .failed("snapshot \(operation) failed (errno \(code))")
        case .pullInProgress: .failed("another transfer of this document is running")
        }
    }
}

