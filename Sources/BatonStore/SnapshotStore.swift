// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonCrypto
import BatonSystem
import Synchronization

/// Why a document snapshot could not be committed or received.
public enum SnapshotError: Error, Equatable, Sendable {
    /// Over the per-document or the per-user cap; nothing beyond the cap was copied.
    case payloadTooLarge(limit: UInt64, actual: UInt64)
    /// The file system is full (ENOSPC, EDQUOT); the previous snapshot is kept.
    case diskFull
    /// The descriptor is not a regular file (a pipe, a socket, a directory).
    case notARegularFile
    /// The descriptor cannot be read (opened write-only, or `O_PATH`).
    case notReadable
    /// The bytes do not hash to the digest they were announced with.
    case digestMismatch
    case invalidName(String)
    case io(operation: String, errno: Int32)
    /// Another pull of the same snapshot holds its partial file (one writer at a time).
    case pullInProgress

    static func system(_ operation: String, _ code: Int32) -> SnapshotError {
        code == ENOSPC || code == EDQUOT ? .diskFull : .io(operation: operation, errno: code)
    }
}

/// A committed snapshot: where the daemon keeps it and what describes it on the wire.
public struct StoredSnapshot: Hashable, Sendable {
    public var path: String
    public var size: UInt64
    public var digest: [UInt8]
}

/// The daemon's per-user document snapshots (`<directory>/<uid>/<name>`, directories 0700, files
/// 0600). A snapshot is a copy, not a reflink or the app's own descriptor: the app keeps editing its
/// file, and what was advertised must stay what is served; the copy is read once anyway for the
/// digest. Commits are atomic (temporary file, fsync, rename, fsync of the directory): a failure at
/// any point, a full disk included, leaves the previous snapshot as it was.
public struct SnapshotStore: Sendable {
    public static let blockSize = 1 << 20
    /// O_PATH, which Glibc's module leaves out (it is a GNU extension); the same value on every Linux
    /// architecture Debian builds for but alpha, parisc and sparc.
    static let pathOnlyFlag: Int32 = 0o10_000_000
    public let directory: String
    public let perDocumentLimit: UInt64
    public let perUserLimit: UInt64
    /// Bytes being copied by commits still running, per user: checked with what is on disk, so
    /// concurrent commits of one user cannot each pass the per-user cap.
    private let inFlight = InFlightBytes()

    public init(directory: String, perDocumentLimit: UInt64, perUserLimit: UInt64) throws(SnapshotError) {
        self.directory = directory
        self.perDocumentLimit = perDocumentLimit
        self.perUserLimit = perUserLimit
        try Self.makeDirectory(directory)
    }

    /// Copies the regular file behind `descriptor` (from its start, whatever its offset) into the
    /// store as `name` of `uid`, hashing it on the way. The caps are checked against the file's size
    /// before copying and again while copying, in case the file grows meanwhile.
    /// `replacing` names the snapshot this one supersedes: it does not count against the user's cap.
    public func commit(from descriptor: Int32, uid: UInt32, name: String, replacing: String? = nil) throws(SnapshotError) -> StoredSnapshot {
        try Self.checkName(name)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .io(operation: "fstat", errno: errno) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .notARegularFile }
        let userDirectory = directory + "/" + String(uid)
        try Self.makeDirectory(userDirectory)
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, flags & Self.pathOnlyFlag == 0, flags & O_ACCMODE != O_WRONLY else { throw .notReadable }
        let excluded: Set<String> = [name, replacing ?? name]
        let announced = UInt64(max(0, status.st_size))
        // Space for the announced size now; a file that grows takes more as it is copied.
        var reserved: UInt64 = 0
        defer { inFlight.release(uid: uid, bytes: reserved) }
        try reserve(announced, uid: uid, excluding: excluded, holding: &reserved)

