// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTestBus
import Foundation
import Testing
@testable import BatonService

/// dbus-api PairingSession1: Commit merges exactly what the review showed; Cancel ends a session
/// "and nothing is stored". A Cancel that comes while a Commit's join is being written (a second
/// click, another terminal of the same user) must leave the session telling the truth: it ends
/// `paired` and the peer is a member, or it ends failed and nothing of the peer was stored.
@Suite("BatonServiceTests: Cancel racing Commit", .serialized)
struct CancelCommitRaceTests {
    let uid = getuid()

    func finished(_ pairing: PairingService, _ path: String) async -> PairingPhase? {
        _ = await eventually(timeout: .seconds(120)) { await pairing.session(path)?.phase.isFinished == true }
        return await pairing.session(path)?.phase
    }

    /// Three orders: Cancel right after Commit returned (the join is being written), Cancel and
    /// Commit sent together, and Cancel first (then Commit has nothing to commit).
    @Test(arguments: ["cancel after commit", "together", "cancel first"])
    func theSessionsEndAgreesWithTheRing(order: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cancelcommit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let idA = await a.ring.deviceID
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing, commit: false)
        #expect(await eventually(timeout: .seconds(120)) { await b.pairing.session(pathB)?.phase.stateName == "reviewing" })
        let uid = uid
        switch order {
        case "cancel after commit":
            try await b.pairing.commit(pathB, uid: uid, accepted: true)
            try? await b.pairing.cancel(pathB, uid: uid)
        case "together":
            async let committed: Void = { try? await b.pairing.commit(pathB, uid: uid, accepted: true) }()
            async let cancelled: Void = { try? await b.pairing.cancel(pathB, uid: uid) }()
            _ = await (committed, cancelled)
        default:
            try await b.pairing.cancel(pathB, uid: uid)
            await #expect(throws: ServiceFailure.self) { try await b.pairing.commit(pathB, uid: uid, accepted: true) }
        }
        let phase = try #require(await finished(b.pairing, pathB))
        let member = await b.ring.snapshot().roster.members[idA] != nil
        if case .paired = phase {
            #expect(member, "the session says paired but alpha is not in beta's ring")
        } else {
            #expect(!member, "the session ended \(phase) but alpha joined beta's ring")
        }
        if order == "cancel first" { #expect(!member && phase == .failed(.rejected)) }
        // What beta stored is what it keeps: a restart reads the same ring.
        let stored = await b.ring.snapshot().roster
        await b.stop()
        let restarted = try await BusLessNode.start(in: directory, name: "beta")
        #expect(await restarted.ring.snapshot().roster == stored)
        try? await a.pairing.cancel(pathA, uid: uid)
        await a.stop()
        await restarted.stop()
    }
}
