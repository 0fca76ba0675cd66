// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonSystem
import CGio
#if canImport(Glibc)
import Glibc
#endif

/// The local file a player plays, opened to travel as the media activity's document
/// (docs/media.md, "What travels"): only a regular file, opened without following a symlink and
/// without waiting on a FIFO, checked on the descriptor that is then attached (so what was checked
/// is what is sent), and no larger than publishers.conf's `media-file-limit`.
public enum MediaLocalFile {
    public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        /// The URL names no local path (another host, a malformed escape).
        case notLocal
        /// open(2) failed; ELOOP: the last component is a symlink.
        case cannotOpen(errno: Int32)
        /// A FIFO, a device, a directory, a socket.
        case notRegularFile
        /// Empty, or a file of the kernel's (/proc, /sys): no media, and what is read there is
        /// not what fstat says (/proc/self/environ has size 0 and holds the agent's environment).
        case kernelOrEmpty
        case tooLarge(size: UInt64, limit: UInt64)

        public var description: String {
            switch self {
            case .notLocal: "it is not a file on this machine"
            case .cannotOpen(let code) where code == ELOOP: "it is a symbolic link (only the file itself is sent)"
            case .cannotOpen(let code): "it cannot be opened (\(String(cString: strerror(code))))"
            case .notRegularFile: "it is not a regular file (a pipe, a device or a directory is never sent)"
            case .kernelOrEmpty: "it is empty or one of the kernel's files (/proc, /sys), which are never sent"
            case .tooLarge(let size, let limit):
                "it is \(size >> 20) MiB, over the \(limit >> 20) MiB limit (media-file-limit in publishers.conf, docs/media.md)"
            }
        }
    }

    /// Opens the file the `file:` URL names for reading: O_NOFOLLOW (a symlink in the last
    /// component is refused: ELOOP), O_NONBLOCK (a FIFO's open does not wait for a writer; cleared
    /// again once it is known to be a regular file), then fstat of the descriptor: a regular file
    /// of 1 to `limit` bytes on no kernel file system (/proc, /sys).
    public static func open(url: String, limit: UInt64) throws(Refusal) -> FileDescriptor {
        guard let path = MediaURLPolicy.localFilePath(url) else { throw .notLocal }
        return try open(path: path, limit: limit)
    }

    public static func open(path: String, limit: UInt64) throws(Refusal) -> FileDescriptor {
        let file: FileDescriptor
        do throws(Errno) { file = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY) } catch {
            throw .cannotOpen(errno: error.code)
        }
        var status = stat()
        guard fstat(file.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { throw .notRegularFile }
        let size = UInt64(max(0, status.st_size))
        guard size > 0, !KernelFileSystem.holds(file) else { throw .kernelOrEmpty }
        guard size <= limit else { throw .tooLarge(size: size, limit: limit) }
        let flags = fcntl(file.rawValue, F_GETFL)
        if flags >= 0 { _ = fcntl(file.rawValue, F_SETFL, flags & ~O_NONBLOCK) }
        return file
    }

    /// The media type the shared MIME database gives the file's name (GIO), for the document; the
    /// receiver opens it with its desktop's default player for that type. Unknown:
    /// application/octet-stream.
    public static func mediaType(forName name: String) -> String {
        guard let guessed = g_content_type_guess(name, nil, 0, nil) else { return "application/octet-stream" }
        defer { g_free(guessed) }
        guard let type = g_content_type_get_mime_type(guessed) else { return "application/octet-stream" }
        defer { g_free(type) }
        return String(cString: type)
    }
}
