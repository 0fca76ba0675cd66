// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// Continue claims the edit session of the activity's document (§6.6, §9 step 4) between two
/// daemons' services on loopback: after the pull and before delivery; a source that does not save
/// in time keeps its session and nothing is delivered; a conflict is refused and this copy kept.
@Suite("BatonServiceTests: Continue hands a document's edit session over", .serialized)
struct DocumentContinueSessionTests {
    let documents = DocumentContinueTests()
    static let type = DocumentContinueTests.type

    struct Setup {
        let a: BusLessNode, b: BusLessNode
        let sessionsA: EditSessions, sessionsB: EditSessions
        let info: DocumentInfo
        let alpha: DeviceID, beta: DeviceID
    }

    /// alpha owns "plan-2" at revision 1 and its app saves `saved` on a claim (nil: no save in time).
    func setup(saved: (DocumentInfo) -> [UInt8]?) async throws -> Setup {
        let (a, b, _, info, _) = try await documents.makePair(size: 3 * DocumentChunk.maxDataBytes + 5)
        let sessionsA = try EditSessions(directory: StateDirectory(path: documents.directory.appendingPathComponent("alpha-sessions").path))
        let sessionsB = try EditSessions(directory: StateDirectory(path: documents.directory.appendingPathComponent("beta-sessions").path))
        try await sessionsA.commitLocal(info.documentID, digest: info.digest, uid: getuid())
        a.activities.setEditSessions(sessionsA, savedDigest: saved(info))
        b.activities.setEditSessions(sessionsB, savedDigest: nil)
        return Setup(a: a, b: b, sessionsA: sessionsA, sessionsB: sessionsB, info: info,
                     alpha: await a.ring.snapshot().deviceID, beta: await b.ring.snapshot().deviceID)
    }

    func stop(_ s: Setup) async {
        await s.a.stop()
        await s.b.stop()
        try? FileManager.default.removeItem(at: documents.directory)
    }

    @Test func continueClaimsTheSessionAfterThePullAndBeforeDelivery() async throws {
        let s = try await setup(saved: { $0.digest })
        #expect(try await s.b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid()) == "delivered")
        #expect(s.b.activities.deliveredDocuments.count == 1 && s.b.activities.deliveredDocuments[0]?.info == s.info)
        #expect(s.a.activities.saves == 1, "the source's app saved once before it released")
        #expect(await s.sessionsA.owner(of: s.info.documentID, uid: getuid()) == .peer(s.beta))
        #expect(await s.sessionsB.owner(of: s.info.documentID, uid: getuid()) == .thisMachine)
        #expect(await s.sessionsB.ledger(s.info.documentID, uid: getuid())?.current.revision == 1)
        #expect(await s.sessionsB.pendingClaims.isEmpty)
        // The source can no longer commit; the receiver can.
        await #expect(throws: EditSessionFailure.session(.notOwner(.peer(s.beta)))) {
            try await s.sessionsA.commitLocal(s.info.documentID, digest: SHA256.hash([9]), uid: getuid())
        }
        #expect(try await s.sessionsB.commitLocal(s.info.documentID, digest: SHA256.hash([9]), uid: getuid()).revision == 2)
        await stop(s)
    }

    @Test func aSourceThatDoesNotSaveInTimeKeepsItsSessionAndNothingIsDelivered() async throws {
        let s = try await setup(saved: { _ in nil })
        await #expect(throws: ServiceFailure.editSessionBusy(
            "timedOut: the source did not save and release the document's edit session in time; it keeps it (try again)")) {
            try await s.b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid())
        }
        #expect(s.b.activities.delivered.isEmpty && s.b.activities.deliveredDocuments.isEmpty)
        #expect(s.b.activities.failures == [.timedOut])
        #expect(await s.sessionsA.owner(of: s.info.documentID, uid: getuid()) == .thisMachine, "never a forced takeover")
        #expect(await s.sessionsB.owner(of: s.info.documentID, uid: getuid()) == nil)
        #expect(try await s.sessionsA.commitLocal(s.info.documentID, digest: SHA256.hash([8]), uid: getuid()).revision == 2)
        await stop(s)
    }

    @Test func aCopyEditedHereIsNeverOverwrittenByAContinue() async throws {
        let s = try await setup(saved: { $0.digest })
        // beta edited its own copy of the document meanwhile (it owns that copy's session).
        let local = SHA256.hash([7])
        try await s.sessionsB.commitLocal(s.info.documentID, digest: local, uid: getuid())
        let failure = await #expect(throws: ServiceFailure.self) {
            try await s.b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid())
        }
        guard case .documentConflict = failure else {
            Issue.record("expected a document conflict, got \(String(describing: failure))")
            await stop(s)
            return
        }
        #expect(s.b.activities.deliveredDocuments.isEmpty)
        #expect(await s.sessionsB.ledger(s.info.documentID, uid: getuid())?.current.digest == local, "this copy is kept")
        #expect(await s.sessionsB.owner(of: s.info.documentID, uid: getuid()) == .thisMachine)
        #expect(await s.sessionsB.pendingClaims.isEmpty)
        await stop(s)
    }
}

