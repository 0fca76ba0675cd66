// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import Foundation
import Testing
@testable import BatonService

/// Issue 23 finding 8a: the Commit review shows the members the peer's roster would remove here,
/// not only those joining, so a person can refuse a pairing that would evict a machine of theirs.
@Suite("BatonServiceTests: the pairing review shows removals and re-keys", .serialized)
struct PairingReviewServiceTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pairreview-\(UUID().uuidString)")
    let uid = getuid()

    func finished(_ pairing: PairingService, _ path: String) async -> PairingPhase? {
        _ = await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.isFinished == true }
        return await pairing.session(path)?.phase
    }

    /// alpha pairs with gamma and removes it; gamma then pairs with beta. When beta pairs with
    /// alpha, beta's review lists gamma as removed by alpha; beta refuses and keeps gamma.
    @Test func theInitiatorsReviewShowsAMemberTheAcceptorsRingRemoved() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let g = try await BusLessNode.start(in: directory, name: "gamma")
        let first = try await pairWithoutBus(a.pairing, g.pairing)
        #expect(await finished(a.pairing, first.pathA)?.stateName == "paired")
        #expect(await finished(g.pairing, first.pathB)?.stateName == "paired")
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID, idG = await g.ring.deviceID
        try await a.ring.remove(idG.description)
        #expect(await a.ring.snapshot().roster.removed.contains(idG))

        let second = try await pairWithoutBus(g.pairing, b.pairing)
        #expect(await finished(b.pairing, second.pathB)?.stateName == "paired")
        #expect(await b.ring.snapshot().roster.members[idG] != nil)

        // beta (the initiator) pairs with alpha, whose ring holds gamma's tombstone.
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing, commit: false)
        #expect(await eventually(timeout: .seconds(30)) { await b.pairing.session(pathB)?.phase.stateName == "reviewing" })
        let progress = try #require(await b.pairing.session(pathB))
        #expect(progress.review.removals == [ReviewedRemoval(name: "gamma", deviceID: idG, removedBy: idA, removedByName: "alpha")])
        // beta re-keys on the commit because a member leaves (§7.4): said too.
        #expect(progress.review.generations.contains { $0.isThisDevice && $0.deviceID == idB })
        // PairingSession1 carries it as PeerRemovals (ssssb), read back as the client reads it.
        let read = try PairingSessionProperties(PairingSessionProperties(progress).dbusProperties)
        #expect(read.peerRemovals == [.init(name: "gamma", id: idG.shortForm, removedByName: "alpha", removedByID: idA.shortForm)])
        #expect(PairingSessionProperties(progress).dbusProperties["PeerRemovals"]?.signature == "a(ssssb)")
        #expect(PairingSessionProperties(progress).dbusProperties["PeerGenerations"]?.signature == "a(ssuub)")

        // beta's person refuses: gamma stays in beta's ring.
        try await b.pairing.cancel(pathB, uid: uid)
        #expect(await finished(b.pairing, pathB) == .failed(.rejected))
        try? await a.pairing.cancel(pathA, uid: uid)
        #expect(await b.ring.snapshot().roster.members[idG] != nil)
        await a.stop()
        await b.stop()
        await g.stop()
    }
}
