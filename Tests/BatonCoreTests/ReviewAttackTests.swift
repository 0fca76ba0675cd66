// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing
@testable import BatonCore

/// Red team, from the docs only (protocol §7.2 "What the users do", §7.3; dbus-api PairingSession1
/// PeerMembers/PeerRemovals/PeerGenerations, Ring1.ListMembers IntroducedBy): a rogue peer crafts
/// its roster so the review shows less than the commit does. Every attack checks the review against
/// what `RingKeeper.pair` (the commit) really does to a copy of this ring.
@Suite struct ReviewAttackTests {
    let random = SeededRandomFake(seed: 2320)
    var k: KeeperRing { KeeperRing(random: random) }

    func review(of peer: RingKeeper, at here: RingKeeper) throws -> PairingReview {
        let entry = try #require(peer.state.roster.members[peer.deviceID])
        return PairingReview(ours: here.state.roster, peerRoster: peer.state.roster, peer: entry, me: here.deviceID)
    }

    /// The commit on a copy of `here`.
    func commit(_ peer: RingKeeper, at here: RingKeeper) throws -> RingKeeper {
        var copy = here
        let entry = try #require(peer.state.roster.members[peer.deviceID])
        _ = try copy.pair(PairingResult(peer: entry, peerRoster: peer.state.roster), random: random)
        return copy
    }

    /// The review said exactly what the commit changed: members joining, members leaving (with the
    /// signer of their mark), generations raised (this machine included).
    func expectReviewMatchesCommit(_ shown: PairingReview, before: RingKeeper, after: RingKeeper,
                                   sourceLocation: SourceLocation = #_sourceLocation) {
        let was = before.state.roster, now = after.state.roster
        if shown.removals.contains(where: \.isThisDevice) {
            // The commit takes this machine out: it starts over alone (what the review warns of).
            #expect(after.peers.isEmpty && after.ownSecret.generation > before.ownSecret.generation, sourceLocation: sourceLocation)
            #expect(shown.removals.first { $0.isThisDevice }?.deviceID == before.deviceID, sourceLocation: sourceLocation)
            return
        }
        let joined = Set(now.members.keys).subtracting(was.members.keys)
        let left = Set(was.members.keys).subtracting(now.members.keys)
        #expect(Set(shown.joining.map(\.deviceID)) == joined, "joining", sourceLocation: sourceLocation)
        #expect(Set(shown.removals.map(\.deviceID)) == left, "removals", sourceLocation: sourceLocation)
        for removal in shown.removals {
            #expect(removal.removedBy == now.removalMarks[removal.deviceID]?.remover, "remover of \(removal.name)", sourceLocation: sourceLocation)
        }
        var raised: Set<[UInt32]> = []
        for (id, member) in was.members where id != before.deviceID {
            if let later = now.members[id], later.secret.generation > member.secret.generation {
                raised.insert([member.secret.generation, later.secret.generation])
            }
        }
        if after.ownSecret.generation > before.ownSecret.generation {
            raised.insert([before.ownSecret.generation, after.ownSecret.generation])
        }
        #expect(Set(shown.generations.map { [$0.from, $0.to] }) == raised, "generations", sourceLocation: sourceLocation)
    }

    /// here = k0 of a three-ring; m paired in by k1 alone (so introduced only by k1 at k0); the
    /// peer p paired with k1 too and then removed k1 with what it introduced.
    func cascadeSetup() throws -> (here: RingKeeper, m: RingKeeper, p: RingKeeper, k1: DeviceID) {
        var ring = try k.ring(3)
        var m = try RingKeeper.create(name: "m", today: testDay, random: random)
        var p = try RingKeeper.create(name: "p", today: testDay, random: random)
        try k.pair(&m, &ring[1])
        _ = try ring[0].receive(ring[1].state.roster, from: ring[1].deviceID, random: random)
        try k.pair(&p, &ring[1])
        _ = try p.removeMember(ring[1].deviceID, withIntroduced: true, random: random)
        return (ring[0], m, p, ring[1].deviceID)
    }