/// A claim whose grant was lost is replayed by itself (§6.6), unchanged, across a restart of
/// either side: at the receiver's start and at a sighting of the owner; applied once.
@Suite("BatonServiceTests: journalled claims are replayed without waiting for a Continue", .serialized)
struct ClaimReplayTests {
    let base = DocumentContinueSessionTests()

    /// beta pulled the document and its claim was granted, but the answer never settled (the fetch
    /// "failed"): the claim stays journalled, alpha has released.
    func lostGrant() async throws -> DocumentContinueSessionTests.Setup {
        let s = try await base.setup(saved: { $0.digest })
        // The document arrived in beta's inbox (the Continue's pull) before its claim went out.
        let inbox = try #require(await s.b.activities.documentInbox(uid: getuid()))
        _ = try await s.b.transfer.pullDocument(member: s.alpha, typeHash: DerivedKeys(secret: await s.a.ring.keeper.ownSecret)
            .typeHash(DocumentContinueSessionTests.type), revision: ActivityReference.anyRevision, inbox: inbox, progress: { _, _ in })
        await #expect(throws: EditSessionClaimError.fetchFailed) {
            try await s.b.transfer.claimEditSession(member: s.alpha, documentID: s.info.documentID, sessions: s.sessionsB, uid: getuid()) { _ in false }
        }
        #expect(await s.sessionsB.pendingClaims.count == 1)
        #expect(await s.sessionsA.owner(of: s.info.documentID, uid: getuid()) == .peer(s.beta))
        return s
    }

    @Test func theReceiversRestartReplaysTheClaimOnceWithItsRequestID() async throws {
        let s = try await lostGrant()
        let requestID = try #require(await s.sessionsB.pendingClaims.first?.requestID)
        // beta restarts: its sessions come back from disk and its continuation starts again.
        let reopened = try EditSessions(directory: StateDirectory(path: base.documents.directory.appendingPathComponent("beta-sessions").path))
        #expect(await reopened.pendingClaims.first?.requestID == requestID, "the journal keeps the request id")
        s.b.activities.setEditSessions(reopened, savedDigest: nil)
        let restarted = ContinuationService(ring: s.b.ring, transfer: s.b.transfer, activities: s.b.activities, board: nil, log: { _ in })
        await restarted.start()
        #expect(await eventually(timeout: .seconds(10)) { await reopened.pendingClaims.isEmpty })
        #expect(await reopened.owner(of: s.info.documentID, uid: getuid()) == .thisMachine)
        #expect(await reopened.ledger(s.info.documentID, uid: getuid())?.current.revision == 1)
        #expect(s.a.activities.saves == 1, "answered from alpha's stored grant: no second save")
        // Once applied: another replay has nothing to send.
        #expect(await restarted.replayPendingClaims(towards: s.alpha).isEmpty)
        await restarted.stop()
        await base.stop(s)
    }

    @Test func theOwnersRestartStillAnswersTheReplayFromItsStoredGrant() async throws {
        let s = try await lostGrant()
        // alpha restarts: its sessions (and stored grants) come back from disk.
        let reopenedA = try EditSessions(directory: StateDirectory(path: base.documents.directory.appendingPathComponent("alpha-sessions").path))
        s.a.activities.setEditSessions(reopenedA, savedDigest: SHA256.hash([5]))
        // Heard again: the sighting replays the claim before anything newer is fetched.
        #expect(try await s.b.continuation.replayPendingClaims(towards: s.alpha) == [.imported])
        #expect(await s.sessionsB.pendingClaims.isEmpty)
        #expect(await s.sessionsB.owner(of: s.info.documentID, uid: getuid()) == .thisMachine)
        #expect(await s.sessionsB.ledger(s.info.documentID, uid: getuid())?.current.digest == s.info.digest, "the granted revision, not the newer save")
        #expect(await reopenedA.owner(of: s.info.documentID, uid: getuid()) == .peer(s.beta))
        #expect(s.a.activities.saves == 1)
        await base.stop(s)
    }

    @Test func hearingTheOwnerAgainReplaysTheClaimBeforeAnythingNewer() async throws {
        let s = try await lostGrant()
        let advert = try #require(s.a.radio.lastAdvert)
        s.b.radio.hear(advert)
        #expect(await eventually(timeout: .seconds(10)) { await s.sessionsB.pendingClaims.isEmpty })
        #expect(await s.sessionsB.owner(of: s.info.documentID, uid: getuid()) == .thisMachine)
        #expect(s.a.activities.saves == 1)
        await base.stop(s)
    }
}

