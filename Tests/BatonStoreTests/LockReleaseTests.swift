// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Foundation
import Glibc
import Testing
@testable import BatonStore

/// A child process, between its start and its exec, refers to every open file of its parent, locks
/// included (O_CLOEXEC closes them only at exec). A lock let go by closing the descriptor stayed
/// held that long: in host test runs that start programs beside pulls, the next pull of a suspended
/// snapshot was refused as already running, and a locked partial file could not be evicted after
/// its pull stopped. Locks are now let go explicitly. Here a second descriptor of the same open file
/// (`dup`, as the child's copy) stands for that child.
@Suite("BatonStoreTests: locks let go while another descriptor refers to the file")
struct LockReleaseTests {
    /// A duplicate of this process's descriptor open on `path`, nil if none is.
    static func duplicateDescriptor(of path: String) -> Int32? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for entry in entries {
            guard let fd = Int32(entry),
                  (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)")) == path else { continue }
            let copy = dup(fd)
            return copy >= 0 ? copy : nil
        }
        return nil
    }

    @Test func aSuspendedPullsLockIsFreeAlthoughAChildStillRefersToItsFile() throws {
        let root = try makeScratchDirectory("lock-release")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let inbox = try DocumentInbox(directory: root + "/inbox")
        let digest = SHA256.hash([1, 2, 3])
        let partial = try inbox.open(digest: digest, offset: 0)
        try [UInt8](repeating: 7, count: 100).withUnsafeBytes { try partial.append($0) }
        let child = try #require(Self.duplicateDescriptor(of: inbox.partialPath(digest: digest)))
        defer { close(child) }
        partial.suspend()
        #expect(!inbox.pullRunning(digest: digest))
        let resumed = try inbox.open(digest: digest, offset: 100)
        resumed.suspend()
    }

    @Test func theStateDirectoryLockIsFreeWithItsHolderAlthoughAChildStillRefersToItsFile() throws {
        let path = scratchPath("lock-release")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try StateDirectory(path: path)
        var child: Int32 = -1
        try withExtendedLifetime(try StateDirectoryLock(directory: directory)) {
            child = try #require(Self.duplicateDescriptor(of: path + "/" + StateDirectoryLock.fileName))
        }
        defer { close(child) }
        _ = try StateDirectoryLock(directory: StateDirectory(path: path))
    }
}
