// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTestBus
import Foundation
import Testing
@testable import BatonService

/// Red team, from the docs only (dbus-api PairingSession1.Commit: "makes exactly the changes
/// PeerMembers, PeerRemovals and PeerGenerations list"): a member's RingSync arriving between the
/// review and Commit makes the commit change something the person never saw. batond computes the
/// review again at Commit and refuses the join (ring-changed) when it differs; nothing merged.
@Suite("BatonServiceTests: ReviewAttackTests, a RingSync between review and Commit", .serialized)
struct ReviewAttackTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reviewattack-\(UUID().uuidString)")
    let uid = getuid()

    func finished(_ pairing: PairingService, _ path: String) async -> PairingPhase? {
        _ = await eventually(timeout: .seconds(20)) { await pairing.session(path)?.phase.isFinished == true }
        return await pairing.session(path)?.phase
    }

    /// alpha removed xray; beta reviews alpha (nothing of beta's ring removed: beta has no xray);
    /// then beta's member delta pairs xray and its roster reaches beta. Committing now would remove
    /// xray here, unseen: refused as ring-changed, xray stays, alpha does not join.
    @Test func aRingSyncBetweenReviewAndCommitFailsTheCommitAsRingChanged() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let d = try await BusLessNode.start(in: directory, name: "delta")
        let x = try await BusLessNode.start(in: directory, name: "xray")
        let idA = await a.ring.deviceID, idD = await d.ring.deviceID, idX = await x.ring.deviceID
        let ax = try await pairWithoutBus(a.pairing, x.pairing)
        #expect(await finished(a.pairing, ax.pathA)?.stateName == "paired")
        #expect(await finished(x.pairing, ax.pathB)?.stateName == "paired")
        try await a.ring.remove(idX.description)
        let db = try await pairWithoutBus(d.pairing, b.pairing)
        #expect(await finished(b.pairing, db.pathB)?.stateName == "paired")
        #expect(await finished(d.pairing, db.pathA)?.stateName == "paired")

        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing, commit: false)
        #expect(await eventually(timeout: .seconds(30)) { await b.pairing.session(pathB)?.phase.stateName == "reviewing" })
        let shown = try #require(await b.pairing.session(pathB)).review
        #expect(!shown.removals.contains { $0.deviceID == idX }, "xray is not in beta's ring yet")

        // Meanwhile delta pairs xray, and its roster reaches beta (its own RingSync, or this one).
        let dx = try await pairWithoutBus(x.pairing, d.pairing)
        #expect(await finished(d.pairing, dx.pathB)?.stateName == "paired")
        _ = try? await b.ring.receivedRoster(await d.ring.snapshot().roster, from: idD)
        #expect(await b.ring.snapshot().roster.members[idX] != nil)

        try await b.pairing.commit(pathB, uid: uid, accepted: true)
        #expect(await finished(b.pairing, pathB) == .failed(.ringChanged))
        let after = await b.ring.snapshot().roster
        #expect(after.members[idX] != nil && !after.isOut(idX), "nothing the person did not see was removed")
        // (alpha itself is known here by now: xray's ring held it and reached beta through delta.)
        _ = idA
        try? await a.pairing.cancel(pathA, uid: uid)
        for node in [a, b, d, x] { await node.stop() }
    }
}

/// Red team (dbus-api GetStatus RingChangeRefused, security.md "another local Unix user"): the
/// refusal sentence of an unsaved pairing names the peer ("the pairing with "beta" (xxxx-xxxx)"),
/// which PairingSession1 keeps from other accounts (PeerName, PeerId): GetStatus gives it to the
/// machine's ring users only.
@Suite("BatonServiceTests: ReviewAttackTests, RingChangeRefused is the ring users' only", .serialized)
struct ReviewAttackRefusalTests {
    @Test func anotherAccountDoesNotReadTheRefusedPairingsPeer() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reviewattack-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing, commit: false)
        #expect(await eventually(timeout: .seconds(30)) { await a.pairing.session(pathA)?.phase.stateName == "reviewing" })
        // alpha's ring record cannot be written any more: a file where a record is expected.
        try Data("not a ring record".utf8).write(to: directory.appendingPathComponent("alpha").appendingPathComponent("ring"))
        let snapshotBefore = await a.ring.snapshot().roster
        try await a.pairing.commit(pathA, uid: getuid(), accepted: true)
        _ = await eventually(timeout: .seconds(20)) { await a.pairing.session(pathA)?.phase.isFinished == true }
        #expect(await a.pairing.session(pathA)?.phase == .failed(.notSaved))
        let other: UInt32 = getuid() == 65534 ? 65533 : 65534
        let sentence = try #require(await a.ring.refusedChange(for: getuid())?.sentence)
        #expect(sentence.contains("beta"), "\(sentence)")
        #expect(await a.ring.refusedChange(for: other) == nil)
        #expect(await a.ring.snapshot().roster == snapshotBefore)
        try? await b.pairing.cancel(pathB, uid: getuid())
        await a.stop()
        await b.stop()
    }
}
