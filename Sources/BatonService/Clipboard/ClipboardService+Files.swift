// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonCore
import BatonCrypto
import BatonStore
import BatonSystem

/// The files of the copy on the shelf (a copy of kind files): the agent's id for it, the list the
/// offer's item holds, and the digest of each file a member asked for, with the identity it was
/// computed at (a later request of the unchanged file is not hashed again).
struct ShelfFiles: Sendable {
    var copy: UInt64
    var list: ClipboardFileList
    var digests: [Int: (identity: FileIdentity, digest: [UInt8])] = [:]
}

/// A file of the copy on the shelf, ready to stream (FetchClipboardFile, §6.7 "Files"): the descriptor
/// the copying account's agent opened, what the DocumentInfo says of it, and its identity then.
public struct ServedClipboardFile: Sendable {
    public let contents: ClipboardContents
    public let info: DocumentInfo
    public let identity: FileIdentity
}

/// Copies of files, both sides (docs/clipboard.md "Files", protocol §6.7 "Files"). The source never
/// opens a path: the copying account's agent opens each file when a member asks for it, as that
/// account, and hands the descriptor over; batond hashes it and streams it as a document. The
/// receiver pulls each file as a document into a per-account inbox and hands the agent a descriptor
/// of it, keeping nothing once it is handed over.
extension ClipboardService {
    // MARK: Source

    /// `uid` copied these files (its agent's id for the copy: `copy`). The list is the offer's one
    /// item; no byte of the files is read until a member asks for one.
    public func offerFiles(uid: UInt32, files: [ClipboardFile], expiresIn: UInt16, copy: UInt64) async throws(Refusal) {
        let list: ClipboardFileList
        do { list = try ClipboardFileList(files: files) } catch {
            throw .invalidContents("a copy has 1 to \(ClipboardFileList.maxFiles) files whose sizes add up")
        }
        if let why = list.refusal() { throw .invalidContents(why) }
        let contents: ClipboardContents
        do { contents = ClipboardContents(try SealedMemoryFile.make(name: "baton-file-list", bytes: list.encoded)) } catch {
            throw .failed("no memory file for the list of files: \(error)")
        }
        try await place(uid: uid, kind: .files, items: [list.item], expiresIn: expiresIn, contents: contents,
                        files: ShelfFiles(copy: copy, list: list))
    }

    /// The answer to FetchClipboardFile before its stream: the file opened by the copying account's
    /// agent, checked and described; or the Error frame (`unknownActivity` for another copy or no such
    /// file, `fileChanged` for a file that changed since the copy, which also takes the offer back).
    /// `member` (its name) asks; the file's bytes from the request's offset are recorded as its paste
    /// for the account's status.
    public func answerFile(_ request: ClipboardFileRequest, member: String) async -> Result<ServedClipboardFile, ErrorFrame> {
        fileRequestsAnswered += 1
        guard let copy = shelf.copy, clock.monotonicSeconds() < copy.expiresAt, copy.offerID == request.offerID, let files = shelfFiles else {
            return .failure(ErrorFrame(code: .unknownActivity, message: "clipboard changed"))
        }
        let index = Int(request.index)
        guard index < files.list.files.count else { return .failure(ErrorFrame(code: .unknownActivity, message: "no such file")) }
        let file = files.list.files[index]
        guard let agent = agents[copy.uid] else { return .failure(ErrorFrame(code: .timedOut, message: "the copying account's agent is gone")) }
        let opened: ClipboardContents
        do { opened = try await agentCalls.openFile(copy: files.copy, index: index, from: agent) } catch {
            switch error {
            case .changed(let why): return await changedFile(request.offerID, uid: copy.uid, why)
            case .noSuchCopy: return .failure(ErrorFrame(code: .unknownActivity, message: "clipboard changed"))
            case .failed(let why):
                log("batond: the clipboard agent of \(agent.account) did not hand file \(index) over: \(why)")
                return .failure(ErrorFrame(code: .timedOut, message: "the file could not be had"))
            }
        }
        // The shelf may have moved on while the agent opened it.
        guard shelf.copy?.offerID == request.offerID else { return .failure(ErrorFrame(code: .unknownActivity, message: "clipboard changed")) }
        guard let identity = FileIdentity(of: opened.file), identity.kind == .regular, identity.size == file.size else {
            return await changedFile(request.offerID, uid: copy.uid, "\(file.name) is no longer the file copied")
        }
        let digest: [UInt8]
        if let known = shelfFiles?.digests[index], identity.isUnchanged(from: known.identity) {
            digest = known.digest
        } else {
            // Off the actor's thread: a file of up to 1 GiB is read once, front to back.
            guard let computed = await Task.detached(operation: { Self.digest(of: opened, size: file.size) }).value,
                  let after = FileIdentity(of: opened.file), after.isUnchanged(from: identity) else {
                return await changedFile(request.offerID, uid: copy.uid, "\(file.name) changed while it was read")
            }
            digest = computed
            if shelf.copy?.offerID == request.offerID { shelfFiles?.digests[index] = (identity, computed) }
        }
        guard request.asksForAnyDigest || request.digest == digest else {
            return await changedFile(request.offerID, uid: copy.uid, "\(file.name) is not the file announced before")
        }
        guard request.offset <= file.size else { return .failure(ErrorFrame(code: .malformed, message: "offset beyond the file")) }
        do {
            let info = try DocumentInfo(totalSize: file.size, digest: digest, mediaType: file.mediaType, documentID: file.name)
            // Hashing awaited: recorded only while the copy is still the one asked for.
            if shelf.copy?.offerID == request.offerID { shelf.recordPaste(mediaType: file.mediaType, size: file.size - request.offset, to: member) }
            return .success(ServedClipboardFile(contents: opened, info: info, identity: identity))
        } catch {
            return .failure(ErrorFrame(code: .internalError, message: "file not describable"))
        }
    }

