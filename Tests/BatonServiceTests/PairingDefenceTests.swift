// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// Issue 11 item 4 and the removed machine of item 3: pairing that one careless click cannot defeat.
@Suite("BatonServiceTests: pairing defences (typed code, contested sessions, review, removed peers)", .serialized)
struct PairingDefenceTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pairdef-\(UUID().uuidString)")
    let uid = getuid()

    func finished(_ pairing: PairingService, _ path: String) async -> PairingPhase? {
        _ = await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.isFinished == true }
        return await pairing.session(path)?.phase
    }

    @Test func aRemovedMachinePairingAgainFailsVisiblyAndReceivesNoRoster() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await finished(a.pairing, pathA) == .paired(peerName: "beta", peerID: await b.ring.deviceID))
        #expect(await finished(b.pairing, pathB)?.stateName == "paired")
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        try await a.ring.remove(idB.description)
        let afterRemoval = await a.ring.snapshot()

        // beta comes back and pairs again: both sides fail with peer-removed before any roster.
        let again = try await pairWithoutBus(a.pairing, b.pairing, commit: false)
        #expect(await finished(a.pairing, again.pathA) == .failed(.peerRemoved))
        #expect(await finished(b.pairing, again.pathB) == .failed(.peerRemoved))
        #expect(await b.pairing.session(again.pathB)?.textProperties["Error"] == "peer-removed")
        // beta merged nothing of alpha's; alpha still lacks beta, and re-keyed as a precaution
        // (the identity message beta saw carries no secret any more, §7.2).
        #expect(await b.ring.snapshot().roster.members[idA]?.secret != afterRemoval.ownSecret)
        let afterRefusal = await a.ring.snapshot()
        #expect(afterRefusal.roster.members[idB] == nil && afterRefusal.roster.removed.contains(idB))
        #expect(afterRefusal.ownSecret != afterRemoval.ownSecret)
        #expect(afterRefusal.ownSecret.generation == afterRemoval.ownSecret.generation + 1)
        #expect(afterRefusal.rosterVersion > afterRemoval.rosterVersion)
        await a.stop()
        await b.stop()
    }

    @Test func aWrongTypedCodeFailsTheSessionAndAYesFromTheInitiatorIsRefused() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let pathA = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
        let waiting = try #require(await a.pairing.session(pathA))
        let pathB = try await b.pairing.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(30)) { await pairing.session(path)?.phase.stateName == "confirming" })
        }
        // Only the acceptor shows the code; neither side can just click yes.
        let code = try #require(await a.pairing.session(pathA)?.textProperties["Code"])
        #expect(code.count == 6)
        #expect(await b.pairing.session(pathB)?.textProperties["Code"] == "")
        await #expect(throws: ServiceFailure.self) { try await b.pairing.confirm(pathB, uid: uid, accepted: true) }
        await #expect(throws: ServiceFailure.self) { try await a.pairing.confirm(pathA, uid: uid, accepted: true) }
        let wrong = String(code.map { $0 == "9" ? "0" : Character(String(($0.wholeNumberValue ?? 0) + 1)) })
        try await b.pairing.confirmCode(pathB, uid: uid, code: wrong)
        #expect(await finished(b.pairing, pathB) == .failed(.verificationFailed))
        #expect(await finished(a.pairing, pathA)?.stateName == "failed")
        #expect(await a.ring.snapshot().roster.members.count == 1)
        #expect(await b.ring.snapshot().roster.members.count == 1)
        await a.stop()
        await b.stop()
    }

    /// Finding 5 of issue 23: the acceptor's user confirms what the initiator's screen shows. A yes
    /// is refused, and typing the code on its own screen (a reflex) fails the session: only the
    /// second code, which the initiator shows once its user typed the first, confirms.
    @Test func theAcceptorConfirmsOnlyByTypingTheSecondCodeTheInitiatorShows() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let pathA = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
        let waiting = try #require(await a.pairing.session(pathA))
        let pathB = try await b.pairing.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "confirming" })
        }
        let code = try #require(await a.pairing.session(pathA)?.visibleCode)
        await #expect(throws: ServiceFailure.self) { try await a.pairing.confirm(pathA, uid: uid, accepted: true) }
        try await b.pairing.confirmCode(pathB, uid: uid, code: code)
        #expect(await eventually(timeout: .seconds(10)) { await b.pairing.session(pathB)?.visibleCode.count == 6 })
        let second = try #require(await b.pairing.session(pathB)?.visibleCode)
        #expect(second != code)
        // alpha's user types alpha's own code instead of the one beta shows: nothing joins.
        try await a.pairing.confirmCode(pathA, uid: uid, code: code)
        #expect(await finished(a.pairing, pathA) == .failed(.verificationFailed))
        #expect(await finished(b.pairing, pathB) == .failed(.rejected))
        #expect(await a.ring.snapshot().roster.members.count == 1)
        #expect(await b.ring.snapshot().roster.members.count == 1)
        await a.stop()
        await b.stop()
    }

    /// Finding 5 of issue 23: an attacker that connects first does not take the acceptor's pairing
    /// advert (nor its listener) off the air, so the real initiator still finds the acceptor, and
    /// its arrival fails the session as contested, even after the attacker's user typed the code.
    @Test func theAcceptorKeepsItsAdvertUntilItsUserTypedTheSecondCodeSoTheRealInitiatorContests() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), m = try await BusLessNode.start(in: directory, name: "laptop")
        let b = try await BusLessNode.start(in: directory, name: "laptop")
        let pathA = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
        let waiting = try #require(await a.pairing.session(pathA))
        func advertising() -> Bool { (a.radio.onAir.flatMap { try? PairingAdvert(decoding: $0) })?.sessionID == waiting.sessionID }
        #expect(await eventually(timeout: .seconds(10)) { advertising() })
        let pathM = try await m.pairing.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
        #expect(await eventually(timeout: .seconds(10)) { await a.pairing.session(pathA)?.phase.stateName == "confirming" })
        #expect(await eventually(timeout: .seconds(10)) { await m.pairing.session(pathM)?.phase.stateName == "confirming" })
        // Even knowing the code (read over the user's shoulder), the attacker only gets a second code on its own screen.
        try await m.pairing.confirmCode(pathM, uid: uid, code: try #require(await a.pairing.session(pathA)?.visibleCode))
        #expect(await eventually(timeout: .seconds(10)) { await m.pairing.session(pathM)?.visibleCode.count == 6 })
        try await Task.sleep(for: .milliseconds(300))
        #expect(advertising(), "the pairing advert left the air at the attacker's connection")
        // The real laptop finds the advert and dials: the session fails, nothing joins anywhere.
        let pathB = try await b.pairing.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
        #expect(await finished(a.pairing, pathA) == .failed(.contested))
        #expect(await finished(m.pairing, pathM)?.stateName == "failed")
        #expect(await finished(b.pairing, pathB)?.stateName == "failed")
        #expect(await eventually(timeout: .seconds(10)) { !advertising() })
        for node in [a, b, m] { #expect(await node.ring.snapshot().roster.members.count == 1) }
        await a.stop()
        await m.stop()
        await b.stop()
    }

    /// Once the acceptor's user typed the second code, the advert goes and the listeners close.
    @Test func theAdvertGoesOnceTheAcceptorsUserTypedTheSecondCode() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, _) = try await pairWithoutBus(a.pairing, b.pairing, commit: false)
        let sessionID = try #require(await a.pairing.session(pathA)?.sessionID)
        #expect(await a.pairing.session(pathA)?.wantsInitiators == false)
        #expect(await eventually(timeout: .seconds(10)) {
            (a.radio.onAir.flatMap { try? PairingAdvert(decoding: $0) })?.sessionID != sessionID
        })
        _ = try? await a.pairing.cancel(pathA, uid: uid)
        await a.stop()
        await b.stop()
    }

    @Test func twoInitiatorsRacingFailTheSessionAsContestedAndJoinNothing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta"), m = try await BusLessNode.start(in: directory, name: "mallory")
        let pathA = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
        let waiting = try #require(await a.pairing.session(pathA))
        let target = "127.0.0.1:\(waiting.port)"
        async let first = m.pairing.pair(uid: uid, target: target, sessionID: waiting.sessionID, addressType: nil)
        async let second = b.pairing.pair(uid: uid, target: target, sessionID: waiting.sessionID, addressType: nil)
        let (pathM, pathB) = try await (first, second)
        #expect(await finished(a.pairing, pathA) == .failed(.contested))
        #expect(await finished(m.pairing, pathM)?.stateName == "failed")
        #expect(await finished(b.pairing, pathB)?.stateName == "failed")
        for node in [a, b, m] { #expect(await node.ring.snapshot().roster.members.count == 1) }
        await a.stop()
        await b.stop()
        await m.stop()
    }

    @Test func aLateSecondInitiatorAbortsASessionWaitingForTheCode() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), m = try await BusLessNode.start(in: directory, name: "mallory")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let pathA = try await a.pairing.acceptPairing(uid: uid, host: "127.0.0.1")
        let waiting = try #require(await a.pairing.session(pathA))
        let pathM = try await m.pairing.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
        #expect(await eventually(timeout: .seconds(10)) { await a.pairing.session(pathA)?.phase.stateName == "confirming" })
        // The real initiator arrives while the attacker's code is on screen.
        let pathB = try await b.pairing.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
        #expect(await finished(a.pairing, pathA) == .failed(.contested))
        await #expect(throws: ServiceFailure.self) { try await a.pairing.confirm(pathA, uid: uid, accepted: true) }
        #expect(await finished(m.pairing, pathM)?.stateName == "failed")
        #expect(await finished(b.pairing, pathB)?.stateName == "failed")
        #expect(await a.ring.snapshot().roster.members.count == 1)
        await a.stop()
        await m.stop()
        await b.stop()
    }

    @Test func thePeersMembersAreShownAndNothingMergesWithoutCommit() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let limits = PairingLimits(reviewTimeout: .milliseconds(500))
        let a = try await BusLessNode.start(in: directory, name: "alpha", pairingLimits: limits)
        let b = try await BusLessNode.start(in: directory, name: "beta", pairingLimits: limits)
        let c = try await BusLessNode.start(in: directory, name: "gamma", pairingLimits: limits)
        let first = try await pairWithoutBus(b.pairing, c.pairing)
        #expect(await finished(b.pairing, first.pathA)?.stateName == "paired")
        let idB = await b.ring.deviceID, idC = await c.ring.deviceID

        // alpha pairs with beta's ring: alpha is shown beta and gamma, then refuses; nothing merges on alpha.
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing, commit: false)
        #expect(await eventually(timeout: .seconds(10)) { await a.pairing.session(pathA)?.phase.stateName == "reviewing" })
        let shown = await a.pairing.session(pathA)?.peerMemberLines ?? []
        #expect(Set(shown) == ["beta (\(idB.shortForm))", "gamma (\(idC.shortForm))"])
        try await a.pairing.cancel(pathA, uid: uid)
        #expect(await finished(a.pairing, pathA) == .failed(.rejected))
        #expect(await a.ring.snapshot().roster.members.count == 1)
        // beta's user never answers: the review times out and beta merges nothing either.
        #expect(await finished(b.pairing, pathB) == .failed(.timedOut))
        #expect(await b.ring.snapshot().roster.members.count == 2)
        await a.stop()
        await b.stop()
        await c.stop()
    }

    /// Issue 23: `bt-pair remove beta` with what it introduced signs one cascading mark; gamma,
    /// which only beta paired, leaves alpha's ring with it, and alpha (which beta paired too) stays.
    @Test func removingWithWhatItIntroducedSignsOneMark() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta"), c = try await BusLessNode.start(in: directory, name: "gamma")
        let ab = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await finished(a.pairing, ab.pathA)?.stateName == "paired")
        let bc = try await pairWithoutBus(b.pairing, c.pairing)
        #expect(await finished(b.pairing, bc.pathA)?.stateName == "paired")
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID, idC = await c.ring.deviceID
        #expect(await eventually(timeout: .seconds(10)) { await a.ring.isMember(idC) })
        #expect(try await a.ring.introduced(by: "beta").map(\.deviceID) == [idC])
        try await a.ring.remove("beta", withIntroduced: true)
        let roster = await a.ring.snapshot().roster
        #expect(Set(roster.members.keys) == [idA])
        #expect(roster.removalMarks.count == 1 && roster.removalMarks[idB]?.cascading == true && roster.derivedOut == [idC])
        #expect(await a.ring.memberSummaries().map(\.deviceID) == [idA])
        await a.stop()
        await b.stop()
        await c.stop()
    }

    @Test func membersLearnedFromAnotherShowTheirIntroducer() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta"), c = try await BusLessNode.start(in: directory, name: "gamma")
        let ab = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await finished(a.pairing, ab.pathA)?.stateName == "paired")
        let ac = try await pairWithoutBus(a.pairing, c.pairing)
        #expect(await finished(a.pairing, ac.pathA)?.stateName == "paired")
        let idA = await a.ring.deviceID, idC = await c.ring.deviceID
        #expect(await eventually(timeout: .seconds(10)) { await b.ring.isMember(idC) })
        let onBeta = await b.ring.memberSummaries()
        #expect(onBeta.first { $0.deviceID == idC }?.introducedBy == idA)
        // beta paired alpha itself: no introducer shown; nor for itself.
        #expect(onBeta.first { $0.deviceID == idA }?.introducedBy == nil)
        #expect(onBeta.first { $0.isSelf }?.introducedBy == nil)
        #expect(try await b.ring.introduced(by: "alpha").map(\.deviceID) == [idC])
        #expect(RingBus.ringMember(try #require(onBeta.first { $0.deviceID == idC })).introducedBy == idA.shortForm)
        await a.stop()
        await b.stop()
        await c.stop()
    }
}
