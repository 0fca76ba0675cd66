// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonStore
import BatonTransport
import Foundation
import Glibc
import Synchronization
import Testing
@testable import BatonService

/// A Continue dismissed (or abandoned by its caller) while a member drips its snapshot just inside
/// the chunk timeout: the pull itself stops, not only the answer to the caller (security.md).
@Suite("BatonServiceTests: a dismissed Continue stops its document pull", .serialized)
struct DocumentDripCancelTests {
    typealias Stream = RedTeamDocumentStreamTests
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("drip-cancel-\(UUID().uuidString)")

    /// The fake source: one byte a second, inside the puller's chunk timeout (5 s here, so that a
    /// loaded machine does not break it), so the whole snapshot would take 44 s; it notes when it
    /// finds its connection closed.
    static func drippingSource(closed: ClosedConnections) throws -> HostileDocumentSourceFake {
        let content = Stream.content
        return try HostileDocumentSourceFake { request, asked, channel in
            try await Stream.send(channel, .documentInfo, request, try Stream.info().payload)
            for offset in Int(asked.offset)..<content.count {
                do {
                    try await Stream.send(channel, .documentChunk, request, DocumentChunk(offset: UInt64(offset), data: [content[offset]]).payload)
                } catch {
                    closed.count.withLock { $0 += 1 }
                    throw error
                }
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    func partialIsOpen(_ inbox: DocumentInbox) -> Bool {
        let partial = inbox.partialPath(digest: Stream.digest)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return open.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == partial }
    }

    /// Dismiss cancels the Continue's attempt: its caller hears "cancelled" at once, and the pull
    /// running for it ends `cancelled` soon after (not when the drip ends), its connection and partial
    /// file closed and the bytes kept for a resume. Before: the pull went on to the end of the drip.
    @Test func dismissEndsTheDrippingPullWithItsConnectionAndFileClosed() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let closed = ClosedConnections()
        let source = try Self.drippingSource(closed: closed)
        defer { source.stop() }
        let inbox = try DocumentInbox(directory: directory.appendingPathComponent("inbox").path)
        let ids = RequestIDSource(startingAt: 700)
        let received = Mutex<UInt64>(0)
        let pullEnded = Mutex<DocumentPullError?>(nil)
        let attempt = ContinueAttempt()
        let caller = Task {
            await attempt.run { () async -> ContinueEnd in
                let puller = DocumentPuller(inbox: inbox, activity: ActivityReference(typeHash: TypeHash(value: 0xD819), revision: 3),
                                            chunkTimeout: .seconds(5), maxInterruptions: 2, makeRequestID: { ids.make() })
                do throws(DocumentPullError) {
                    _ = try await puller.pull(connect: source.connect, progress: { done, _ in received.withLock { $0 = done } })
                    pullEnded.withLock { $0 = .protocolError("completed") }
                    return .handled(.delivered)
                } catch {
                    pullEnded.withLock { $0 = error }
                    return .failed(.document(error))
                }
            }
        }
        #expect(await eventually(timeout: .seconds(30)) { received.withLock { $0 } >= 3 }, "the drip is under way")
        let connectionsBefore = source.seen.count, closedBefore = closed.count.withLock { $0 }
        attempt.cancel()
        let answer = await caller.value
        guard case .cancelled = answer else { Issue.record("the caller heard \(answer)"); return }
        let dismissed = ContinuousClock.now
        #expect(await eventually(timeout: .seconds(10)) { pullEnded.withLock { $0 } != nil })
        #expect(ContinuousClock.now - dismissed < .seconds(10), "well before the drip's 44 s")
        #expect(pullEnded.withLock { $0 } == .cancelled)
        #expect(ContinuationService.documentFailure(.cancelled).continuationFailure == .cancelled)
        #expect(await eventually(timeout: .seconds(10)) { !partialIsOpen(inbox) }, "the partial file is closed")
        #expect(await eventually(timeout: .seconds(10)) { closed.count.withLock { $0 } > closedBefore }, "the source saw its connection closed")
        #expect(inbox.resumeOffset(digest: Stream.digest) >= 3, "what arrived is kept for a resume")
        try await Task.sleep(for: .seconds(2))
        #expect(source.seen.count == connectionsBefore, "no reconnection after the cancel")
    }

    /// The caller's own task cancelled (its request abandoned) cancels the attempt the same way.
    @Test func anAbandonedCallerCancelsTheWork() async throws {
        let attempt = ContinueAttempt()
        let workCancelled = Mutex(false)
        let caller = Task {
            await attempt.run { () async -> ContinueEnd in
                try? await Task.sleep(for: .seconds(60))
                workCancelled.withLock { $0 = Task.isCancelled }
                return .cancelled
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        caller.cancel()
        guard case .cancelled = await caller.value else { Issue.record("not cancelled"); return }
        #expect(await eventually(timeout: .seconds(10)) { workCancelled.withLock { $0 } })
    }
}

/// The race behind a flaky `anAbandonedCallerCancelsTheWork`: work that ends as soon as it is
/// cancelled answered the caller before the cancel did, so a cancelled Continue was reported as
/// finished. Made certain here: the work's cancellation handler waits until the work has returned.
@Suite("BatonServiceTests: a cancel answers before the cancelled work can")
struct ContinueAttemptCancelOrderTests {
    @Test func aCancelledAttemptAnswersCancelledEvenWhenItsWorkEndsFirst() async throws {
        let returned = Mutex(false)
        // The cancel waits (up to 20 s, on a thread of its own: the work needs a pool thread to
        // return, and a loaded run gave it none within 2 s) until the cancelled work has returned.
        let attempt = ContinueAttempt(afterCancellingWork: {
            for _ in 0..<20_000 where !returned.withLock({ $0 }) { usleep(1_000) }
            usleep(20_000)
        })
        let started = Mutex(false)
        let caller = Task {
            await attempt.run { () async -> ContinueEnd in
                started.withLock { $0 = true }
                try? await Task.sleep(for: .seconds(60))
                returned.withLock { $0 = true }
                return .handled(.delivered)
            }
        }
        #expect(await eventually(timeout: .seconds(10)) { started.withLock { $0 } })
        try await onOwnThread { attempt.cancel() }
        #expect(returned.withLock { $0 }, "the work returned while the cancel was held")
        guard case .cancelled = await caller.value else { Issue.record("a cancelled attempt was reported as finished"); return }
        #expect(!attempt.beginDelivery(), "nothing is delivered after a cancel")
    }
}

/// How many of the fake source's streams found their connection closed.
final class ClosedConnections: Sendable {
    let count = Mutex(0)
}