    /// A file of the offer `offerID` changed while it was streamed (the transfer saw its identity move):
    /// the offer is taken back.
    public func servedFileChanged(offerID: UInt64) async {
        guard let copy = shelf.copy, copy.offerID == offerID else { return }
        log("batond: a file of the copy on offer changed while it was sent: the copy is no longer offered")
        await withdraw(uid: copy.uid)
    }

    /// `Error(fileChanged)`, and the offer taken back: its bytes can never be served as they were.
    private func changedFile(_ offerID: UInt64, uid: UInt32, _ why: String) async -> Result<ServedClipboardFile, ErrorFrame> {
        if shelf.copy?.offerID == offerID {
            log("batond: \(why): the copy of files is no longer offered")
            await withdraw(uid: uid)
        }
        return .failure(ErrorFrame(code: .fileChanged, message: "file changed"))
    }

    /// SHA-256 of the file's `size` bytes from its start; nil when it cannot be read whole.
    static func digest(of contents: ClipboardContents, size: UInt64) -> [UInt8]? {
        let hash = SHA256Stream()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: UInt64 = 0
        while offset < size {
            let want = Int(min(UInt64(buffer.count), size - offset))
            guard let read = try? buffer.withUnsafeMutableBytes({ (raw) throws(Errno) in
                try contents.file.readFully(into: UnsafeMutableRawBufferPointer(rebasing: raw[..<want]), at: offset)
            }), read == want else { return nil }
            buffer.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[..<want])) }
            offset += UInt64(want)
        }
        return hash.finish()
    }

    // MARK: Receiver

    /// Keeps pulled files of members' copies under `directory` (one inbox per account), emptied now of
    /// whatever an earlier run left.
    public func useFileInbox(directory: String) {
        if mkdir(directory, 0o700) != 0, errno != EEXIST { log("batond: cannot create \(directory): \(Errno.current); files cannot be pasted here") }
        fileInboxDirectory = directory
        Self.removeTree(directory, keepTop: true)
    }

    /// A files offer of `member`: its list is fetched now (FetchClipboardData of its one item; no file's
    /// byte moves) and handed on with it. A list that cannot be had is asked for again at a later
    /// sighting; one over this machine's limits is not handed on (the log says why).
    func handFiles(_ offer: ClipboardOffer, from member: DeviceID, name: String) async {
        guard offer.items.count == 1, let item = offer.item(ClipboardFileList.mediaType),
              item.size <= UInt64(ClipboardFileList.maxEncodedBytes) else {
            log("batond: \(name) offered a copy of files without a list this machine reads: not taken")
            return
        }
        var bytes = [UInt8](repeating: 0, count: Int(item.size))
        do {
            let sink = ClipboardContents(try SealedMemoryFile.makeUnsealed(name: "baton-file-list"))
            let request = try ClipboardDataRequest(offerID: offer.offerID, mediaType: item.mediaType, offset: 0)
            try await fetcher.clipboardData(of: member, request, item: item, into: sink)
            let read = try bytes.withUnsafeMutableBytes { (raw) throws(Errno) in try sink.file.readFully(into: raw, at: 0) }
            guard read == bytes.count else { throw ClipboardFetchFailure.failed("the list arrived short") }
        } catch ClipboardFetchFailure.changed {
            return
        } catch {
            // Asked again at a later sighting, as a question that got no answer (§9 "Clipboard").
            log("batond: could not fetch the list of files \(name) offers: \(error)")
            watch.handFailed(member, offer: offer)
            return
        }
        let list: ClipboardFileList
        do { list = try ClipboardFileList(encoded: bytes) } catch {
            // As an offer that does not decode: nothing from that copy (§6.7 "Files").
            log("batond: the list of files \(name) offers is malformed (\(error)): not taken")
            return
        }
        if let why = list.refusal() {
            log("batond: \(name)'s copy of \(list.files.count) files is not taken: \(why)")
            return
        }
        await hand(offer, from: member, name: name, files: list)
    }

    /// `uid` pastes file `index` of the copy it was handed as `token`: pulled from its machine now (as a
    /// document, checked against its digest), handed over as a read-only descriptor of a file nobody
    /// else can open (its name is removed before it is handed over).
    public func pasteFile(uid: UInt32, token: UInt64, index: Int) async throws(Refusal) -> ClipboardContents {
        guard let entry = taken[token], entry.agent.uid == uid, clock.monotonicSeconds() < entry.expiresAt else { throw .unknownOffer }
        guard let files = entry.files else { throw .noSuchFile(index) }
        guard index >= 0, index < files.files.count else { throw .noSuchFile(index) }
        guard let root = fileInboxDirectory else { throw .noFileInbox }
        let file = files.files[index]
        let inbox: DocumentInbox
        do { inbox = try DocumentInbox(directory: root + "/" + String(uid), capacity: ClipboardFileList.totalLimit + (64 << 20)) } catch {
            throw .failed("no place for pulled files: \(error)")
        }
        let pulled: PulledDocument
        do { pulled = try await fetcher.clipboardFile(of: entry.member, offerID: entry.offer.offerID, index: index, file: file, into: inbox) } catch {
            switch error {
            case .changed, .fileChanged:
                if taken.removeValue(forKey: token) != nil {
                    forgetPulledFiles(of: uid)
                    await call(entry.agent) { calls in await calls.withdrawn(token: token, from: entry.agent) }
                }
                if error == .changed { throw .changed }
                throw .fileChanged(name: file.name, memberName: entry.memberName)
            case .unreachable:
                throw .unreachable(memberName: entry.memberName)
            case .failed(let what):
                log("batond: pasting \(file.name) from \(entry.memberName) failed: \(what)")
                throw .unreachable(memberName: entry.memberName)
            }
        }
        do throws(Errno) {
            let opened = try FileDescriptor.open(pulled.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            unlink(pulled.path)
            return ClipboardContents(opened)
        } catch {
            throw .failed("the pulled file cannot be opened: \(error)")
        }
    }

    /// `uid` holds no copy of members any more: what was pulled for it (partial files) goes.
    func forgetPulledFiles(of uid: UInt32) {
        guard let root = fileInboxDirectory, !taken.values.contains(where: { $0.agent.uid == uid }) else { return }
        Self.removeTree(root + "/" + String(uid), keepTop: false)
    }

    /// Removes a directory's entries (files, and directories below it), without following links;
    /// the directory too unless `keepTop`.
    static func removeTree(_ path: String, keepTop: Bool) {
        guard let handle = opendir(path) else { return }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        closedir(handle)
        for name in names {
            let child = path + "/" + name
            var status = stat()
            guard lstat(child, &status) == 0 else { continue }
            if status.st_mode & S_IFMT == S_IFDIR { removeTree(child, keepTop: false) } else { unlink(child) }
        }
        if !keepTop { rmdir(path) }
    }
}