    /// A cascading mark hides a member of ours behind the member that introduced it: shown, with
    /// both remover fields empty (taken out with its introducer). Here the cascade of k1 reaches
    /// the whole ring (every member is introduced by members only, so all are reached from k1) and
    /// this machine with it: the review says so, as the commit does.
    @Test func aCascadeAgainstOurMemberIsShownWithoutASigner() throws {
        let (here, m, p, k1) = try cascadeSetup()
        #expect(here.state.roster.members[m.deviceID] != nil)
        let shown = try review(of: p, at: here)
        #expect(shown.removals.contains { $0.deviceID == k1 && $0.removedBy == p.deviceID && $0.removedByName == "p" })
        #expect(shown.removals.contains { $0.deviceID == m.deviceID && $0.removedBy == nil && $0.removedByName.isEmpty })
        #expect(shown.removals.contains { $0.isThisDevice && $0.deviceID == here.deviceID })
        expectReviewMatchesCommit(shown, before: here, after: try commit(p, at: here))
    }

    /// The cascade reaches this machine itself (m, introduced only by k1): the review says so first.
    @Test func aCascadeTakingThisMachineOutIsShownAsThisMachine() throws {
        let (_, m, p, k1) = try cascadeSetup()
        let shown = try review(of: p, at: m)
        let mine = try #require(shown.removals.first { $0.isThisDevice })
        #expect(mine.deviceID == m.deviceID && mine.removedBy == nil)
        #expect(shown.removals.contains { $0.deviceID == k1 })
        let after = try commit(p, at: m)
        #expect(after.peers.isEmpty, "committing took m out: it starts over alone, as the review warned")
    }

    /// A peer introduces a member our own cascade took out: the commit brings it back, and the
    /// review lists it as joining (not hidden because its entry was held here).
    @Test func aPeerReintroducingAMemberOurCascadeTookOutShowsItJoining() throws {
        var ring = try k.ring(3)
        var m = try RingKeeper.create(name: "m", today: testDay, random: random)
        var p = try RingKeeper.create(name: "p", today: testDay, random: random)
        try k.pair(&m, &ring[1])
        _ = try ring[0].receive(ring[1].state.roster, from: ring[1].deviceID, random: random)
        try k.pair(&p, &m)
        _ = try ring[0].removeMember(ring[1].deviceID, withIntroduced: true, random: random)
        let here = ring[0]
        #expect(here.state.roster.members[m.deviceID] == nil && here.state.roster.isOut(m.deviceID))
        let shown = try review(of: p, at: here)
        let after = try commit(p, at: here)
        expectReviewMatchesCommit(shown, before: here, after: after)
        if after.state.roster.members[m.deviceID] != nil {
            #expect(shown.joining.contains { $0.deviceID == m.deviceID })
        }
    }

    /// A marks against one of our members signed by a peer that never was a member, for a member
    /// it does not know, and its own re-key: the review matches the commit in every list.
    @Test func markAndReKeyTogetherMatchTheCommit() throws {
        var ring = try k.ring(3)
        var p = try RingKeeper.create(name: "p", today: testDay, random: random)
        try k.pair(&p, &ring[2])
        _ = try p.removeMember(ring[1].deviceID, random: random)
        _ = p.rekey(random: random)
        let shown = try review(of: p, at: ring[0])
        #expect(shown.removals.map(\.deviceID) == [ring[1].deviceID])
        expectReviewMatchesCommit(shown, before: ring[0], after: try commit(p, at: ring[0]))
    }

    /// A RingSync from a member arriving between review and Commit changes what the commit does:
    /// the peer's tombstone of x meets x only once a member brought x here. The review computed
    /// again then differs from the one shown, which the daemon checks at Commit (ring-changed).
    @Test func aRingSyncBetweenReviewAndCommitChangesTheReview() throws {
        var ring = try k.ring(3)
        var x = try RingKeeper.create(name: "x", today: testDay, random: random)
        var p = try RingKeeper.create(name: "p", today: testDay, random: random)
        try k.pair(&x, &p)
        _ = try p.removeMember(x.deviceID, random: random)
        let shown = try review(of: p, at: ring[0])
        #expect(shown.removals.isEmpty, "x is not in this ring yet")
        try k.pair(&x, &ring[1])
        _ = try ring[0].receive(ring[1].state.roster, from: ring[1].deviceID, random: random)
        let now = try review(of: p, at: ring[0])
        #expect(now.removals.map(\.deviceID) == [x.deviceID])
        #expect(now != shown, "the daemon refuses the commit: it would remove x, which the person never saw")
    }

