// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import BatonTransport
import Foundation
import Glibc
import Testing
@testable import BatonService

/// The puller keeps to its inbox's cap (DocumentInboxRoom): room for the whole snapshot is made and
/// reserved before a byte is written.
@Suite("BatonServiceTests: a pull keeps to the inbox's cap", .serialized)
struct DocumentInboxCapTests {
    typealias Stream = RedTeamDocumentStreamTests
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("inbox-cap-\(UUID().uuidString)")

    /// Attack: a member whose snapshots keep coming. A document received within the grace period
    /// (the handler may be reading it) leaves no room: the pull is refused before it writes, and the
    /// earlier document stays. Once that document is older, it goes and the pull completes.
    @Test func aPullThatCannotFitIsRefusedBeforeItWritesAndAnOldDocumentMakesRoom() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let content = Stream.content
        let source = try HostileDocumentSourceFake { request, asked, channel in
            try await Stream.send(channel, .documentInfo, request, try Stream.info().payload)
            try await Stream.send(channel, .documentChunk, request, DocumentChunk(offset: asked.offset, data: Array(content[Int(asked.offset)...])).payload)
        }
        defer { source.stop() }
        let inbox = try DocumentInbox(directory: directory.appendingPathComponent("inbox").path, capacity: UInt64(content.count) + 20)
        let earlier = inbox.documentPath(digest: [UInt8](repeating: 0xEE, count: 32))
        try Data(repeating: 1, count: 30).write(to: URL(fileURLWithPath: earlier))
        let ids = RequestIDSource(startingAt: 900)
        let puller = DocumentPuller(inbox: inbox, activity: ActivityReference(typeHash: TypeHash(value: 0xCA9), revision: 1),
                                    chunkTimeout: .seconds(30), maxInterruptions: 1, makeRequestID: { ids.make() })
        let needed = UInt64(30 + content.count)
        await #expect(throws: DocumentPullError.store(.payloadTooLarge(limit: inbox.capacity, actual: needed))) {
            try await puller.pull(connect: source.connect, progress: { _, _ in })
        }
        #expect(inbox.resumeOffset(digest: Stream.digest) == 0, "nothing written")
        #expect(FileManager.default.fileExists(atPath: earlier))

        let hoursAgo = Int(time(nil)) - DocumentInbox.deliveredGrace - 60
        var times = [timespec(tv_sec: hoursAgo, tv_nsec: 0), timespec(tv_sec: hoursAgo, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, earlier, &times, 0) == 0)
        let pulled = try await puller.pull(connect: source.connect, progress: { _, _ in })
        #expect(pulled.info.digest == Stream.digest)
        #expect(!FileManager.default.fileExists(atPath: earlier), "the older document made room")
    }
}
