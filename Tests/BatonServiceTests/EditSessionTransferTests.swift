// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTestBus
import BatonCrypto
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// ClaimEditSession between two daemons' transfers over loopback TLS (§6.6): the owner saves and
/// releases, the claimer imports once; no save, no release; a claim cut after the grant is replayed
/// with its request id and applied once, the owner not asked to save again.
@Suite("BatonServiceTests: edit sessions over the transfer (§6.6)", .serialized)
struct EditSessionTransferTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("editsessions-\(UUID().uuidString)")

    struct Pair {
        let a: BusLessNode, b: BusLessNode
        let sessionsA: EditSessions, sessionsB: EditSessions
        let alpha: DeviceID, beta: DeviceID
    }

    func pair() async throws -> Pair {
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        let sessionsA = try EditSessions(directory: StateDirectory(path: directory.appendingPathComponent("alpha-sessions").path))
        let sessionsB = try EditSessions(directory: StateDirectory(path: directory.appendingPathComponent("beta-sessions").path))
        a.activities.setEditSessions(sessionsA, savedDigest: SHA256.hash([2]))
        b.activities.setEditSessions(sessionsB, savedDigest: SHA256.hash([3]))
        // alpha's app publishes an activity with the document, committed at revision 1.
        let uid = getuid()
        let record = try ActivityRecord(activityType: "org.example.Reader.reading", title: "Notes", userInfo: [:], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: uid, serial: 1), record)
        try await a.ring.radio.publish(record, uid: uid)
        try await sessionsA.commitLocal("doc", digest: SHA256.hash([1]), uid: getuid())
        return Pair(a: a, b: b, sessionsA: sessionsA, sessionsB: sessionsB,
                    alpha: await a.ring.snapshot().deviceID, beta: await b.ring.snapshot().deviceID)
    }

    @Test func theOwnerSavesAndReleasesAndTheClaimerImportsOnce() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await pair()
        let outcome = try await p.b.transfer.claimEditSession(member: p.alpha, documentID: "doc", sessions: p.sessionsB, uid: getuid()) { grant in
            grant.granted.revision == 2 && grant.granted.digest == SHA256.hash([2])
        }
        #expect(outcome == .imported)
        #expect(await p.sessionsA.owner(of: "doc", uid: getuid()) == .peer(p.beta))
        #expect(await p.sessionsB.owner(of: "doc", uid: getuid()) == .thisMachine)
        #expect(await p.sessionsB.ledger("doc", uid: getuid())?.current.revision == 2)
        #expect(p.a.activities.saves == 1)
        // alpha's app can no longer commit; beta's can.
        await #expect(throws: EditSessionFailure.session(.notOwner(.peer(p.beta)))) { try await p.sessionsA.commitLocal("doc", digest: SHA256.hash([7]), uid: getuid()) }
        #expect(try await p.sessionsB.commitLocal("doc", digest: SHA256.hash([3]), uid: getuid()).revision == 3)
        await p.a.stop()
        await p.b.stop()
    }

    @Test func withoutASaveTheSessionStaysAndTheClaimIsSettled() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await pair()
        p.a.activities.setEditSessions(p.sessionsA, savedDigest: nil)
        await #expect(throws: EditSessionClaimError.session(.refused(.sessionBusy))) {
            try await p.b.transfer.claimEditSession(member: p.alpha, documentID: "doc", sessions: p.sessionsB, uid: getuid()) { _ in true }
        }
        #expect(await p.sessionsA.owner(of: "doc", uid: getuid()) == .thisMachine)
        #expect(await p.sessionsB.owner(of: "doc", uid: getuid()) == nil)
        #expect(await p.sessionsB.pendingClaims.isEmpty)
        await p.a.stop()
        await p.b.stop()
    }

    @Test func aClaimCutAfterTheGrantIsReplayedWithItsIdAndAppliedOnce() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await pair()
        // The grant arrives but the snapshot's transfer is cut: the claim stays journalled.
        await #expect(throws: EditSessionClaimError.fetchFailed) {
            try await p.b.transfer.claimEditSession(member: p.alpha, documentID: "doc", sessions: p.sessionsB, uid: getuid()) { _ in false }
        }
        let pending = await p.sessionsB.pendingClaims
        #expect(pending.count == 1)
        #expect(await p.sessionsA.owner(of: "doc", uid: getuid()) == .peer(p.beta))
        // Retried: the same request goes out again and is answered from alpha's applied grants.
        #expect(try await p.b.transfer.claimEditSession(member: p.alpha, documentID: "doc", sessions: p.sessionsB, uid: getuid()) { _ in true } == .imported)
        #expect(p.a.activities.saves == 1)
        #expect(await p.sessionsA.ledger("doc", uid: getuid())?.current.revision == 2)
        #expect(await p.sessionsB.ledger("doc", uid: getuid())?.current.revision == 2)
        #expect(await p.sessionsB.pendingClaims.isEmpty)
        // beta's state survives a restart of its side: a new EditSessions on the same directory.
        let reopened = try EditSessions(directory: StateDirectory(path: directory.appendingPathComponent("beta-sessions").path))
        #expect(await reopened.owner(of: "doc", uid: getuid()) == .thisMachine)
        await p.a.stop()
        await p.b.stop()
    }
}
