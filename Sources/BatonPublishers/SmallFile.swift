// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonSystem

/// The session's small files that Baton reads and a person (or a program) may have put anything in:
/// publishers.conf, the agent's clipboard status. Untrusted input: checked before a byte is read and
/// read no further than its limit.
enum SmallFile {
    /// The bytes of the regular file at `path` (a link followed), at most `limit`; nil when it is
    /// missing, no regular file (a FIFO, a device, a directory: neither waited on nor read), larger
    /// than `limit`, or, with `owner`, owned by another account.
    static func read(_ path: String, limit: Int, owner: uid_t? = nil) -> [UInt8]? {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) else { return nil }
        // Checked again on what was opened: the name may have been pointed elsewhere meanwhile.
        guard fstat(file.rawValue, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size <= limit else { return nil }
        if let owner, info.st_uid != owner { return nil }
        guard let bytes = try? file.readAll(upTo: limit + 1), bytes.count <= limit else { return nil }
        return bytes
    }

    /// Whether `pid` is a process of this account whose name (/proc/PID/comm) is `name`: a pid read
    /// from a file is believed only for the program that wrote it, never for whatever else runs
    /// under that number (init, another account's process, a recycled pid).
    static func isProcess(_ pid: Int32, named name: String) -> Bool {
        guard pid > 0 else { return false }
        var info = stat()
        guard stat("/proc/\(pid)", &info) == 0, info.st_uid == geteuid(),
              let comm = read("/proc/\(pid)/comm", limit: 64) else { return false }
        return String(decoding: comm, as: UTF8.self).trimmingSuffix("\n") == name
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
