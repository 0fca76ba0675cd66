// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Foundation
import Glibc
import Testing
@testable import BatonStore

/// The inbox's room policy (DocumentInboxRoom): a cap per user, reserved before a pull writes,
/// oldest first, never a document received within the grace period, partials expire after a day.
@Suite("BatonStore: the inbox keeps within its cap", .serialized)
struct DocumentInboxRoomTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("inbox-room-\(UUID().uuidString)")
    let now = Int(time(nil))

    func place(_ inbox: DocumentInbox, _ tag: UInt8, bytes: Int, partial: Bool = false, age: Int) throws -> [UInt8] {
        let digest = SHA256.hash([tag])
        let path = partial ? inbox.partialPath(digest: digest) : inbox.documentPath(digest: digest)
        try Data(repeating: tag, count: bytes).write(to: URL(fileURLWithPath: path))
        var times = [timespec(tv_sec: now - age, tv_nsec: 0), timespec(tv_sec: now - age, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        return digest
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Attack: a member whose activity is continued again and again, each time with another snapshot.
    /// Found: every snapshot stayed in the inbox (up to 4 GiB each, without end). Now the oldest go
    /// first to keep within the cap, concurrent pulls reserve their whole size, and a pull that
    /// cannot fit is refused before it writes.
    @Test func theOldestGoFirstAndReservationsCountUntilReleased() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let inbox = try DocumentInbox(directory: directory.path, capacity: 100)
        let a = try place(inbox, 1, bytes: 40, age: 7200)
        let b = try place(inbox, 2, bytes: 40, age: 5400)
        let c = try inbox.reserve(digest: SHA256.hash([3]), size: 40)
        #expect(!exists(inbox.documentPath(digest: a)), "the oldest went")
        #expect(exists(inbox.documentPath(digest: b)))
        let d = try inbox.reserve(digest: SHA256.hash([4]), size: 30)
        #expect(!exists(inbox.documentPath(digest: b)), "c's reservation counts as held")
        #expect(throws: SnapshotError.payloadTooLarge(limit: 100, actual: 120)) { try inbox.reserve(digest: SHA256.hash([5]), size: 50) }
        c.release()
        d.release()
        let e = try inbox.reserve(digest: SHA256.hash([5]), size: 50)
        e.release()
    }

    @Test func aDocumentReceivedWithinTheGraceIsKeptAndStalePartialsExpire() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let inbox = try DocumentInbox(directory: directory.path, capacity: 100)
        let fresh = try place(inbox, 1, bytes: 60, age: 60)
        let stale = try place(inbox, 2, bytes: 10, partial: true, age: DocumentInbox.partialLifetime + 60)
        let recent = try place(inbox, 3, bytes: 10, partial: true, age: 600)
        #expect(throws: SnapshotError.payloadTooLarge(limit: 100, actual: 110)) { try inbox.reserve(digest: SHA256.hash([4]), size: 50) }
        #expect(exists(inbox.documentPath(digest: fresh)), "a handler may still be reading it")
        #expect(!exists(inbox.partialPath(digest: stale)), "untouched for a day: expired")
        #expect(exists(inbox.partialPath(digest: recent)), "a refused pull removes nothing")
        // The pull's own partial is its reservation, not extra bytes.
        let own = try inbox.reserve(digest: recent, size: 40)
        #expect(exists(inbox.partialPath(digest: recent)))
        own.release()
        // An interrupted pull's partial (no pull running) goes before a fresh document does.
        let other = try inbox.reserve(digest: SHA256.hash([4]), size: 40)
        other.release()
        #expect(!exists(inbox.partialPath(digest: recent)))
        #expect(exists(inbox.documentPath(digest: fresh)))
    }
}
