// SPDX-License-Identifier: LGPL-2.1-or-later
#if canImport(Glibc)
import Glibc
#endif
import CMemfd

/// What `fstat(2)` says of an open file, enough to tell whether it is still the file it was: the same
/// inode on the same device, the same size, and neither its contents (mtime) nor its inode (ctime,
/// which no program can set back) changed. The clipboard's copies of files (docs/clipboard.md, "Files").
public struct FileIdentity: Hashable, Sendable {
    public enum Kind: Hashable, Sendable { case regular, directory, other }

    public var device: UInt64
    public var inode: UInt64
    public var kind: Kind
    public var size: UInt64
    public var modifiedSeconds: Int64
    public var modifiedNanoseconds: Int64
    public var changedSeconds: Int64
    public var changedNanoseconds: Int64
    /// Hard links to it; 0 once it was removed from every directory.
    public var links: UInt64

    public init(device: UInt64, inode: UInt64, kind: Kind, size: UInt64, modifiedSeconds: Int64, modifiedNanoseconds: Int64,
                changedSeconds: Int64, changedNanoseconds: Int64, links: UInt64) {
        self.device = device
        self.inode = inode
        self.kind = kind
        self.size = size
        self.modifiedSeconds = modifiedSeconds
        self.modifiedNanoseconds = modifiedNanoseconds
        self.changedSeconds = changedSeconds
        self.changedNanoseconds = changedNanoseconds
        self.links = links
    }

    /// The open file's identity; nil when fstat fails.
    public init?(of file: borrowing FileDescriptor) {
        var status = stat()
        guard fstat(file.rawValue, &status) == 0 else { return nil }
        let type = status.st_mode & S_IFMT
        self.init(device: UInt64(status.st_dev), inode: UInt64(status.st_ino),
                  kind: type == S_IFREG ? .regular : type == S_IFDIR ? .directory : .other, size: UInt64(max(status.st_size, 0)),
                  modifiedSeconds: Int64(status.st_mtim.tv_sec), modifiedNanoseconds: Int64(status.st_mtim.tv_nsec),
                  changedSeconds: Int64(status.st_ctim.tv_sec), changedNanoseconds: Int64(status.st_ctim.tv_nsec),
                  links: UInt64(status.st_nlink))
    }

    /// The same file with the same contents: nothing but the link count (and the access time) may differ.
    public func isUnchanged(from earlier: FileIdentity) -> Bool {
        var now = self
        now.links = earlier.links
        return now == earlier
    }
}

extension FileDescriptor {
    /// `open(2)` of a path given as bytes (a Linux path need not be UTF-8); a NUL in it is EINVAL.
    public static func open(pathBytes path: [UInt8], _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        guard !path.contains(0) else { throw Errno(EINVAL) }
        let descriptor = retryingInterrupts { (path + [0]).withUnsafeBufferPointer { Glibc.open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), flags, mode) } }
        guard descriptor >= 0 else { throw .current }
        return FileDescriptor(taking: descriptor)
    }

    /// Copies `count` bytes from the start of `source` to this descriptor's position, in the kernel
    /// where it can (copy_file_range(2); a reflink on file systems that share extents), else through a
    /// buffer. Fails when `source` ends early.
    public func copyAll(from source: borrowing FileDescriptor, count: UInt64) throws(Errno) {
        var input: Int64 = 0
        var copied: UInt64 = 0
        var inKernel = true
        while copied < count {
            let want = Int(min(count - copied, 1 << 30))
            if inKernel {
                let moved = retryingInterrupts { baton_copy_file_range(source.rawValue, &input, rawValue, UInt(want)) }
                if moved > 0 {
                    copied += UInt64(moved)
                    continue
                }
                guard moved < 0, [EXDEV, ENOSYS, EINVAL, EOPNOTSUPP, EPERM].contains(errno) else {
                    if moved == 0 { throw Errno(EIO) }
                    throw .current
                }
                inKernel = false
            }
            var buffer = [UInt8](repeating: 0, count: min(want, 1 << 20))
            let read = try buffer.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try source.read(into: raw, at: copied) } }.get()
            guard read > 0 else { throw Errno(EIO) }
            try buffer.withUnsafeBytes { raw in Result { () throws(Errno) in try writeAll(UnsafeRawBufferPointer(rebasing: raw[..<read])) } }.get()
            copied += UInt64(read)
            input = Int64(copied)
        }
    }
}

/// The file systems of the kernel's own files (statfs(2) f_type), which read as something else than
/// fstat says: /proc/self/environ has size 0 and holds the reader's environment.
public enum KernelFileSystem {
    /// proc, sysfs, debugfs, securityfs, tracefs, configfs, efivarfs, cgroup, cgroup2.
    static let types: Set<Int64> = [0x9FA0, 0x6265_6572, 0x6462_6720, 0x7363_6673, 0x7472_6163, 0x6265_6570,
                                    0xDE5E_81E4, 0x0027_E0EB, 0x6367_7270]

    /// Whether the open file is on one of them; true when that cannot be told.
    public static func holds(_ file: borrowing FileDescriptor) -> Bool {
        let type = baton_file_system_type(file.rawValue)
        return type < 0 || types.contains(type)
    }
}
