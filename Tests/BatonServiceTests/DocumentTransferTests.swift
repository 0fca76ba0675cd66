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

/// A FetchDocument source over real pinned TLS on loopback that can misbehave on purpose: it cuts
/// its first `cutConnections` streams after `cutAfterChunks` chunks (closing the channel, as a
/// source that dies), and serves `corruptedPath` instead of the real file on its first
/// `corruptConnections` streams; with `memberForBatches` the peer is removed from its ring once that
/// many batches of chunks went out (refused from then on, as a source after §7.4's removal). A fake
/// of a daemon's source side; the sender and puller are real.
final class MisbehavingDocumentSourceFake: Sendable {
    struct Plan: Sendable {
        var cutConnections = 0
        var cutAfterChunks = 0
        var corruptConnections = 0
        var corruptedPath: String?
        var memberForBatches: Int?
    }

    let listener: TLSListener
    let connector: TLSConnector
    let document: AttachedDocument
    let plan: Plan
    private let requests = Mutex<[DocumentRequest]>([])
    /// Membership checks answered so far (the sender asks before each batch).
    private let membershipChecks = Mutex(0)
    private let acceptTask = Mutex<Task<Void, Never>?>(nil)

    init(document: AttachedDocument, plan: Plan) throws {
        let server = try Ed25519PrivateKey(), client = try Ed25519PrivateKey()
        listener = try TLSListener(identity: server, pins: { PinSet([client.publicKey]) }, host: "127.0.0.1", port: 0)
        connector = try TLSConnector(identity: client, pins: { PinSet([server.publicKey]) })
        self.document = document
        self.plan = plan
        let dispatcher = FrameDispatcher(streamedTypes: [.fetchDocument], streamer: { [self] request, channel in
            try await self.stream(request, on: channel)
        }) { request, _ in request }
        let task = Task { [listener] in
            while let channel = try? await listener.accept() {
                Task { _ = await dispatcher.serve(channel) }
            }
        }
        acceptTask.withLock { $0 = task }
    }

    /// The FetchDocument requests seen, in order.
    var seen: [DocumentRequest] { requests.withLock { $0 } }

    private var removed: Bool { plan.memberForBatches.map { limit in membershipChecks.withLock { $0 >= limit } } ?? false }

    private func stillMember() -> Bool {
        guard let limit = plan.memberForBatches else { return true }
        return membershipChecks.withLock { checks in
            checks += 1
            return checks <= limit
        }
    }

    private func stream(_ request: Frame, on channel: SecureChannel) async throws {
        let asked = try DocumentRequest(payload: request.payload)
        let number = requests.withLock { $0.append(asked); return $0.count }
        guard !removed else { throw ErrorFrame(code: .notPermitted, message: "not a ring member") }
        var served = document
        if number <= plan.corruptConnections, let corrupted = plan.corruptedPath { served.path = corrupted }
        if number <= plan.cutConnections {
            try await DocumentSender.stream(served, for: asked, requestID: request.requestID, on: channel,
                                            stillMember: { [self] in stillMember() }, atMost: plan.cutAfterChunks)
            channel.close()
            throw TransportError.closed
        }
        try await DocumentSender.stream(served, for: asked, requestID: request.requestID, on: channel, stillMember: { [self] in stillMember() })
    }

    /// Connects, says Hello, sends the request and returns the first reply, as the transfer does.
    func connect(_ request: Frame) async throws(TransportError) -> (channel: SecureChannel, reply: Frame) {
        let channel = try await connector.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(30))
        let exchange = FrameExchange(channel: channel)
        do {
            _ = try await exchange.request(Frame(type: .hello, requestID: 0, payload: []), timeout: .seconds(30))
            return (channel, try await exchange.request(request, timeout: .seconds(30)))
        } catch {
            channel.close()
            throw error
        }
    }

    func stop() {
        acceptTask.withLock { $0?.cancel() }
        listener.close()
    }
}