        let target = userDirectory + "/" + name
        let temporary = userDirectory + "/.tmp-" + name + "-" + String(UInt64.random(in: .min ... .max), radix: 16)
        let output: FileDescriptor
        do throws(Errno) { output = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode: 0o600) } catch {
            throw .system("create", error.code)
        }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        let hash = SHA256Stream()
        var copied: UInt64 = 0
        do {
            // Closed before the rename, whatever happens.
            let output = consume output
            guard fchmod(output.rawValue, 0o600) == 0 else { throw SnapshotError.io(operation: "fchmod", errno: errno) }
            var block = [UInt8](repeating: 0, count: Self.blockSize)
            try FileDescriptor.borrowing(descriptor) { (input: borrowing FileDescriptor) throws(SnapshotError) in
                while true {
                    let read = block.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try input.read(into: raw, at: copied) } }
                    let count: Int
                    switch read {
                    case .success(let value): count = value
                    case .failure(let error): throw SnapshotError.io(operation: "read", errno: error.code)
                    }
                    if count == 0 { break }
                    if copied + UInt64(count) > reserved { try reserve(copied + UInt64(count), uid: uid, excluding: excluded, holding: &reserved) }
                    let failure: SnapshotError? = block.withUnsafeBytes { raw in
                        let piece = UnsafeRawBufferPointer(rebasing: raw[0..<count])
                        hash.update(piece)
                        do throws(Errno) { try output.writeAll(piece) } catch { return SnapshotError.system("write", error.code) }
                        return nil
                    }
                    if let failure { throw failure }
                    copied += UInt64(count)
                }
            }
            guard fsync(output.rawValue) == 0 else { throw SnapshotError.system("fsync", errno) }
        }
        // The reservation ends as the file lands, under one lock: a concurrent check sees the bytes
        // once, reserved or on disk.
        var renameError: Int32 = 0
        renamed = inFlight.settle(uid: uid, bytes: reserved) {
            guard rename(temporary, target) == 0 else { renameError = errno; return false }
            return true
        }
        reserved = 0
        guard renamed else { throw .system("rename", renameError) }
        try Self.syncDirectory(userDirectory)
        return StoredSnapshot(path: target, size: copied, digest: hash.finish())
    }

    /// Raises `reserved` (this commit's share of `uid`'s in-flight bytes) to `total`, or throws
    /// `payloadTooLarge` when the document's cap or the user's (on disk plus in flight) would be passed.
    /// The disk is read under the reservations' lock: a commit finishing meanwhile counts at least once.
    private func reserve(_ total: UInt64, uid: UInt32, excluding names: Set<String>, holding reserved: inout UInt64) throws(SnapshotError) {
        let mine = reserved
        var limit: UInt64 = 0
        let granted = inFlight.raise(uid: uid, from: mine, to: total) { heldByAll in
            let others = usedBytes(uid: uid, excluding: names) + (heldByAll - mine)
            limit = min(perDocumentLimit, perUserLimit > others ? perUserLimit - others : 0)
            return total <= limit
        }
        guard granted else { throw .payloadTooLarge(limit: limit, actual: total) }
        reserved = total
    }

    /// Removes a snapshot (the activity ended); a missing one is not an error.
    public func remove(uid: UInt32, name: String) {
        guard (try? Self.checkName(name)) != nil else { return }
        unlink(directory + "/" + String(uid) + "/" + name)
    }

    /// Removes every snapshot of `uid` whose name starts with `prefix` (an activity's, when it ends).
    public func removeAll(uid: UInt32, prefix: String) {
        let userDirectory = directory + "/" + String(uid)
        guard !prefix.isEmpty, let handle = opendir(userDirectory) else { return }
        var doomed: [String] = []
        while let entry = readdir(handle) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if entryName.hasPrefix(prefix) { doomed.append(entryName) }
        }
        closedir(handle)
        for name in doomed { unlink(userDirectory + "/" + name) }
    }

    /// Bytes held for `uid`, leaving out `name` (the snapshot a commit replaces) and temporary files.
    func usedBytes(uid: UInt32, excluding names: Set<String>) -> UInt64 {
        let userDirectory = directory + "/" + String(uid)
        guard let handle = opendir(userDirectory) else { return 0 }
        defer { closedir(handle) }
        var total: UInt64 = 0
        while let entry = readdir(handle) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard !entryName.hasPrefix("."), !names.contains(entryName) else { continue }
            var status = stat()
            if lstat(userDirectory + "/" + entryName, &status) == 0, status.st_mode & S_IFMT == S_IFREG {
                total += UInt64(max(0, status.st_size))
            }
        }
        return total
    }

    static func makeDirectory(_ path: String) throws(SnapshotError) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw .system("mkdir", errno) }
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else { throw .io(operation: "not a directory: \(path)", errno: ENOTDIR) }
        guard chmod(path, 0o700) == 0 else { throw .io(operation: "chmod", errno: errno) }
    }

    static func syncDirectory(_ path: String) throws(SnapshotError) {
        let directory: FileDescriptor
        do throws(Errno) { directory = try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } catch {
            throw .io(operation: "open directory", errno: error.code)
        }
        guard fsync(directory.rawValue) == 0 else { throw .system("fsync directory", errno) }
    }

    /// Names are chosen by the daemon, never by a peer or an app: letters, digits, '-', '_'.
    static func checkName(_ name: String) throws(SnapshotError) {
        guard !name.isEmpty, name.utf8.count <= 128,
              name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D || $0 == 0x5F }) else {
            throw .invalidName(name)
        }
    }
}

/// The bytes that running commits have reserved, per user.
final class InFlightBytes: Sendable {
    private let reserved = Mutex<[UInt32: UInt64]>([:])

    /// Moves one commit's share of `uid`'s reservation from `from` to `to` bytes when
    /// `fits(the user's whole reservation now)` says so, under the lock.
    func raise(uid: UInt32, from: UInt64, to: UInt64, fits: (UInt64) -> Bool) -> Bool {
        reserved.withLock { table in
            let held = table[uid, default: 0]
            guard fits(held) else { return false }
            table[uid] = held - from + to
            return true
        }
    }

    func release(uid: UInt32, bytes: UInt64) {
        guard bytes > 0 else { return }
        reserved.withLock { Self.take(bytes, of: uid, from: &$0) }
    }

    /// Runs `land` (the rename that puts the copied bytes on disk) and releases `bytes`, under the lock.
    func settle(uid: UInt32, bytes: UInt64, _ land: () -> Bool) -> Bool {
        reserved.withLock { table in
            defer { Self.take(bytes, of: uid, from: &table) }
            return land()
        }
    }

    private static func take(_ bytes: UInt64, of uid: UInt32, from table: inout [UInt32: UInt64]) {
        let held = table[uid, default: 0]
        let left = held - min(bytes, held)
        table[uid] = left == 0 ? nil : left
    }
}
