// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Foundation
import Glibc
import Testing
@testable import BatonStore

@Suite("BatonStore: document snapshots (caps, atomic commits, a full disk) and the inbox", .serialized)
struct SnapshotStoreTests {
    let root: String

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("snapshots-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    func source(_ bytes: [UInt8], named name: String = "source") throws -> Int32 {
        try FileManager.default.createDirectory(atPath: root + "/apps", withIntermediateDirectories: true)
        let path = root + "/apps/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let descriptor = open(path, O_RDONLY)
        #expect(descriptor >= 0)
        return descriptor
    }

    func bytes(_ count: Int, _ seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) } }

    func entries(_ path: String) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }

    @Test func aCommitCopiesHashesAndKeepsTheSnapshotPrivate() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let store = try SnapshotStore(directory: root + "/documents", perDocumentLimit: 10 << 20, perUserLimit: 20 << 20)
        let content = bytes(3 * SnapshotStore.blockSize + 77, 1)
        let descriptor = try source(content)
        defer { close(descriptor) }
        // The app's offset does not matter: the whole file is the snapshot.
        lseek(descriptor, 1000, SEEK_SET)
        let stored = try store.commit(from: descriptor, uid: 1000, name: "a1-1")
        #expect(stored.size == UInt64(content.count))
        #expect(stored.digest == SHA256.hash(content))
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: stored.path))) == content)
        let fileMode = try FileManager.default.attributesOfItem(atPath: stored.path)[.posixPermissions] as? Int
        let directoryMode = try FileManager.default.attributesOfItem(atPath: root + "/documents/1000")[.posixPermissions] as? Int
        #expect(fileMode == 0o600 && directoryMode == 0o700)
        #expect(entries(root + "/documents/1000") == ["a1-1"])
    }

    @Test func theCapsRefuseBeforeCopyingAndKeepThePreviousSnapshot() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let store = try SnapshotStore(directory: root + "/documents", perDocumentLimit: 1000, perUserLimit: 1500)
        let first = try source(bytes(800, 2), named: "first")
        defer { close(first) }
        let kept = try store.commit(from: first, uid: 7, name: "a1-1")
        let large = try source(bytes(1001, 3), named: "large")
        defer { close(large) }
        #expect(throws: SnapshotError.payloadTooLarge(limit: 1000, actual: 1001)) { try store.commit(from: large, uid: 7, name: "a1-2", replacing: "a1-1") }
        // Another activity of the same user: only 700 bytes are left of the user's 1500.
        let second = try source(bytes(701, 4), named: "second")
        defer { close(second) }
        #expect(throws: SnapshotError.payloadTooLarge(limit: 700, actual: 701)) { try store.commit(from: second, uid: 7, name: "a2-1") }
        // Replacing its own snapshot, an activity does not count the one it replaces.
        _ = try store.commit(from: second, uid: 7, name: "a1-2", replacing: "a1-1")
        // Nothing was copied for the refusals: no temporary file, the earlier snapshot intact.
        #expect(entries(root + "/documents/7") == ["a1-1", "a1-2"])
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: kept.path))) == bytes(800, 2))
        // Another user has a cap of their own.
        _ = try store.commit(from: first, uid: 8, name: "a3-1")
    }

    @Test func onlyARegularFileCanBeASnapshot() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let store = try SnapshotStore(directory: root + "/documents", perDocumentLimit: 1000, perUserLimit: 1000)
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        #expect(throws: SnapshotError.notARegularFile) { try store.commit(from: ends[0], uid: 1, name: "a1-1") }
        #expect(throws: SnapshotError.invalidName("../x")) { try store.commit(from: ends[0], uid: 1, name: "../x") }
    }

    /// A real full disk: a 1 MiB tmpfs (root only; the test says so when it cannot mount).
    @Test func aFullDiskIsATypedErrorAndThePreviousSnapshotSurvives() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let mountPoint = root + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard mount("tmpfs", mountPoint, "tmpfs", 0, "size=1m,mode=0700") == 0 else {
            Issue.record("cannot mount a tmpfs (errno \(errno)): this test needs root")
            return
        }
        defer { umount2(mountPoint, Int32(MNT_DETACH)) }
        let store = try SnapshotStore(directory: mountPoint + "/documents", perDocumentLimit: 8 << 20, perUserLimit: 8 << 20)
        let small = try source(bytes(300_000, 5), named: "small")
        defer { close(small) }
        let kept = try store.commit(from: small, uid: 1, name: "a1-1")
        let big = try source(bytes(900_000, 6), named: "big")
        defer { close(big) }
        #expect(throws: SnapshotError.diskFull) { try store.commit(from: big, uid: 1, name: "a1-2", replacing: "a1-1") }
        #expect(entries(mountPoint + "/documents/1") == ["a1-1"])
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: kept.path))) == bytes(300_000, 5))
    }

    @Test func theInboxResumesFromThePartialAndRefusesAWrongDigest() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let inbox = try DocumentInbox(directory: root + "/inbox")
        let content = bytes(5000, 9)
        let digest = SHA256.hash(content)
        #expect(inbox.resumeOffset(digest: digest) == 0)
        let first = try inbox.open(digest: digest, offset: 0)
        try content[0..<1200].withUnsafeBytes { try first.append($0) }
        first.suspend()
        #expect(inbox.resumeOffset(digest: digest) == 1200)
        let second = try inbox.open(digest: digest, offset: 1200)
        try content[1200...].withUnsafeBytes { try second.append($0) }
        let path = try second.finish()
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == content)
        #expect(inbox.received(digest: digest) == path)

        let other = SHA256.hash([1, 2, 3])
        let wrong = try inbox.open(digest: other, offset: 0)
        try content.withUnsafeBytes { try wrong.append($0) }
        #expect(throws: SnapshotError.digestMismatch) { try wrong.finish() }
        #expect(inbox.resumeOffset(digest: other) == 0 && inbox.received(digest: other) == nil)
    }

    @Test func hashingAndWritingAtOffsetsFromTwoThreadsGiveTheSameDocumentAsAppending() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let inbox = try DocumentInbox(directory: root + "/inbox")
        let content = bytes(300_000, 4)
        let digest = SHA256.hash(content)
        // Kept from an interrupted pull, then resumed with the split path (as DocumentPuller does).
        let first = try inbox.open(digest: digest, offset: 0)
        try content[0..<70_000].withUnsafeBytes { try first.append($0) }
        first.suspend()
        let partial = try inbox.open(digest: digest, offset: 70_000)
        var offset = 70_000
        while offset < content.count {
            let piece = Array(content[offset..<min(offset + 65_536, content.count)])
            let at = UInt64(offset)
            async let hashed: Void = Task.detached { piece.withUnsafeBytes { partial.updateDigest(with: $0) } }.value
            async let written: Void = Task.detached { try piece.withUnsafeBytes { try partial.write($0, at: at) } }.value
            _ = await hashed
            try await written
            offset += piece.count
        }
        let path = try partial.finish()
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == content)

        // The digest covers what was hashed, whatever was written: a wrong byte hashed is refused.
        let again = SHA256.hash(content + [1])
        let refused = try inbox.open(digest: again, offset: 0)
        try (content + [2]).withUnsafeBytes { bytes in
            refused.updateDigest(with: bytes)
            try refused.write(bytes, at: 0)
        }
        #expect(throws: SnapshotError.digestMismatch) { try refused.finish() }
        #expect(inbox.received(digest: again) == nil)
    }
}