/// A prefetched activity with a document still claims the session before delivery (§9 "Prefetch",
/// "Documents"): it goes the usual path, never delivered from memory without the claim.
@Suite("BatonServiceTests: a prefetched activity's document session is claimed too", .serialized)
struct PrefetchedDocumentSessionTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-session-\(UUID().uuidString)")

    @Test func thePrefetchedPathClaimsBeforeDelivery() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let type = "org.example.Reader.reading"
        let (a, b, suggestion) = try await suggestedChapter(in: directory, type: type, continuation: .init(prefetchAfter: .milliseconds(100)))
        #expect(await eventually(timeout: .seconds(5)) { await b.continuation.isPrefetched(suggestion.path) })
        let bytes = Array("two pages".utf8)
        let snapshot = directory.appendingPathComponent("snapshot").path
        try Data(bytes).write(to: URL(fileURLWithPath: snapshot))
        let info = try DocumentInfo(totalSize: UInt64(bytes.count), digest: SHA256.hash(bytes), mediaType: "text/plain", documentID: "book-1")
        a.activities.setDocument(AttachedDocument(path: snapshot, info: info))
        b.activities.setInbox(try DocumentInbox(directory: directory.appendingPathComponent("inbox").path))
        let sessionsA = try EditSessions(directory: StateDirectory(path: directory.appendingPathComponent("alpha-sessions").path))
        let sessionsB = try EditSessions(directory: StateDirectory(path: directory.appendingPathComponent("beta-sessions").path))
        try await sessionsA.commitLocal("book-1", digest: info.digest, uid: getuid())
        a.activities.setEditSessions(sessionsA, savedDigest: info.digest)
        b.activities.setEditSessions(sessionsB, savedDigest: nil)
        #expect(try await b.continuation.take(suggestion.path, uid: getuid()) == "delivered")
        #expect(b.activities.deliveredDocuments.count == 1 && b.activities.deliveredDocuments[0]?.info == info)
        #expect(await sessionsB.owner(of: "book-1", uid: getuid()) == .thisMachine)
        #expect(await sessionsA.owner(of: "book-1", uid: getuid()) == .peer(await b.ring.snapshot().deviceID))
        await a.stop()
        await b.stop()
    }
}
