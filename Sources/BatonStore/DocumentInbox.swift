// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonCrypto
import BatonSystem

/// Where a receiver keeps documents being pulled (`<directory>/<hex digest>.partial`) and pulled
/// ones (`<hex digest>.document`), 0600 in a 0700 directory. The partial file is named by the digest
/// it must reach, so after an interruption the pull resumes from its length, and a partial of
/// another snapshot can never be mixed in.
/// What it may hold is bounded (`capacity`, see DocumentInboxRoom).
public struct DocumentInbox: Sendable {
    public let directory: String
    /// The bytes its documents and partial files may take (pulls reserve before they write).
    public let capacity: UInt64

    public init(directory: String, capacity: UInt64 = DocumentInbox.defaultCapacity) throws(SnapshotError) {
        self.directory = directory
        self.capacity = capacity
        try SnapshotStore.makeDirectory(directory)
    }

    /// The inbox of one receiving user: `<base>/received/<uid>` (users never share received bytes).
    public static func ofUser(_ uid: UInt32, under base: String, capacity: UInt64 = DocumentInbox.defaultCapacity) throws(SnapshotError) -> DocumentInbox {
        try SnapshotStore.makeDirectory(base + "/received")
        return try DocumentInbox(directory: base + "/received/" + String(uid), capacity: capacity)
    }

    public func partialPath(digest: [UInt8]) -> String { directory + "/" + digest.hexString + ".partial" }
    public func documentPath(digest: [UInt8]) -> String { directory + "/" + digest.hexString + ".document" }

    /// The bytes already held for this snapshot: its complete size when it was pulled before, the
    /// partial file's length when a pull was interrupted, else 0.
    public func resumeOffset(digest: [UInt8]) -> UInt64 {
        var status = stat()
        if lstat(partialPath(digest: digest), &status) == 0, status.st_mode & S_IFMT == S_IFREG { return UInt64(status.st_size) }
        return 0
    }

    /// Whether a pull of this snapshot is writing its partial file now (in this process or another):
    /// its lock is held. A shared lock taken and dropped at once asks without disturbing it.
    public func pullRunning(digest: [UInt8]) -> Bool { pullRunning(hexDigest: digest.hexString) }

    func pullRunning(hexDigest: String) -> Bool {
        guard let partial = try? FileDescriptor.open(directory + "/" + hexDigest + ".partial", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) else {
            return false
        }
        let running = flock(partial.rawValue, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
        unlockAndClose(partial)
        return running
    }

    /// A finished document already received with this digest, if any.
    public func received(digest: [UInt8]) -> String? {
        var status = stat()
        let path = documentPath(digest: digest)
        return lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG ? path : nil
    }

    /// Opens the partial file of `digest` to append from `offset` (what `resumeOffset` said, or 0 to
    /// start over). The bytes already there are hashed again first: that is the resume cost.
    public func open(digest: [UInt8], offset: UInt64) throws(SnapshotError) -> PartialDocument {
        try PartialDocument(path: partialPath(digest: digest), finalPath: documentPath(digest: digest), directory: directory,
                            digest: digest, offset: offset)
    }
}

/// One snapshot being received, appended in order and checked against its digest at the end.
/// Owned by one task at a time.
public final class PartialDocument: @unchecked Sendable {
    public let digest: [UInt8]
    public private(set) var received: UInt64
    private let path: String
    private let finalPath: String
    private let directory: String
    /// The partial file, open until the pull finishes, is discarded or suspended.
    private var file: FileDescriptor?
    private let hash = SHA256Stream()

