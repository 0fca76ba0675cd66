// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonStore
import BatonTransport
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// Red-team attacks on the receiver's inbox by two pulls of one snapshot at once (two Continues of
/// the same activity by one user, or a retry after Suggestion1.Dismiss while the first pull still runs).
@Suite("BatonServiceTests: red team, one snapshot pulled twice at once", .serialized)
struct RedTeamDocumentInboxTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-inbox-\(UUID().uuidString)")
    static let chunk = DocumentChunk.maxDataBytes

    /// Attack: while a first pull is part way, a second pull of the same snapshot resumes from the
    /// partial file's length and opens it, truncating it to that length, while the first goes on
    /// writing further on; the first then completes, its stream hashing right, and renames a file
    /// with a hole of zeros into place as the checked document. Found: the document delivered did not
    /// match its digest. Fixed: a pull holds its partial file exclusively (flock); a second pull of the
    /// same snapshot never touches it (it waits for the first, here until the first's 3 s without
    /// progress end it), and the first arrives whole.
    @Test func aSecondPullOfTheSameSnapshotCannotCorruptTheFirst() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var bytes = [UInt8](repeating: 0, count: 8 * Self.chunk)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ 7) | 1 }
        let content = bytes
        let info = try DocumentInfo(totalSize: UInt64(bytes.count), digest: SHA256.hash(bytes), mediaType: "text/plain", documentID: "twice")
        // Gates the source waits on: the first pull's middle chunks, then its last ones.
        let gates = Mutex((middle: false, last: false))
        let served = Mutex(0)
        @Sendable func wait(_ open: @Sendable @escaping () -> Bool) async throws {
            while !open() { try await Task.sleep(for: .milliseconds(20)) }
        }
        @Sendable func chunks(_ range: Range<Int>, _ request: Frame, _ channel: SecureChannel) async throws {
            for index in range {
                let data = Array(content[(index * Self.chunk)..<((index + 1) * Self.chunk)])
                try await channel.send(Frame(type: .documentChunk, requestID: request.requestID,
                                             payload: DocumentChunk(offset: UInt64(index * Self.chunk), data: data).payload))
            }
        }
        let source = try HostileDocumentSourceFake { request, _, channel in
            let number = served.withLock { $0 += 1; return $0 }
            switch number {
            case 1:
                // The first pull: half the snapshot, then two chunks more, then the rest.
                try await channel.send(Frame(type: .documentInfo, requestID: request.requestID, payload: info.payload))
                try await chunks(0..<4, request, channel)
                try await wait { gates.withLock { $0.middle } }
                try await chunks(4..<6, request, channel)
                try await wait { gates.withLock { $0.last } }
                try await chunks(6..<8, request, channel)
            case 2:
                // The second pull's first request: it learns the digest and asks from the partial's length.
                try await channel.send(Frame(type: .documentInfo, requestID: request.requestID, payload: info.payload))
            case 3:
                // Its resume: let the first pull write on, then answer, then let the first finish.
                gates.withLock { $0.middle = true }
                try await Task.sleep(for: .milliseconds(700))
                try await channel.send(Frame(type: .documentInfo, requestID: request.requestID, payload: info.payload))
                try await Task.sleep(for: .milliseconds(700))
                gates.withLock { $0.last = true }
                try await Task.sleep(for: .seconds(10))
            default:
                try await Task.sleep(for: .seconds(10))
            }
        }
        defer { source.stop() }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let inbox = try DocumentInbox(directory: directory.appendingPathComponent("inbox").path)
        let ids = RequestIDSource(startingAt: 900)
        let reference = ActivityReference(typeHash: TypeHash(value: 0x7777_0001), revision: 2)
        let first = DocumentPuller(inbox: inbox, activity: reference, chunkTimeout: .seconds(30), maxInterruptions: 0, makeRequestID: { ids.make() })
        let second = DocumentPuller(inbox: inbox, activity: reference, chunkTimeout: .seconds(3), maxInterruptions: 0, makeRequestID: { ids.make() })

        let firstPull = Task { try await first.pull(connect: source.connect, progress: { _, _ in }) }
        #expect(await eventually(timeout: .seconds(60)) { inbox.resumeOffset(digest: info.digest) >= UInt64(4 * Self.chunk) })
        let secondOutcome: Result<PulledDocument, DocumentPullError>
        do throws(DocumentPullError) { secondOutcome = .success(try await second.pull(connect: source.connect, progress: { _, _ in })) } catch {
            secondOutcome = .failure(error)
        }
        gates.withLock { $0 = (true, true) }
        let pulled = try await firstPull.value
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: pulled.path))) == bytes, "the document delivered is the one its digest names")
        if case .success(let other) = secondOutcome {
            #expect(try Array(Data(contentsOf: URL(fileURLWithPath: other.path))) == bytes)
        }
    }
}
