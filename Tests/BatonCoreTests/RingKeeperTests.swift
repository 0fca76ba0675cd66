// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

@Suite struct RingKeeperTests {
    let random = SeededRandomFake(seed: 21)

    func pair(_ a: inout RingKeeper, _ b: inout RingKeeper) throws -> (atA: [RingKeeper.Action], atB: [RingKeeper.Action]) {
        var h = PairingHarness(random: random, initiatorInfo: a.pairingInfo(), responderInfo: b.pairingInfo())
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        h.confirm(initiator: true, responder: true)
        let atA = a.paired(try #require(h.results[.initiator]), random: random)
        let atB = b.paired(try #require(h.results[.responder]), random: random)
        return (atA, atB)
    }

    @Test func pairingJoinsRingsAndTellsTheOthers() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        var b = try RingKeeper.create(name: "b", today: testDay, random: random)
        var c = try RingKeeper.create(name: "c", today: testDay, random: random)
        _ = try pair(&a, &b)
        #expect(a.peers.keys.sorted() == [b.deviceID])
        #expect(b.peers[a.deviceID] == a.ownSecret)
        let (atC, atB) = try pair(&c, &b)
        // b already knew a: c learns a through b's roster, and b tells a about c.
        #expect(Set(c.peers.keys) == [a.deviceID, b.deviceID])
        #expect(atB.contains(.sync(a.deviceID)))
        #expect(!atB.contains(.sync(c.deviceID)))
        #expect(atC.first == .persist(c.state))
        // a receives b's roster over RingSync and learns c.
        let atA = a.received(b.state.roster, from: b.deviceID, random: random)
        #expect(Set(a.peers.keys) == [b.deviceID, c.deviceID])
        #expect(atA.contains(.membersChanged(a.peers)))
        #expect(atA.contains(.sync(c.deviceID)))
        #expect(a.received(b.state.roster, from: b.deviceID, random: random).isEmpty)  // converged
    }

    @Test func removalRotatesSecretsEverywhereAndLocksTheMemberOut() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        var b = try RingKeeper.create(name: "b", today: testDay, random: random)
        var c = try RingKeeper.create(name: "c", today: testDay, random: random)
        _ = try pair(&a, &b)
        _ = try pair(&a, &c)
        _ = b.received(a.state.roster, from: a.deviceID, random: random)
        let oldA = a.ownSecret, oldB = b.ownSecret
        let actions = a.remove(c.deviceID, random: random)
        #expect(a.ownSecret.generation == oldA.generation + 1)
        #expect(actions.contains(.rotateOwnSecret(a.ownSecret)))
        #expect(actions.contains(.sync(b.deviceID)))
        #expect(!actions.contains(.sync(c.deviceID)))
        #expect(a.peers[c.deviceID] == nil)
        // b hears of the removal and rotates too; the new secrets reach a.
        let atB = b.received(a.state.roster, from: a.deviceID, random: random)
        #expect(b.ownSecret.generation == oldB.generation + 1)
        #expect(atB.contains(.rotateOwnSecret(b.ownSecret)))
        _ = a.received(b.state.roster, from: b.deviceID, random: random)
        #expect(a.peers[b.deviceID] == b.ownSecret)
        // c still holds old secrets: it cannot open adverts sealed with the new ones.
        var matcherAtC = AdvertMatcher(epoch: 2_000_000)
        for (id, s) in c.peers { matcherAtC.setMember(id, secret: s) }
        var sender = AdvertSender(secret: a.ownSecret, restored: nil)
        guard case .advertise(let advert) = sender.start(nowSeconds: seconds(epoch: 2_000_000)).last else { Issue.record("no advert"); return }
        #expect(throws: WireError.notRingMember) { try matcherAtC.receive(advert) }
        // A stale roster from c cannot bring it back.
        #expect(a.received(c.state.roster, from: c.deviceID, random: random).allSatisfy { if case .membersChanged(let m) = $0 { return m[c.deviceID] == nil }; return true })
        #expect(a.peers[c.deviceID] == nil)
        // When c finally hears it was removed, it starts over alone, with the generation after its
        // last one (issue 23: it took 1, whatever it had before).
        let oldC = c.ownSecret
        let atC = c.received(a.state.roster, from: a.deviceID, random: random)
        #expect(c.peers.isEmpty)
        #expect(atC.contains(.membersChanged([:])))
        #expect(c.ownSecret.generation == oldC.generation + 1 && c.ownSecret.bytes != oldC.bytes)
        #expect(atC.contains(.rotateOwnSecret(c.ownSecret)))
    }