    init(path: String, finalPath: String, directory: String, digest: [UInt8], offset: UInt64) throws(SnapshotError) {
        self.path = path
        self.finalPath = finalPath
        self.directory = directory
        self.digest = digest
        let file = try Self.openPartial(path)
        received = 0
        // A failure below closes the file again (its owner goes).
        let descriptor = file.rawValue
        // One pull per snapshot at a time: a second one would truncate the file under the first,
        // which could then rename a file with a hole into place although its stream hashed right.
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            throw errno == EWOULDBLOCK ? SnapshotError.pullInProgress : SnapshotError.system("lock partial", errno)
        }
        guard fchmod(descriptor, 0o600) == 0, ftruncate(descriptor, off_t(offset)) == 0 else { throw SnapshotError.system("truncate partial", errno) }
        // The kept bytes are read once, front to back: ask for large read-ahead.
        _ = posix_fadvise(descriptor, 0, off_t(offset), POSIX_FADV_SEQUENTIAL)
        var block = [UInt8](repeating: 0, count: SnapshotStore.blockSize)
        while received < offset {
            let want = Int(min(UInt64(block.count), offset - received))
            let read = block.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) in try file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[..<want]), at: received) }
            }
            let count: Int
            switch read {
            case .success(let value): count = value
            case .failure(let error): throw SnapshotError.io(operation: "read partial", errno: error.code)
            }
            guard count > 0 else { throw SnapshotError.io(operation: "read partial", errno: EIO) }
            block.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            received += UInt64(count)
        }
        guard lseek(descriptor, off_t(offset), SEEK_SET) >= 0 else { throw SnapshotError.io(operation: "seek", errno: errno) }
        self.file = consume file
    }

    private static func openPartial(_ path: String) throws(SnapshotError) -> FileDescriptor {
        do throws(Errno) { return try FileDescriptor.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o600) } catch {
            throw .system("create partial", error.code)
        }
    }

    deinit { if let file = file.take() { unlockAndClose(file) } }

    /// Appends the next bytes (the caller checked their offset).
    public func append(_ bytes: UnsafeRawBufferPointer) throws(SnapshotError) {
        hash.update(bytes)
        do throws(Errno) { try file?.writeAll(bytes) } catch { throw .system("write", error.code) }
        received += UInt64(bytes.count)
    }

    /// The two halves of `append`, for a receiver that runs them on two threads at once (hashing is
    /// the slowest step of a pull): `updateDigest` takes the bytes in order, `write(_:at:)` puts
    /// them at their offset. The two share no state; each must not overlap a call of its own kind.
    public func updateDigest(with bytes: UnsafeRawBufferPointer) {
        hash.update(bytes)
        received += UInt64(bytes.count)
    }

    public func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(SnapshotError) {
        do throws(Errno) { try file?.writeAll(bytes, at: offset) } catch { throw .system("write", error.code) }
    }

    /// Ends the pull: the digest is checked, then the partial file becomes the document (fsync,
    /// rename). A mismatch removes the partial file, so the next pull starts from 0. A partial file
    /// no longer at its name is never renamed (`io`, ESTALE).
    public func finish() throws(SnapshotError) -> String {
        guard let file = file.take() else { throw .io(operation: "partial file already closed", errno: EBADF) }
        let descriptor = file.rawValue
        let landed = Result { () throws(SnapshotError) in try land(descriptor) }
        unlockAndClose(file)
        return try landed.get()
    }

    private func land(_ descriptor: Int32) throws(SnapshotError) -> String {
        // The rename goes by name: it must still name this file (one removed and made again under
        // it is another pull's, unchecked), else that file would become the checked document.
        var opened = stat(), named = stat()
        guard fstat(descriptor, &opened) == 0, lstat(path, &named) == 0, opened.st_dev == named.st_dev, opened.st_ino == named.st_ino else {
            throw .io(operation: "partial file removed while written", errno: ESTALE)
        }
        guard hash.finish() == digest else {
            unlink(path)
            throw .digestMismatch
        }
        guard fsync(descriptor) == 0 else { throw .system("fsync", errno) }
        guard rename(path, finalPath) == 0 else { throw .system("rename", errno) }
        try SnapshotStore.syncDirectory(directory)
        return finalPath
    }

    /// Drops the partial file (its stream was refused), while it is still locked: unlinked after the
    /// lock is let go, it could be the file a waiting pull had just opened and was writing.
    public func discard() {
        guard let file = file.take() else { return }
        unlink(path)
        unlockAndClose(file)
    }

    /// Keeps what arrived for a later resume (the connection broke).
    public func suspend() {
        guard let file = file.take() else { return }
        fsync(file.rawValue)
        unlockAndClose(file)
    }
}
