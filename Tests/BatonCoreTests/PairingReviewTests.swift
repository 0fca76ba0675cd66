// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore

/// Issue 23 finding 8a: the Commit review shows what merging the peer's roster would change here
/// (members joining, members of this ring its marks remove, members it re-keys), computed by the
/// real merge on a copy.
@Suite struct PairingReviewTests {
    let random = SeededRandomFake(seed: 823)

    func ring(_ n: Int) throws -> [RingKeeper] { try KeeperRing(random: random).ring(n) }

    func review(of peer: RingKeeper, at here: RingKeeper) throws -> PairingReview {
        let entry = try #require(peer.state.roster.members[peer.deviceID])
        return PairingReview(ours: here.state.roster, peerRoster: peer.state.roster, peer: entry, me: here.deviceID)
    }

    @Test func aMarkAgainstOneOfOurMembersIsShownAsARemovalWithItsSigner() throws {
        var k = try ring(3)
        _ = k[2].remove(k[1].deviceID, random: random)
        let before = k[0].state.roster
        let shown = try review(of: k[2], at: k[0])
        #expect(k[0].state.roster == before, "the dry run stores nothing")
        #expect(shown.joining.isEmpty)
        #expect(shown.removals == [ReviewedRemoval(name: "k1", deviceID: k[1].deviceID, removedBy: k[2].deviceID, removedByName: "k2")])
        // k2 re-keyed when it removed k1; this machine re-keys on the commit because a member leaves (§7.4).
        let k2Before = try #require(before.members[k[2].deviceID]).secret.generation
        #expect(shown.generations.contains(ReviewedGeneration(name: "k2", deviceID: k[2].deviceID, from: k2Before, to: k[2].ownSecret.generation)))
        #expect(shown.generations.contains { $0.isThisDevice && $0.deviceID == k[0].deviceID && $0.to == $0.from + 1 })
        // What the review showed is what merging does.
        _ = try k[0].receive(k[2].state.roster, from: k[2].deviceID, random: random)
        #expect(k[0].state.roster.members[k[1].deviceID] == nil)
    }

    @Test func aMarkAgainstThisMachineIsShownAsSuch() throws {
        var k = try ring(3)
        _ = k[2].remove(k[0].deviceID, random: random)
        let shown = try review(of: k[2], at: k[0])
        #expect(shown.removals.map(\.deviceID) == [k[0].deviceID])
        #expect(shown.removals.first?.isThisDevice == true)
        #expect(shown.removals.first?.removedByName == "k2")
    }

    @Test func aNewerGenerationIsShownFromAndTo() throws {
        var k = try ring(3)
        let from = k[2].ownSecret.generation
        _ = k[2].rekey(random: random)
        let shown = try review(of: k[2], at: k[0])
        #expect(shown.joining.isEmpty && shown.removals.isEmpty)
        #expect(shown.generations == [ReviewedGeneration(name: "k2", deviceID: k[2].deviceID, from: from, to: from + 1)])
    }

    @Test func aPeerBringingNothingNewShowsEmptyLists() throws {
        let k = try ring(3)
        #expect(try review(of: k[1], at: k[0]) == PairingReview())
    }

    @Test func aNewRingShowsItsMembersJoiningAndNothingElse() throws {
        let k = try ring(3)
        let alone = try RingKeeper.create(name: "new", today: testDay, random: random)
        let shown = try review(of: k[0], at: alone)
        #expect(shown.joining == k.map { ReviewedMember(name: $0.state.name, deviceID: $0.deviceID) })
        #expect(shown.removals.isEmpty && shown.generations.isEmpty)
    }
}