@Suite("BatonServiceTests: documents pulled over pinned TLS, cut, corrupted and resumed")
struct DocumentTransferTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("documents-\(UUID().uuidString)")
    static let chunk = DocumentChunk.maxDataBytes

    /// A snapshot of `size` pseudo-random bytes in the source's store, and its wire description.
    func makeSnapshot(size: Int, seed: UInt8 = 7) throws -> (AttachedDocument, [UInt8]) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let bytes = documentBytes(count: size, seed: UInt32(seed) &* 2_654_435_761)
        let path = directory.appendingPathComponent("source-\(seed)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let info = try DocumentInfo(totalSize: UInt64(size), digest: SHA256.hash(bytes), mediaType: "application/pdf", documentID: "report-7")
        return (AttachedDocument(path: path, info: info), bytes)
    }

    func makePuller(maxInterruptions: Int = 4, chunkTimeout: Duration = .seconds(30)) throws -> (DocumentPuller, DocumentInbox) {
        let inbox = try DocumentInbox(directory: directory.appendingPathComponent("inbox").path)
        let ids = RequestIDSource(startingAt: 100)
        return (DocumentPuller(inbox: inbox, activity: ActivityReference(typeHash: TypeHash(value: 0x1234_5678), revision: 3),
                               chunkTimeout: chunkTimeout, maxInterruptions: maxInterruptions, makeRequestID: { ids.make() }), inbox)
    }

    func inboxFiles(_ inbox: DocumentInbox) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: inbox.directory).sorted()
    }

    @Test func aStreamCutBySourceResumesFromItsOffsetAndArrivesWhole() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, bytes) = try makeSnapshot(size: 10 * Self.chunk + 1234)
        let source = try MisbehavingDocumentSourceFake(document: document, plan: .init(cutConnections: 2, cutAfterChunks: 3))
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        let seenProgress = Mutex<[UInt64]>([])
        let pulled = try await puller.pull(connect: source.connect, progress: { received, total in
            #expect(total == UInt64(bytes.count))
            seenProgress.withLock { $0.append(received) }
        })
        #expect(pulled.info == document.info)
        #expect(pulled.resumes == 2)
        #expect(pulled.resumedBytes == 0, "every byte came over the network in this pull")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: pulled.path))) == bytes)
        // First any snapshot from 0; then the digest learned, from where each cut left the partial file.
        let offsets = source.seen.map(\.offset)
        #expect(offsets == [0, UInt64(3 * Self.chunk), UInt64(6 * Self.chunk)])
        #expect(source.seen.first?.asksForAnySnapshot == true)
        #expect(source.seen.dropFirst().allSatisfy { $0.digest == document.info.digest })
        #expect(seenProgress.withLock { $0.last } == UInt64(bytes.count))
        // One imported document, no partial left behind, private to the user.
        #expect(try inboxFiles(inbox) == [document.info.digest.hexString + ".document"])
        let mode = try FileManager.default.attributesOfItem(atPath: pulled.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    /// A lab run failed a Continue with "another pull of this snapshot is running": a journalled claim
    /// replayed at a sighting pulled the same snapshot. A second pull waits for the first and takes
    /// its document, without pulling it again.
    @Test func aPullWaitsForAnotherPullOfTheSameSnapshotAndTakesItsDocument() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, bytes) = try makeSnapshot(size: 6 * Self.chunk + 77)
        let source = try MisbehavingDocumentSourceFake(document: document, plan: .init())
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        // The other pull: holds the partial file, has written two chunks.
        let other = try inbox.open(digest: document.info.digest, offset: 0)
        bytes[0..<(2 * Self.chunk)].withUnsafeBytes { try? other.append($0) }
        #expect(inbox.pullRunning(digest: document.info.digest))
        let pulling = Task { try await puller.pull(connect: source.connect, progress: { _, _ in }) }
        try await Task.sleep(for: .milliseconds(300))
        bytes[(2 * Self.chunk)...].withUnsafeBytes { try? other.append($0) }
        let finished = try other.finish()
        #expect(!inbox.pullRunning(digest: document.info.digest))
        let pulled = try await pulling.value
        #expect(pulled.path == finished)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: pulled.path))) == bytes)
        #expect(source.seen.count == 1, "only the first request, which named the snapshot: nothing pulled twice")
        #expect(try inboxFiles(inbox) == [document.info.digest.hexString + ".document"])
    }

    /// The other pull stops part way (its connection broke): the waiting pull resumes its partial file.
    @Test func aPullResumesWhereAnotherPullOfTheSameSnapshotStopped() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, bytes) = try makeSnapshot(size: 6 * Self.chunk + 77)
        let source = try MisbehavingDocumentSourceFake(document: document, plan: .init())
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        let other = try inbox.open(digest: document.info.digest, offset: 0)
        let pulling = Task { try await puller.pull(connect: source.connect, progress: { _, _ in }) }
        try await Task.sleep(for: .milliseconds(200))
        bytes[0..<(4 * Self.chunk)].withUnsafeBytes { try? other.append($0) }
        other.suspend()
        let pulled = try await pulling.value
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: pulled.path))) == bytes)
        #expect(source.seen.map(\.offset) == [0, UInt64(4 * Self.chunk)])
        #expect(pulled.resumedBytes == UInt64(4 * Self.chunk))
    }

    /// Another pull that writes nothing more for a chunk timeout is given up on, with a clear error.
    @Test func aPullStopsWaitingForAnotherPullThatMakesNoProgress() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, _) = try makeSnapshot(size: 3 * Self.chunk)
        let source = try MisbehavingDocumentSourceFake(document: document, plan: .init())
        defer { source.stop() }
        let (puller, inbox) = try makePuller(chunkTimeout: .milliseconds(400))
        let other = try inbox.open(digest: document.info.digest, offset: 0)
        defer { other.suspend() }
        await #expect(throws: DocumentPullError.self) { _ = try await puller.pull(connect: source.connect, progress: { _, _ in }) }
        do {
            _ = try await puller.pull(connect: source.connect, progress: { _, _ in })
        } catch {
            guard case .interrupted(let why) = error else { Issue.record("\(error)"); return }
            #expect(why.contains("another pull"))
        }
    }

    @Test func aCorruptedChunkIsRefusedAtTheDigestAndPulledAgain() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, bytes) = try makeSnapshot(size: 4 * Self.chunk)
        var damaged = bytes
        damaged[2 * Self.chunk + 17] ^= 0x40
        let corrupted = directory.appendingPathComponent("corrupted").path
        try Data(damaged).write(to: URL(fileURLWithPath: corrupted))
        let source = try MisbehavingDocumentSourceFake(document: document, plan: .init(corruptConnections: 1, corruptedPath: corrupted))
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        let pulled = try await puller.pull(connect: source.connect, progress: { _, _ in })
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: pulled.path))) == bytes)
        // The damaged copy was dropped and the whole snapshot asked again from 0.
        #expect(source.seen.map(\.offset) == [0, 0])
        #expect(try inboxFiles(inbox) == [document.info.digest.hexString + ".document"])
    }

    @Test func bytesThatNeverMatchTheirDigestAreRefusedAndNothingIsImported() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, bytes) = try makeSnapshot(size: 2 * Self.chunk + 5)
        var damaged = bytes
        damaged[0] ^= 1
        let corrupted = directory.appendingPathComponent("corrupted").path
        try Data(damaged).write(to: URL(fileURLWithPath: corrupted))
        let source = try MisbehavingDocumentSourceFake(document: document, plan: .init(corruptConnections: 99, corruptedPath: corrupted))
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        await #expect(throws: DocumentPullError.digestMismatch) { try await puller.pull(connect: source.connect, progress: { _, _ in }) }
        #expect(try inboxFiles(inbox).isEmpty)
    }

    @Test func anInterruptedPullLeavesItsPartialAndTheNextPullResumesIt() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, bytes) = try makeSnapshot(size: 8 * Self.chunk)
        let cutting = try MisbehavingDocumentSourceFake(document: document, plan: .init(cutConnections: 99, cutAfterChunks: 5))
        let (impatient, inbox) = try makePuller(maxInterruptions: 0)
        await #expect(throws: DocumentPullError.self) { try await impatient.pull(connect: cutting.connect, progress: { _, _ in }) }
        cutting.stop()
        #expect(inbox.resumeOffset(digest: document.info.digest) == UInt64(5 * Self.chunk))

        let healthy = try MisbehavingDocumentSourceFake(document: document, plan: .init())
        defer { healthy.stop() }
        let (puller, _) = try makePuller()
        let pulled = try await puller.pull(connect: healthy.connect, progress: { _, _ in })
        #expect(pulled.resumedBytes == UInt64(5 * Self.chunk))
        #expect(healthy.seen.map(\.offset) == [0, UInt64(5 * Self.chunk)])
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: pulled.path))) == bytes)
        // A second pull of the same snapshot imports nothing new.
        let again = try await puller.pull(connect: healthy.connect, progress: { _, _ in })
        #expect(again.path == pulled.path)
        #expect(try inboxFiles(inbox) == [document.info.digest.hexString + ".document"])
    }

    /// §6.5/§7.4: the source asks before each batch of chunks whether the peer is still a member;
    /// removed mid-stream, it gets no further byte (the connection is aborted) and its resume is refused.
    @Test func aPeerRemovedWhileItsStreamRunsGetsNoFurtherByteAndItsResumeIsRefused() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, _) = try makeSnapshot(size: 12 * Self.chunk)
        let source = try MisbehavingDocumentSourceFake(document: document, plan: .init(memberForBatches: 2))
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        await #expect(throws: DocumentPullError.refused(ErrorFrame(code: .notPermitted, message: "not a ring member"))) {
            _ = try await puller.pull(connect: source.connect, progress: { _, _ in })
        }
        // Two batches of three chunks were handed over before the removal, nothing after it; the
        // reset drops what the puller had not read of them yet (the connection is aborted).
        let kept = inbox.resumeOffset(digest: document.info.digest)
        #expect(kept <= UInt64(2 * DocumentSender.batchChunks * Self.chunk) && kept % UInt64(Self.chunk) == 0)
        #expect(source.seen.map(\.offset) == [0, kept])
    }

    @Test func aSourceRefusesAnotherSnapshotsDigestAndAnOffsetBeyondTheEnd() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (document, _) = try makeSnapshot(size: 1000)
        let source = try MisbehavingDocumentSourceFake(document: document, plan: .init())
        defer { source.stop() }
        let reference = ActivityReference(typeHash: TypeHash(value: 1), revision: 1)
        let other = DocumentRequest(activity: reference, digest: [UInt8](repeating: 9, count: 32), offset: 0)
        await #expect(throws: TransportError.remote(ErrorFrame(code: .unknownActivity, message: "the snapshot changed"))) {
            _ = try await source.connect(Frame(type: .fetchDocument, requestID: 1, payload: other.payload))
        }
        let beyond = DocumentRequest(activity: reference, digest: document.info.digest, offset: 1001)
        await #expect(throws: TransportError.remote(ErrorFrame(code: .malformed, message: "offset beyond the snapshot"))) {
            _ = try await source.connect(Frame(type: .fetchDocument, requestID: 2, payload: beyond.payload))
        }
    }
}

