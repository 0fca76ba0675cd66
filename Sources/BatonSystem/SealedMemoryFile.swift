// SPDX-License-Identifier: LGPL-2.1-or-later
#if canImport(Glibc)
import Glibc
#endif
import CMemfd

/// Bytes handed between processes as a sealed memory file (memfd_create(2) with write, shrink and grow
/// sealed): the receiver can check that nobody, the sender included, can change them any more, reads
/// them at its own pace with positional reads, and holds no copy of them in its own heap. The
/// clipboard's copies travel this way between baton-agent and batond.
public enum SealedMemoryFile {
    /// A new memory file holding `bytes`, sealed.
    public static func make(name: String, bytes: [UInt8]) throws(Errno) -> FileDescriptor {
        let file = try makeUnsealed(name: name)
        if !bytes.isEmpty { try file.writeAll(bytes) }
        try seal(file)
        return file
    }

    /// A new, empty, sealable memory file: write into it, then `seal` it.
    public static func makeUnsealed(name: String) throws(Errno) -> FileDescriptor {
        let raw = baton_memfd_create(name)
        guard raw >= 0 else { throw Errno.current }
        return FileDescriptor(taking: raw)
    }

    /// Seals `file`: its bytes can no longer change. Its offset goes back to the start, so a reader
    /// that reads on from the offset (it is shared with every copy of the descriptor) gets every byte.
    public static func seal(_ file: borrowing FileDescriptor) throws(Errno) {
        guard baton_memfd_seal(file.rawValue) == 0 else { throw Errno.current }
        guard lseek(file.rawValue, 0, SEEK_SET) == 0 else { throw Errno.current }
    }

    /// The size of a memory file whose bytes can no longer change; nil for any other descriptor
    /// (not a memory file, not sealed against write, shrink and grow).
    public static func immutableSize(of file: borrowing FileDescriptor) -> UInt64? {
        guard baton_memfd_is_immutable(file.rawValue) == 1 else { return nil }
        var status = stat()
        guard fstat(file.rawValue, &status) == 0, status.st_size >= 0 else { return nil }
        return UInt64(status.st_size)
    }
}
