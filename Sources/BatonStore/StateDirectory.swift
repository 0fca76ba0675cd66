// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BatonSystem
import Synchronization

/// The daemon's private directory of durable state, one file per concern.
///
/// Opening it creates the directory (mode 0700, parents too) when missing, refuses a directory that
/// is not ours or is group/world-writable, takes the group and other bits off an existing one of
/// ours that others can read or enter (0755 becomes 0700), and deletes temporary files a crashed writer left behind.
/// All file operations go through a descriptor held open on the directory (`openat` and friends), so
/// swapping the path for another directory later cannot redirect our writes.
///
/// Keep one instance per directory in a process: its lock serialises every write into the directory.
public final class StateDirectory: Sendable {
    /// Names of in-flight temporary files start with this; no record name may (names cannot start with ".").
    public static let temporaryPrefix = ".tmp-"
    /// Largest file a read accepts, so a hostile or runaway file cannot exhaust memory.
    public static let maximumFileSize = 16 * 1024 * 1024

    public let path: String
    /// Temporary files left by an interrupted writer and removed when this instance was opened.
    public let removedStaleFiles: [String]

    /// The directory, held open: every file operation goes through it (`openat` and friends).
    let directory: FileDescriptor
    var descriptor: Int32 { directory.rawValue }
    /// Serialises writers in this process: the check-then-replace of `DurableRecord.save` and the
    /// read-modify-write of `Journal` must not interleave.
    let writeLock = Mutex<Void>(())

    public init(path: String) throws(StoreError) {
        guard !path.isEmpty else { throw .invalidName(path) }
        let created = try Self.createDirectory(path)
        let directory: FileDescriptor
        do throws(Errno) { directory = try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } catch {
            throw StoreError.system("open directory", file: path, errno: error.code)
        }
        // A failure below closes the directory again (its owner goes).
        if created {
            // mkdir's mode is filtered by the umask; make it exactly 0700.
            guard fchmod(directory.rawValue, 0o700) == 0 else {
                throw StoreError.system("chmod directory", file: path, errno: errno)
            }
        }
        try Self.checkOwnershipAndTighten(descriptor: directory.rawValue, path: path)
        self.removedStaleFiles = try Self.removeStaleTemporaryFiles(descriptor: directory.rawValue, path: path)
        self.path = path
        self.directory = directory
    }

    /// Full path of a file in this directory, for error messages.
    func filePath(_ name: String) -> String {
        path.hasSuffix("/") ? path + name : path + "/" + name
    }

    /// Accepts only plain names: letters, digits, ".", "_", "-"; not starting with "."; at most 128 bytes.
    static func validate(name: String) throws(StoreError) {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 128, bytes[0] != UInt8(ascii: ".") else { throw .invalidName(name) }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                continue
            default:
                throw .invalidName(name)
            }
        }
    }

    /// Returns true if the final directory was created by this call.
    private static func createDirectory(_ path: String) throws(StoreError) -> Bool {
        if mkdir(path, 0o700) == 0 { return true }
        let code = errno
        switch code {
        case EEXIST:
            return false
        case ENOENT:
            let parent = parentPath(of: path)
            guard !parent.isEmpty, parent != path else { throw .system("mkdir", file: path, errno: code) }
            _ = try createDirectory(parent)
            if mkdir(path, 0o700) == 0 { return true }
            if errno == EEXIST { return false }
            throw .system("mkdir", file: path, errno: errno)
        default:
            throw .system("mkdir", file: path, errno: code)
        }
    }

    private static func parentPath(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        let parent = trimmed[..<slash]
        return parent.isEmpty ? "/" : String(parent)
    }

    private static func checkOwnershipAndTighten(descriptor: Int32, path: String) throws(StoreError) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw .system("stat directory", file: path, errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw .insecureDirectory(path: path, reason: "not a directory")
        }
        guard info.st_uid == geteuid() else {
            throw .insecureDirectory(path: path, reason: "owned by uid \(info.st_uid), not by uid \(geteuid())")
        }
        let permissions = UInt32(info.st_mode) & 0o7777
        guard permissions & 0o022 == 0 else {
            // Others could have planted or swapped files already: refuse rather than trust them.
            throw .insecureDirectory(path: path, reason: "mode \(octal(permissions)) is group- or world-writable")
        }
        // Merely readable (made by hand under the usual umask, or pre-created by an image): ours,
        // so take the group and other bits away before anything is read or written (0755 becomes
        // 0700; the owner's bits stay), or refuse when that fails.
        if permissions & 0o077 != 0 {
            let tightened = permissions & 0o7700
            guard fchmod(descriptor, mode_t(tightened)) == 0 else {
                let code = errno
                throw .insecureDirectory(path: path, reason: "mode \(octal(permissions)) is readable by others and could not be tightened to \(octal(tightened)) (errno \(code))")
            }
        }
    }

    private static func removeStaleTemporaryFiles(descriptor: Int32, path: String) throws(StoreError) -> [String] {
        // fdopendir takes ownership of the descriptor it is given, so give it a duplicate.
        let duplicate = dup(descriptor)
        guard duplicate >= 0 else { throw .system("dup directory", file: path, errno: errno) }
        let listing = FileDescriptor(taking: duplicate)
        guard let stream = fdopendir(listing.rawValue) else { throw .system("list directory", file: path, errno: errno) }
        // closedir closes it now.
        _ = listing.release()
        defer { closedir(stream) }
        var stale: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name.hasPrefix(temporaryPrefix) { stale.append(name) }
        }
        for name in stale where unlinkat(descriptor, name, 0) != 0 && errno != ENOENT {
            throw .system("remove stale temporary file", file: path + "/" + name, errno: errno)
        }
        if !stale.isEmpty, fsync(descriptor) != 0 {
            throw .system("fsync directory", file: path, errno: errno)
        }
        return stale.sorted()
    }
}

func octal(_ mode: UInt32) -> String {
    let digits = String(mode, radix: 8)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
