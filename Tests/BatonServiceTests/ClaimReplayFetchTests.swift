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

/// The journal gap of §6.6: a claim granted for a snapshot the receiver never fetched (it stopped
/// between the grant and the fetch) is finished by the replay at the receiver's restart, without a
/// new Continue: the journal keeps the activity type and user, the replay recomputes the type hash
/// with the owner's secret and pulls the granted snapshot into that user's inbox.
@Suite("BatonServiceTests: a replayed claim fetches its granted snapshot itself", .serialized)
struct ClaimReplayFetchTests {
    let base = DocumentContinueSessionTests()
    static let type = DocumentContinueSessionTests.type

    struct Granted {
        let setup: DocumentContinueSessionTests.Setup
        /// The snapshot alpha's app saved on release: the one granted, never pulled by beta.
        let saved: DocumentInfo
        let savedBytes: [UInt8]
    }

    /// beta pulled revision 1; alpha's app saved a newer snapshot when beta claimed; the grant
    /// named it and beta stopped before fetching it (the fetch "failed"). `journalType` decides
    /// whether the claim was journalled with its activity type (as batond's Continue does now).
    func grantedButNotFetched(journalType: Bool) async throws -> Granted {
        let s = try await base.setup(saved: { _ in nil })
        let inbox = try #require(await s.b.activities.documentInbox(uid: getuid()))
        let typeHash = DerivedKeys(secret: await s.a.ring.keeper.ownSecret).typeHash(Self.type)
        _ = try await s.b.transfer.pullDocument(member: s.alpha, typeHash: typeHash, revision: ActivityReference.anyRevision,
                                                inbox: inbox, progress: { _, _ in })
        // alpha's app saves on the claim: a newer snapshot becomes the activity's document.
        let savedBytes = Array("revision 2: the comment on page two is edited".utf8)
        let path = base.documents.directory.appendingPathComponent("snapshot-alpha-saved").path
        try Data(savedBytes).write(to: URL(fileURLWithPath: path))
        let saved = try DocumentInfo(totalSize: UInt64(savedBytes.count), digest: SHA256.hash(savedBytes),
                                     mediaType: s.info.mediaType, documentID: s.info.documentID)
        s.a.activities.setDocument(AttachedDocument(path: path, info: saved))
        s.a.activities.setEditSessions(s.sessionsA, savedDigest: saved.digest)
        await #expect(throws: EditSessionClaimError.fetchFailed) {
            try await s.b.transfer.claimEditSession(member: s.alpha, documentID: s.info.documentID, sessions: s.sessionsB,
                                                    activityType: journalType ? Self.type : nil, uid: getuid()) { _ in false }
        }
        #expect(await s.sessionsA.owner(of: s.info.documentID, uid: getuid()) == .peer(s.beta), "alpha released on the grant")
        #expect(await s.sessionsB.pendingClaims.count == 1)
        #expect(inbox.received(digest: saved.digest) == nil, "the granted snapshot is not here yet")
        return Granted(setup: s, saved: saved, savedBytes: savedBytes)
    }

    /// beta restarts on the same state: sessions from disk, a new continuation that replays at start.
    func restartBeta(_ s: DocumentContinueSessionTests.Setup) async throws -> (EditSessions, ContinuationService) {
        let reopened = try EditSessions(directory: StateDirectory(path: base.documents.directory.appendingPathComponent("beta-sessions").path))
        s.b.activities.setEditSessions(reopened, savedDigest: nil)
        let restarted = ContinuationService(ring: s.b.ring, transfer: s.b.transfer, activities: s.b.activities, board: nil, log: { _ in })
        await restarted.start()
        return (reopened, restarted)
    }

    @Test func theRestartReplaysFetchesAndImportsTheGrantedSnapshotOnceWithoutAContinue() async throws {
        let g = try await grantedButNotFetched(journalType: true)
        let s = g.setup
        let journalled = try #require(await s.sessionsB.pendingClaims.first)
        #expect(journalled.activityType == Self.type && journalled.uid == getuid())
        let (reopened, restarted) = try await restartBeta(s)
        #expect(await reopened.pendingClaims.first == journalled, "the journal kept type and user across the restart")
        #expect(await eventually(timeout: .seconds(15)) { await reopened.pendingClaims.isEmpty })
        #expect(await reopened.owner(of: s.info.documentID, uid: getuid()) == .thisMachine)
        #expect(await reopened.ledger(s.info.documentID, uid: getuid())?.current.revision == 2)
        #expect(await reopened.ledger(s.info.documentID, uid: getuid())?.current.digest == g.saved.digest)
        let inbox = try #require(await s.b.activities.documentInbox(uid: getuid()))
        let received = try #require(inbox.received(digest: g.saved.digest))
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: received))) == g.savedBytes)
        #expect(s.a.activities.saves == 1, "answered from alpha's stored grant: one save")
        #expect(s.b.activities.deliveredDocuments.isEmpty, "no Continue ran: the import alone")
        // Applied once: a further replay has nothing to send and changes nothing.
        #expect(await restarted.replayPendingClaims(towards: s.alpha).isEmpty)
        #expect(await reopened.ledger(s.info.documentID, uid: getuid())?.current.revision == 2)
        await restarted.stop()
        await base.stop(s)
    }

    @Test func aClaimJournalledWithoutItsTypeStillWaitsForTheNextContinue() async throws {
        let g = try await grantedButNotFetched(journalType: false)
        let s = g.setup
        let (reopened, restarted) = try await restartBeta(s)
        #expect(await restarted.replayPendingClaims(towards: s.alpha).isEmpty)
        #expect(await reopened.pendingClaims.count == 1, "no type to fetch with: it stays journalled")
        #expect(await reopened.ledger(s.info.documentID, uid: getuid()) == nil, "nothing imported")
        // The next Continue fetches and finishes it (the journalled claim, not a new one).
        #expect(try await restarted.continueActivity(from: "alpha", type: Self.type, uid: getuid()) == "delivered")
        #expect(await reopened.pendingClaims.isEmpty)
        #expect(await reopened.ledger(s.info.documentID, uid: getuid())?.current.digest == g.saved.digest)
        #expect(s.a.activities.saves == 1)
        await restarted.stop()
        await base.stop(s)
    }

    /// An entry written before the type and user were journalled (the old shape) is read as it is.
    @Test func journalEntriesOfTheOldShapeAreRead() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("old-claims-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(path: directory.path)
        let old = try Journal<OldShapeClaim>(name: EditSessions.journalName, capacity: 64, in: state)
        let claim = try EditSessionClaim(documentID: "plan-2", baseRevision: 1)
        let peer = try DeviceID(bytes: [UInt8](repeating: 7, count: DeviceID.byteCount))
        try old.record(OldShapeClaim(requestID: 41, peer: peer, claim: claim))
        let sessions = try EditSessions(directory: state)
        #expect(await sessions.pendingClaims == [PendingClaim(requestID: 41, peer: peer, claim: claim)])
        #expect(await sessions.pendingClaims.first?.activityType == nil)
    }
}

/// PendingClaim as journalled before the activity type and user were kept (fields of that shape).
private struct OldShapeClaim: Codable, Sendable, Identifiable {
    var requestID: UInt32
    var peer: DeviceID
    var claim: EditSessionClaim
    var id: String { claim.documentID }
}
