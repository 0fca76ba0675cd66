// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BatonSystem

/// Raw file operations inside a `StateDirectory`. Callers hold `writeLock` around the mutating ones.
extension StateDirectory {
    /// Reads a whole file, or returns nil when it does not exist.
    ///
    /// `enforceMode` rejects files not owned by us or with any group/other permission bit: their
    /// contents may have been read or replaced by someone else. A symbolic link is always rejected.
    func readFile(_ name: String, enforceMode: Bool) throws(StoreError) -> [UInt8]? {
        let file = filePath(name)
        let fd: FileDescriptor
        do throws(Errno) { fd = try FileDescriptor.open(in: directory, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) } catch {
            if error.code == ENOENT { return nil }
            if error.code == ELOOP { throw .insecureFile(file: file, reason: "is a symbolic link") }
            throw .system("open", file: file, errno: error.code)
        }
        var info = stat()
        guard fstat(fd.rawValue, &info) == 0 else { throw .system("stat", file: file, errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw .corrupt(file: file, reason: "not a regular file") }
        if enforceMode {
            guard info.st_uid == geteuid() else {
                throw .insecureFile(file: file, reason: "owned by uid \(info.st_uid), not by uid \(geteuid())")
            }
            let permissions = UInt32(info.st_mode) & 0o7777
            guard permissions & 0o077 == 0 else {
                throw .insecureFile(file: file, reason: "mode \(octal(permissions)) is looser than 0600")
            }
        }
        let limit = Self.maximumFileSize
        guard info.st_size <= limit else {
            throw .corrupt(file: file, reason: "file is \(info.st_size) bytes, more than the \(limit)-byte limit")
        }
        // One byte past the bound: the file may grow while we read it; the bound holds regardless.
        let bytes: [UInt8]
        do throws(Errno) { bytes = try fd.readAll(upTo: limit + 1) } catch { throw .system("read", file: file, errno: error.code) }
        guard bytes.count <= limit else {
            throw .corrupt(file: file, reason: "file grew beyond the \(limit)-byte limit while reading")
        }
        return bytes
    }

    /// Replaces `name` with `bytes` so that a reader, or a reboot at any instant, sees either the
    /// complete old file or the complete new one: write a fresh temporary file (O_EXCL, `mode`),
    /// fsync it, rename it over the target, fsync the directory so the rename itself is durable.
    func writeAtomically(_ bytes: [UInt8], to name: String, mode: mode_t) throws(StoreError) {
        let file = filePath(name)
        let temporary = Self.temporaryPrefix + name + "-" + String(UInt64.random(in: .min ... .max), radix: 16)
        let fd: FileDescriptor
        do throws(Errno) {
            fd = try FileDescriptor.open(in: directory, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode: mode)
        } catch { throw .system("create temporary file for", file: file, errno: error.code) }
        var renamed = false
        defer {
            if !renamed { unlinkat(descriptor, temporary, 0) }
        }
        do {
            // Closed before the rename, whatever happens.
            let fd = consume fd
            // The creation mode is filtered by the umask; set it exactly.
            guard fchmod(fd.rawValue, mode) == 0 else { throw StoreError.system("chmod", file: file, errno: errno) }
            do throws(Errno) { try fd.writeAll(bytes) } catch { throw StoreError.system("write", file: file, errno: error.code) }
            guard fsync(fd.rawValue) == 0 else { throw StoreError.system("fsync", file: file, errno: errno) }
        }
        guard renameat(descriptor, temporary, descriptor, name) == 0 else {
            throw .system("rename into place", file: file, errno: errno)
        }
        renamed = true
        guard fsync(descriptor) == 0 else { throw .system("fsync directory", file: path, errno: errno) }
    }

    /// Renames `name` aside to `<name>.corrupt-<UTC timestamp>[-n]` without ever replacing an
    /// existing file (link, then unlink). Returns the new name, or nil if `name` does not exist.
    func quarantineFile(_ name: String) throws(StoreError) -> String? {
        let file = filePath(name)
        let base = name + ".corrupt-" + Self.utcTimestamp()
        for attempt in 0..<1000 {
            let target = attempt == 0 ? base : base + "-\(attempt)"
            if linkat(descriptor, name, descriptor, target, 0) == 0 {
                guard unlinkat(descriptor, name, 0) == 0 else {
                    throw .system("unlink after quarantine", file: file, errno: errno)
                }
                guard fsync(descriptor) == 0 else { throw .system("fsync directory", file: path, errno: errno) }
                return target
            }
            switch errno {
            case EEXIST: continue
            case ENOENT: return nil
            case let code: throw .system("quarantine", file: file, errno: code)
            }
        }
        throw .io(file: file, operation: "quarantine (no free name)", errno: EEXIST)
    }

    /// Deletes `name` durably; a missing file is not an error.
    func removeFile(_ name: String) throws(StoreError) {
        if unlinkat(descriptor, name, 0) != 0 {
            if errno == ENOENT { return }
            throw .system("remove", file: filePath(name), errno: errno)
        }
        guard fsync(descriptor) == 0 else { throw .system("fsync directory", file: path, errno: errno) }
    }

    private static func utcTimestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return pad(parts.tm_year + 1900, 4) + pad(parts.tm_mon + 1, 2) + pad(parts.tm_mday, 2) + "T"
            + pad(parts.tm_hour, 2) + pad(parts.tm_min, 2) + pad(parts.tm_sec, 2) + "Z"
    }
}

/// Lets a flock go before closing its descriptor (the inbox's partial files, the state directory
/// lock). The lock belongs to the open file, which a child process started in the meantime also
/// refers to until its exec closes it (O_CLOEXEC acts only at exec); a plain close left the lock
/// held that long, and the next pull of a snapshot was refused as already running (seen in test
/// runs that start programs beside pulls).
func unlockAndClose(_ descriptor: consuming FileDescriptor) {
    _ = flock(descriptor.rawValue, LOCK_UN)
    descriptor.close()
}