@Suite("BatonServiceTests: documents between two paired transfer services", .serialized)
struct DocumentBetweenMembersTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("documents-members-\(UUID().uuidString)")

    @Test func aMemberPullsTheDocumentOfTheActivityOnTheAirAndNothingElse() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let type = "org.example.Drawing.editing"
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta", handled: [type])
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        let uid = getuid()
        let idA = await a.ring.deviceID
        let record = try ActivityRecord(activityType: type, title: "Plan", userInfo: [:], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: uid, serial: 1), record)
        try await a.ring.radio.publish(record, uid: uid)
        let publication = try #require(await a.ring.radio.currentPublication())

        var bytes = [UInt8](repeating: 0, count: 3 * DocumentChunk.maxDataBytes + 99)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 7) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let snapshotPath = directory.appendingPathComponent("snapshot").path
        try Data(bytes).write(to: URL(fileURLWithPath: snapshotPath))
        let info = try DocumentInfo(totalSize: UInt64(bytes.count), digest: SHA256.hash(bytes), mediaType: "image/svg+xml", documentID: "plan")
        let inbox = try DocumentInbox(directory: directory.appendingPathComponent("inbox-beta").path)

        // No document attached: the source refuses.
        await #expect(throws: DocumentPullError.refused(ErrorFrame(code: .unknownActivity, message: "no document for that activity"))) {
            _ = try await b.transfer.pullDocument(member: idA, typeHash: publication.typeHash, revision: publication.revision, inbox: inbox, progress: { _, _ in })
        }
        a.activities.setDocument(AttachedDocument(path: snapshotPath, info: info))
        let totals = Mutex<Set<UInt64>>([])
        let pulled = try await b.transfer.pullDocument(member: idA, typeHash: publication.typeHash, revision: publication.revision, inbox: inbox,
                                                       progress: { _, total in totals.withLock { _ = $0.insert(total) } })
        #expect(pulled.info == info)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: pulled.path))) == bytes)
        #expect(totals.withLock { $0 } == [UInt64(bytes.count)])
        // Another revision than the one on the air is not served.
        await #expect(throws: DocumentPullError.refused(ErrorFrame(code: .unknownActivity, message: "no document for that activity"))) {
            _ = try await b.transfer.pullDocument(member: idA, typeHash: publication.typeHash, revision: (publication.revision + 1) & 0xFF_FFFF,
                                                  inbox: inbox, progress: { _, _ in })
        }
        await a.stop()
        await b.stop()
    }
}