    /// A peer roster sized so the merge fits the RingSync limit but the commit's own introduction of
    /// the peer does not: the commit is refused whole (protocol §7.3 bounds), not stored as a ring
    /// that can no longer be synced or saved (which batond would report as an unsaved record, with
    /// the wrong fix: free disk space).
    @Test func aRosterJustUnderTheLimitCannotPushTheCommitOverIt() throws {
        let here = try RingKeeper.create(name: "here", today: testDay, random: random)
        let pSeed = random.bytes(32)
        let pKey = try Ed25519PrivateKey(seed: pSeed)
        let secret = AdvertisingSecret.generate(generation: 1, day: testDay, using: random)
        let pEntry = try RosterMember.signed(name: "p", identity: pKey, secret: secret)
        let ourEntry = try #require(here.state.roster.members[here.deviceID])
        func filler(_ name: String) throws -> RosterMember {
            let key = try Ed25519PrivateKey(seed: random.bytes(32))
            return try RosterMember.signed(name: name, identity: key, secret: secret)
                .introduced(by: try Introduction.make(for: key.publicKey, by: pKey))
        }
        let limit = FrameType.ringSync.maxPayload
        func size(_ members: [RosterMember]) throws -> Int {
            try PropertyValueCodec.encode(Roster(version: 1_000, members: members + [ourEntry]).propertyValue).count
        }
        let long = String(repeating: "f", count: 60)
        let one = try size([pEntry, try filler(long)]), two = try size([pEntry, try filler(long), try filler(long)])
        let perMember = two - one
        var members = [pEntry]
        let count = (limit - 40 - (try size([pEntry]))) / perMember
        for i in 0..<count { members.append(try filler(String(("\(i)-" + long).prefix(60)))) }
        // Then shorten names until the union is 20 to 40 bytes under the limit.
        var total = try size(members)
        var index = 1
        while total > limit - 20, index < members.count {
            members[index] = try filler("s\(index)")
            total = try size(members)
            index += 1
        }
        try #require(total <= limit - 20 && total > limit - 200, "union \(total) bytes")
        let p = try RingKeeper(state: .init(name: "p", identitySeed: pSeed, roster: Roster(version: 1, members: members)))
        var merged = here.state.roster
        _ = try merged.merge(p.state.roster, me: here.deviceID, anchor: p.deviceID)
        #expect(try merged.encoded().count <= limit, "the merge alone fits")
        var copy = here
        let error = #expect(throws: WireError.self) { _ = try copy.pair(PairingResult(peer: pEntry, peerRoster: p.state.roster), random: random) }
        if case .payloadTooLarge? = error {} else { Issue.record("refused as \(String(describing: error)), not as too large") }
        #expect(copy.state == here.state, "nothing changed")
    }

    /// Attribution (dbus-api Ring1.ListMembers IntroducedBy): a rogue member signs its own
    /// introduction of a member this device paired itself, and of a member another member paired.
    /// It can neither make the first read "introduced by" it nor make the second read as introduced
    /// by a removed member while its real introducer is here.
    @Test func aRogueMemberCannotRewriteWhoIntroducedAMember() throws {
        var ring = try k.ring(3)
        var m = try RingKeeper.create(name: "m", today: testDay, random: random)
        try k.pair(&m, &ring[1])
        _ = try ring[0].receive(ring[1].state.roster, from: ring[1].deviceID, random: random)
        let rogue = ring[2]
        let me = ring[0].deviceID
        // The rogue introduces k1 (paired here by k0) and m (introduced by k1) in its own name.
        var crafted = rogue.state.roster
        _ = try crafted.merge(ring[0].state.roster, me: rogue.deviceID)
        let introducedK1 = crafted.introduce(ring[1].deviceID, by: rogue.identity)
        let introducedM = crafted.introduce(m.deviceID, by: rogue.identity)
        #expect(introducedK1 && introducedM)
        _ = try ring[0].receive(crafted, from: rogue.deviceID, random: random)
        let roster = ring[0].state.roster
        #expect(roster.members[ring[1].deviceID]?.introductions.contains { $0.introducer == rogue.deviceID } == true)
        #expect(roster.shownIntroducer(of: ring[1].deviceID, me: me) == nil, "paired here: no introducer shown")
        #expect(roster.shownIntroducer(of: me, me: me) == nil)
        let mShown = try #require(roster.shownIntroducer(of: m.deviceID, me: me))
        #expect([ring[1].deviceID, rogue.deviceID].contains(mShown))
        // The rogue is removed: m reads as introduced by k1, who is still here, not "(removed)".
        _ = try ring[0].removeMember(rogue.deviceID, random: random)
        let after = ring[0].state.roster
        #expect(after.shownIntroducer(of: m.deviceID, me: me) == ring[1].deviceID)
    }
}