    /// §7.3 step 7: the roster version is a local counter, raised by 1 for each change made here. A
    /// local re-key has one change (the own entry of the next generation): exactly + 1, and the
    /// RingSync it owes each member carries that version. A pairing join and a removal count 2.
    @Test func aLocalRekeyRaisesTheRosterVersionByExactlyOne() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        var b = try RingKeeper.create(name: "b", today: testDay, random: random)
        var c = try RingKeeper.create(name: "c", today: testDay, random: random)
        // A ring of one.
        var version = a.state.roster.version
        _ = a.rekey(random: random)
        #expect(a.state.roster.version == version + 1)
        // A pairing join: the merge that brings the peer, then the introduction signed for it.
        let (beforeA, beforeB) = (a.state.roster.version, b.state.roster.version)
        _ = try pair(&a, &b)
        #expect(a.state.roster.version == beforeA + 2 && b.state.roster.version == beforeB + 2)
        // A re-key in a ring of two: + 1, and b is owed a RingSync of exactly that version.
        version = a.state.roster.version
        let digest = a.state.roster.digest, generation = a.ownSecret.generation
        let actions = a.rekey(random: random)
        #expect(a.ownSecret.generation == generation + 1 && a.state.roster.digest != digest)
        #expect(a.state.roster.version == version + 1)
        #expect(a.state.pendingSyncs[b.deviceID] == version + 1)
        #expect(actions.contains(.sync(b.deviceID)))
        // b merges it: one merge that changed the digest, + 1 (the received version is not taken).
        let atB = b.state.roster.version
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        #expect(b.state.roster.version == atB + 1)
        // A removal here: the tombstone, then the re-key.
        _ = try pair(&a, &c)
        version = a.state.roster.version
        _ = try a.removeMember(c.deviceID, random: random)
        #expect(a.state.roster.version == version + 2)
        // Days do not count (§3.1): the daily ratchet leaves the version as it is.
        version = a.state.roster.version
        _ = a.ratchet(toDay: testDay + 1, random: random)
        #expect(a.state.roster.version == version)
    }

    @Test func cannotRemoveSelfOrUnknownTwice() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        #expect(a.remove(a.deviceID, random: random).isEmpty)
        let stranger = deviceID(77)
        // Marks only for devices that are members (§7.3, issue 23): a stranger gets no tombstone.
        #expect(a.remove(stranger, random: random).isEmpty)
        #expect(throws: WireError.notRingMember) { try a.removeMember(stranger, random: random) }
        #expect(a.state.roster.removed.isEmpty)
    }

    /// Issue 23 / §7.5: a new identity forgets the ring and starts a ring of one, its secret of the
    /// generation after the old one; the state to persist comes first.
    @Test func resetIdentityStartsARingOfOneUnderANewIdentity() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        var b = try RingKeeper.create(name: "b", today: testDay, random: random)
        _ = try pair(&a, &b)
        _ = a.rekey(random: random)
        a.maxKeyAgeDays = 7
        let oldID = a.deviceID, oldGeneration = a.ownSecret.generation
        let actions = try a.resetIdentity(today: testDay + 1, random: random)
        #expect(a.deviceID != oldID)
        #expect(Array(a.state.roster.members.keys) == [a.deviceID])
        #expect(a.state.roster.removalMarks.isEmpty && a.state.pendingSyncs.isEmpty && a.peers.isEmpty)
        #expect(a.state.roster.version == 1 && a.state.name == "a")
        #expect(a.ownSecret.generation == oldGeneration + 1 && a.ownSecret.day == testDay + 1)
        #expect(a.maxKeyAgeDays == 7)
        #expect(actions == [.persist(a.state), .rotateOwnSecret(a.ownSecret), .membersChanged([:])])
        // The state stored is the new identity's.
        #expect(try RingKeeper(state: a.state).deviceID == a.deviceID)
        // The other member is not told: it still holds the old id.
        #expect(b.peers[oldID] != nil)
    }
}
