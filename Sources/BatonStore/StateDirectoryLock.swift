// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BatonSystem

/// An exclusive, advisory lock on a state directory, held for the life of the process.
///
/// Two daemons on one directory would seal adverts with the same (epoch, sequence) nonces and
/// overwrite each other's records, so the daemon takes this before it reads anything. The lock is
/// `flock` on a `lock` file in the directory: the kernel drops it when the process dies (kill -9
/// included), so a stale lock can never keep the next start out. The file holds the holder's pid,
/// for the message the second instance prints.
public final class StateDirectoryLock: Sendable {
    public static let fileName = "lock"
    public let path: String
    private let descriptor: FileDescriptor

    /// Takes the lock or throws `directoryInUse` at once (never waits).
    public init(directory: StateDirectory) throws(StoreError) {
        let path = directory.filePath(Self.fileName)
        let descriptor = try Self.openLockFile(in: directory, path: path)
        guard flock(descriptor.rawValue, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            let holder = Self.readHolder(descriptor.rawValue)
            descriptor.close()
            if code == EWOULDBLOCK { throw .directoryInUse(path: directory.path, holder: holder) }
            throw StoreError.system("lock", file: path, errno: code)
        }
        // Record who holds it; a failure here only loses the pid in the other instance's message.
        let pid = Array("\(getpid())\n".utf8)
        if ftruncate(descriptor.rawValue, 0) == 0 {
            _ = pid.withUnsafeBytes { pwrite(descriptor.rawValue, $0.baseAddress, $0.count, 0) }
        }
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        // The flock goes before the descriptor closes (unlockAndClose says why).
        _ = flock(descriptor.rawValue, LOCK_UN)
    }

    private static func openLockFile(in directory: StateDirectory, path: String) throws(StoreError) -> FileDescriptor {
        do throws(Errno) {
            return try FileDescriptor.open(in: directory.directory, fileName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
        } catch { throw StoreError.system("open lock", file: path, errno: error.code) }
    }

    private static func readHolder(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let digits = buffer.prefix(count).prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        return Int32(String(decoding: digits, as: UTF8.self)).flatMap { $0 > 0 ? $0 : nil }
    }
}
