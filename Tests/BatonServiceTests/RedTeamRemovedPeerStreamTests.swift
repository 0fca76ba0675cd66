// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonStore
import BatonTransport
import Foundation
import Testing
@testable import BatonService

/// Red team (§6.5 "A peer removed from the ring while its stream runs"): two real transfer
/// services on loopback, alpha the source of a document, beta pulling it through its own transfer
/// (real pinned TLS, beta's identity) at its own pace: the removal (or alpha's new identity, §7.5)
/// is saved while beta holds the stream back, then beta reads what still comes.
@Suite("BatonServiceTests: red team, a removed peer's stream between two real transfer services", .serialized)
struct RedTeamRemovedPeerStreamTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rt-removed-stream-\(UUID().uuidString)")
    static let type = "org.example.Drawing.editing"
    static let chunk = DocumentChunk.maxDataBytes
    /// Far more than loopback's socket buffers hold while beta does not read (a few MiB).
    static let size = 256 * chunk

    /// Paired alpha and beta; alpha publishes an activity with a document of `size` bytes.
    func makePair() async throws -> (a: BusLessNode, b: BusLessNode, info: DocumentInfo, inbox: DocumentInbox, hash: TypeHash) {
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta", handled: [Self.type])
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(120)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        let record = try ActivityRecord(activityType: Self.type, title: "Plan", userInfo: [:], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), record)
        try await a.ring.radio.publish(record, uid: getuid())
        let bytes = documentBytes(count: Self.size, seed: 0x5EED_0025)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let snapshotPath = directory.appendingPathComponent("snapshot-alpha").path
        try Data(bytes).write(to: URL(fileURLWithPath: snapshotPath))
        let info = try DocumentInfo(totalSize: UInt64(Self.size), digest: SHA256.hash(bytes), mediaType: "application/pdf", documentID: "plan")
        a.activities.setDocument(AttachedDocument(path: snapshotPath, info: info))
        let base = directory.appendingPathComponent("beta-documents")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        let inbox = try DocumentInbox.ofUser(getuid(), under: base.path)
        b.activities.setInbox(inbox)
        let hash = try #require(await a.ring.radio.currentPublication()).typeHash
        return (a, b, info, inbox, hash)
    }

    /// What beta read of one stream: chunks (contiguous, checked) and how it ended.
    struct Read {
        var chunks = 0
        var errorFrame: ErrorFrame?
        var end: TransportError?
    }

    /// beta opens FetchDocument to alpha through its transfer, reads DocumentInfo and `first`
    /// chunks, lets `change` happen on alpha (beta reading nothing meanwhile), then reads all that
    /// still comes. Returns the batches alpha had begun when the change was saved and what beta read.
    func streamAcross(_ a: BusLessNode, _ b: BusLessNode, hash: TypeHash, first: Int,
                      change: () async throws -> Void) async throws -> (begunAtChange: Int, read: Read) {
        let idA = await a.ring.deviceID
        let request = DocumentRequest(activity: ActivityReference(typeHash: hash, revision: ActivityReference.anyRevision),
                                      digest: DocumentRequest.anySnapshot, offset: 0)
        let (channel, reply) = try await b.transfer.openForDocument(Frame(type: .fetchDocument, requestID: 25, payload: request.payload), member: idA)
        defer { channel.close() }
        #expect(reply.type == .documentInfo)
        var read = Read()
        var offset: UInt64 = 0
        func next() async throws(TransportError) -> Frame? {
            let frame = try await channel.receive(timeout: .seconds(120))
            switch frame.type {
            case .documentChunk:
                let chunk = try? DocumentChunk(payload: frame.payload)
                #expect(chunk?.offset == offset)
                offset += UInt64(chunk?.data.count ?? 0)
                read.chunks += 1
                return frame
            case .error:
                read.errorFrame = try? ErrorFrame(payload: frame.payload)
                return nil
            default:
                Issue.record("unexpected frame \(frame.type)")
                return nil
            }
        }
        for _ in 0..<first { _ = try await next() }
        try await change()
        // Every batch alpha lets out after this is one it began after the change was saved.
        let begun = await a.transfer.streamBatchesBegun
        while true {
            do throws(TransportError) {
                guard try await next() != nil else { break }
            } catch {
                read.end = error
                break
            }
        }
        return (begun, read)
    }

    /// No batch begins after the removal is saved, and what alpha's connection still queued for beta
    /// (before the abort, MiB: beta read about 60 chunks after the removal) is dropped.
    @Test func aRemovalSavedMidStreamLetsOutNoBatchBegunAfterIt() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, _, inbox, hash) = try await makePair()
        let before = await a.transfer.streamBatchesBegun
        let (begun, read) = try await streamAcross(a, b, hash: hash, first: 2) {
            try await a.ring.remove("beta")
        }
        // The source closed the connection: no Error frame, the stream cut short.
        #expect(read.errorFrame == nil)
        #expect(read.end != nil)
        #expect(read.chunks < Self.size / Self.chunk, "the whole document went to a removed peer")
        // Not one batch begun after the removal was saved; beta got at most the batches begun before.
        #expect(await a.transfer.streamBatchesBegun == begun)
        #expect(read.chunks <= (begun - before) * DocumentSender.batchChunks)
        print("red team: removed mid-stream: beta read \(read.chunks) chunks, \(read.chunks - 2) of them after the removal "
              + "(\(begun - before) batches begun before it, \(read.chunks * Self.chunk) of \(Self.size) bytes)")
        // The resume (beta's real puller, from what it holds: nothing imported) is refused.
        let outcome: DocumentPullError?
        do throws(DocumentPullError) {
            _ = try await b.transfer.pullDocument(member: await a.ring.deviceID, typeHash: hash, revision: ActivityReference.anyRevision,
                                                  inbox: inbox, progress: { _, _ in })
            outcome = nil
        } catch {
            outcome = error
        }
        // batond's receiver learns it was removed from the Hello's RingSync (§6.2, §7.4) before it asks
        // anything; a receiver that asks anyway is refused notPermitted (DocumentTransferTests).
        if case .interrupted(let cause) = outcome, cause.contains("notAMember") {} else {
            Issue.record("the resume was not stopped as a removed member's: \(String(describing: outcome))")
        }
        #expect(!(await b.ring.snapshot().isMember(await a.ring.deviceID)))
        await a.stop()
        await b.stop()
    }

    /// alpha takes a new identity while it streams to beta (§7.5): beta is no member of alpha's new
    /// ring, so no batch begins after the new identity is saved.
    @Test func aNewIdentityMidStreamLetsOutNoBatchBegunAfterIt() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, _, inbox, hash) = try await makePair()
        let idA = await a.ring.deviceID
        let (begun, read) = try await streamAcross(a, b, hash: hash, first: 2) {
            _ = try await a.ring.resetIdentity()
        }
        #expect(read.errorFrame == nil)
        #expect(read.end != nil)
        #expect(read.chunks < Self.size / Self.chunk)
        #expect(await a.transfer.streamBatchesBegun == begun)
        print("red team: new identity mid-stream: beta read \(read.chunks) chunks, \(read.chunks - 2) after the reset")
        // The resume reaches a machine that no longer proves alpha's identity: refused before any frame.
        let outcome: DocumentPullError?
        do throws(DocumentPullError) {
            _ = try await b.transfer.pullDocument(member: idA, typeHash: hash, revision: ActivityReference.anyRevision,
                                                  inbox: inbox, progress: { _, _ in })
            outcome = nil
        } catch {
            outcome = error
        }
        #expect(outcome != nil)
        print("red team: resume after alpha's new identity: \(String(describing: outcome))")
        await a.stop()
        await b.stop()
    }
}
