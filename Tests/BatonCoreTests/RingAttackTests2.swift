// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonCore
import BatonCrypto

/// A second attack on ring membership from protocol.md §3.1, §4.2, §7.3–§7.4 and security.md alone,
/// beyond RingAttackTests: mutual removals among four and five members in every delivery order,
/// cascades by two removers, a cascade racing a re-key, a thief introducing a fresh identity
/// through a member that has not re-keyed yet, a replayed digest, a plant grinding its id to be
/// spared, and clocks stepped around day boundaries and the 30-day re-key.
@Suite struct RingAttackTests2 {
    let random = SeededRandomFake(seed: 90_210)

    /// A RingSync from `from` to `to` and its reply (§6.2): the server merges the client's roster,
    /// answers a device it holds out with a removal notice, else with its roster after merging.
    func ringSync(_ keepers: inout [RingKeeper], from i: Int, to j: Int) throws {
        var (client, server) = (keepers[i], keepers[j])
        _ = try server.receive(client.state.roster, from: client.deviceID, random: random)
        let reply = server.state.roster.removalNotice(for: client.deviceID) ?? server.state.roster
        _ = try client.receive(reply, from: server.deviceID, random: random)
        (keepers[i], keepers[j]) = (client, server)
    }

    /// `sender`'s RingSync of `roster` reaches `keeper` only while it pins `sender`: holds its
    /// identity key as a member, or as removed or taken out (§8.1, §6.2). A device that started
    /// over holds nobody's, so a sync sent before it did never reaches it.
    func deliver(_ roster: Roster, from sender: DeviceID, to keeper: inout RingKeeper) throws {
        guard keeper.state.roster.entries[sender] != nil || keeper.state.roster.removalMarks[sender] != nil else { return }
        _ = try keeper.receive(roster, from: sender, random: random)
    }

    /// Every keeper syncs every member it holds until nothing changes (members that were away
    /// meet again, §7.4): at most `rounds` rounds. A connection needs pins (§8.1): the client
    /// holds the server as a member, and the server holds the client's identity key, as a member
    /// or as removed or taken out (who may still hand in marks, §6.2). A device that started over
    /// holds nobody's, so nobody reaches it.
    func gossip(_ keepers: inout [RingKeeper], rounds: Int = 10) throws {
        for _ in 0..<rounds {
            let before = keepers.map(\.state.roster)
            for i in keepers.indices {
                for j in keepers.indices where i != j && keepers[i].state.roster.members[keepers[j].deviceID] != nil {
                    let server = keepers[j].state.roster, client = keepers[i].deviceID
                    guard server.entries[client] != nil || server.removalMarks[client] != nil else { continue }
                    try ringSync(&keepers, from: i, to: j)
                }
            }
            if keepers.map(\.state.roster) == before { return }
        }
        Issue.record("no quiescence after \(rounds) rounds")
    }

    /// Convergence as §7.3 states it: two keepers that hold each other as members hold equal
    /// digests; with `mutual`, no keeper holds a member that does not hold it back.
    func expectConverged(_ keepers: [RingKeeper], _ label: String, mutual: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
        let byID = Dictionary(uniqueKeysWithValues: keepers.map { ($0.deviceID, $0) })
        for keeper in keepers {
            for id in keeper.state.roster.members.keys where id != keeper.deviceID {
                guard let other = byID[id] else { continue }
                let back = other.state.roster.members[keeper.deviceID] != nil
                #expect(back || !mutual, "\(label): \(keeper.state.name) holds \(other.state.name), not back", sourceLocation: sourceLocation)
                #expect(!back || other.state.roster.digest == keeper.state.roster.digest, "\(label): \(keeper.state.name) and \(other.state.name) differ",
                        sourceLocation: sourceLocation)
            }
        }
    }

    func names(_ keeper: RingKeeper, _ all: [RingKeeper]) -> [String] {
        all.filter { keeper.state.roster.members[$0.deviceID] != nil }.map(\.state.name).sorted()
    }

    // MARK: mutual removals, every delivery order

    /// Five members paired through k0. k1 and k2 remove each other (plain) while k3 removes k4.
    /// The three removals reach k0 in every order and k3 in both orders of the two it did not
    /// make: k1, k2 and k4 are out everywhere, k0 and k3 are the ring with equal digests, and
    /// each survivor's secret is of a generation none of the removed machines ever held.
    @Test func mutualPlainRemovalsAmongFiveInEveryOrder() throws {
        let ring = try KeeperRing(random: random).ring(5)
        var removing = ring
        _ = try removing[1].removeMember(ring[2].deviceID, random: random)
        _ = try removing[2].removeMember(ring[1].deviceID, random: random)
        _ = try removing[3].removeMember(ring[4].deviceID, random: random)
        let events = [1, 2, 3].map { (removing[$0].state.roster, removing[$0].deviceID) }
        let heldByRemoved = [1, 2, 4].flatMap { r in removing[r].state.roster.members.values.map { ($0.deviceID, $0.secret.generation) } }
        var outcomes: Set<[String]> = []
        for order in permutations([0, 1, 2]) {
            for k3Order in permutations([0, 1]) {
                var keepers = removing
                for e in order { try deliver(events[e].0, from: events[e].1, to: &keepers[0]) }
                for e in k3Order { try deliver(events[e].0, from: events[e].1, to: &keepers[3]) }
                try gossip(&keepers)
                expectConverged(keepers, "order \(order) \(k3Order)")
                for s in [0, 3] {
                    for r in [1, 2, 4] { #expect(keepers[s].state.roster.isOut(ring[r].deviceID) && keepers[s].peers[ring[r].deviceID] == nil) }
                    outcomes.insert(names(keepers[s], keepers))
                    let generation = try #require(keepers[s].state.roster.members[keepers[s].deviceID]).secret.generation
                    #expect(heldByRemoved.allSatisfy { $0.0 != keepers[s].deviceID || $0.1 < generation })
                }
                // Each removed machine found itself removed and started over alone.
                for r in [1, 2, 4] { #expect(keepers[r].state.roster.entries.keys.sorted() == [keepers[r].deviceID]) }
            }
        }
        #expect(outcomes == [["k0", "k3"]])
    }

    /// Four members, hub k0. A thief holding k2 answers the owner's cascade on k2 (signed at k1)
    /// with a cascading mark of its own for k1, or with a plain one; either reaches k0 and k3
    /// first or after, in every order. Both rogue and owner go, and with them everything reached
    /// from the two roots whose every introducer is reached or removed: here the whole ring, since
    /// pairing introduced both ways through k0 (what plain marks by the thief for every member
    /// could do too, §7.3 "Removal wins"). The result is the same in every order: no honest
    /// machine stays in a ring with the thief.
    @Test func mutualCascadesByTwoRemoversInEveryOrder() throws {
        let ring = try KeeperRing(random: random).ring(4)
        for thiefCascades in [true, false] {
            var removing = ring
            _ = try removing[1].removeMember(ring[2].deviceID, withIntroduced: true, random: random)
            _ = try removing[2].removeMember(ring[1].deviceID, withIntroduced: thiefCascades, random: random)
            let events = [1, 2].map { (removing[$0].state.roster, removing[$0].deviceID) }
            var outcomes: Set<[String]> = []
            for k0Order in permutations([0, 1]) {
                for k3Order in permutations([0, 1]) {
                    var keepers = removing
                    for e in k0Order { try deliver(events[e].0, from: events[e].1, to: &keepers[0]) }
                    for e in k3Order { try deliver(events[e].0, from: events[e].1, to: &keepers[3]) }
                    try gossip(&keepers)
                    expectConverged(keepers, "thief cascades \(thiefCascades), \(k0Order) \(k3Order)", mutual: false)
                    for keeper in keepers { outcomes.insert(names(keeper, keepers)) }
                    for keeper in keepers where keeper.deviceID != ring[2].deviceID {
                        #expect(keeper.peers[ring[2].deviceID] == nil, "the thief is a member at \(keeper.state.name)")
                    }
                }
            }
            // k0 and k3 started over alone. The owner's k1 and the thief's k2 each still list the
            // two (neither learns the other's mark: the only machines that held both started over
            // and forgot them), but neither reaches them: they pin nobody now.
            #expect(outcomes == [["k0"], ["k3"], ["k0", "k1", "k3"], ["k0", "k2", "k3"]], "thief cascades \(thiefCascades): \(outcomes)")
        }
    }

    /// Two different removers cascade two different rogues among five (k3 removes k4, k1 removes
    /// k2), while k4 (a thief) plain-removes k0 in its own name. Delivered in every order to the
    /// members that did not sign them. k0 (the hub, removed by the thief) is out; k2 and k4 are
    /// out; k1 and k3 stay (each is spared by its own cascade and by the other's, §7.3 step 5a)
    /// only where nothing reaches them through k0 alone, which is the same everywhere.
    @Test func twoCascadesAndAPlainRemovalInEveryOrder() throws {
        let ring = try KeeperRing(random: random).ring(5)
        var removing = ring
        _ = try removing[1].removeMember(ring[2].deviceID, withIntroduced: true, random: random)
        _ = try removing[3].removeMember(ring[4].deviceID, withIntroduced: true, random: random)
        _ = try removing[4].removeMember(ring[0].deviceID, random: random)
        let events = [1, 3, 4].map { (removing[$0].state.roster, removing[$0].deviceID) }
        var outcomes: Set<[[String]]> = []
        for order in permutations([0, 1, 2]) {
            var keepers = removing
            for r in [0, 1, 2, 3] {
                // Each receiver takes the events in the order rotated by its index.
                let rotated = Array(order[(r % 3)...] + order[..<(r % 3)])
                for e in rotated where events[e].1 != keepers[r].deviceID { try deliver(events[e].0, from: events[e].1, to: &keepers[r]) }
            }
            try gossip(&keepers)
            expectConverged(keepers, "order \(order)", mutual: false)
            outcomes.insert(keepers.map { names($0, keepers) })
            for keeper in keepers where keeper.deviceID != ring[4].deviceID && keeper.deviceID != ring[2].deviceID {
                #expect(keeper.peers[ring[4].deviceID] == nil && keeper.peers[ring[2].deviceID] == nil)
            }
        }
        #expect(outcomes.count == 1, "\(outcomes)")
    }

    // MARK: a cascade racing a re-key

    /// b re-keys (its 30-day renewal, §3.1) while a removes m with what it introduced. m hears b's
    /// new generation when b re-keys before the removal reaches it (after, b holds m out: m gets
    /// only a removal notice), a hears it before or after removing:
    /// whatever m got, b re-keys again on learning of the removal (§7.4), so m holds no generation
    /// of b that b still uses; a and b agree on each other's latest entry and digest.
    @Test func aCascadeRacingAReKey() throws {
        let (a0, b0, m0) = try KeeperRing(random: random).ring()
        for (mHearsRekey, aHearsRekeyFirst, bHearsRemovalFirst) in [(true, true, false), (true, false, false), (false, true, true), (false, false, true)] {
            var (a, b, m) = (a0, b0, m0)
            if bHearsRemovalFirst {
                _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random)
                _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
            }
            _ = b.rekey(random: random)
            let rekeyed = b.state.roster
            if mHearsRekey { _ = try m.receive(rekeyed, from: b.deviceID, random: random) }
            if aHearsRekeyFirst { _ = try a.receive(rekeyed, from: b.deviceID, random: random) }
            if !bHearsRemovalFirst { _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random) }
            if !aHearsRekeyFirst { _ = try a.receive(rekeyed, from: b.deviceID, random: random) }
            var keepers = [a, b, m]
            try gossip(&keepers)
            (a, b, m) = (keepers[0], keepers[1], keepers[2])
            let label = "m hears \(mHearsRekey), a first \(aHearsRekeyFirst), b first \(bHearsRemovalFirst)"
            expectConverged(keepers, label)
            #expect(names(a, keepers) == ["a", "b"] && names(b, keepers) == ["a", "b"], "\(label)")
            #expect(a.state.roster.members[b.deviceID]?.signature == b.state.roster.members[b.deviceID]?.signature, "\(label)")
            let bNow = try #require(b.state.roster.members[b.deviceID]).secret.generation
            let bHeldByM = try #require(m0.state.roster.members[b.deviceID]).secret.generation
            let bSeenByM = mHearsRekey ? try #require(rekeyed.members[b.deviceID]).secret.generation : bHeldByM
            #expect(bNow > bSeenByM, "\(label): m holds b's generation \(bSeenByM), b uses \(bNow)")
            #expect(m.state.roster.entries.keys.sorted() == [m.deviceID])
        }
    }

    // MARK: a thief re-pairing under a fresh identity

    /// A thief holding m makes a fresh identity t and has m introduce it (m's own signature, what
    /// pairing t with m would leave), then hands that roster to b before b has heard that a
    /// removed m. b takes t (a member introduced it) and sends it b's current secret: the one m
    /// already holds. With a cascading removal of m, t is out at a and b in both orders and gets
    /// none of the secrets issued after it; with a plain removal t stays (security.md: remove a
    /// stolen machine with what it introduced) until a cascading mark follows.
    @Test func aThiefsFreshIdentityThroughAMemberNotYetReKeyed() throws {
        let (a0, b0, m) = try KeeperRing(random: random).ring()
        let tKey = try Ed25519PrivateKey(seed: random.bytes(32))
        let t = try RosterMember.signed(name: "laptop", identity: tKey, secret: .generate(generation: 1, day: testDay, using: random))
            .introduced(by: try Introduction.make(for: tKey.publicKey, by: m.identity))
        var planted = m.state.roster
        planted.upsert(t)
        for cascading in [true, false] {
            for removalFirst in [true, false] {
                var (a, b) = (a0, b0)
                if removalFirst { _ = try a.removeMember(m.deviceID, withIntroduced: cascading, random: random) }
                let actions = try b.receive(planted, from: m.deviceID, random: random)
                #expect(actions.contains(.sync(t.deviceID)))
                let bGiven = b.ownSecret.generation
                #expect(bGiven == (try #require(m.state.roster.members[b.deviceID])).secret.generation, "a plant alone makes nobody re-key")
                if !removalFirst { _ = try a.removeMember(m.deviceID, withIntroduced: cascading, random: random) }
                var keepers = [a, b]
                try gossip(&keepers)
                (a, b) = (keepers[0], keepers[1])
                expectConverged(keepers, "cascading \(cascading), removal first \(removalFirst)")
                #expect(a.state.roster.isOut(m.deviceID) && b.state.roster.isOut(m.deviceID))
                #expect(b.ownSecret.generation > bGiven)
                if cascading {
                    #expect(a.state.roster.isOut(t.deviceID) && b.state.roster.isOut(t.deviceID))
                    #expect(a.peers[t.deviceID] == nil && b.peers[t.deviceID] == nil)
                    // Paired again from t itself, it is refused before any roster goes out.
                    #expect(throws: WireError.peerRemoved) { try b.checkPairingPeer(t.deviceID) }
                } else {
                    #expect(a.state.roster.members[t.deviceID] != nil && b.state.roster.members[t.deviceID] != nil)
                    _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random)
                    keepers = [a, b]
                    try gossip(&keepers)
                    #expect(keepers.allSatisfy { $0.state.roster.isOut(t.deviceID) && $0.peers[t.deviceID] == nil })
                }
            }
        }
    }

    // MARK: a replayed digest

    /// A thief that still holds m's identity answers Hello with the digest b holds (it knows the
    /// roster), so the digests look equal. A sync b owes m's other members after a removal is
    /// owed until a RingSync carrying that version was answered (§7.4): an equal digest, an
    /// answer to an older RingSync and a sighting do not clear it; only its own version does.
    @Test func aReplayedDigestDoesNotClearAnOwedSync() throws {
        var (a, b, m) = try KeeperRing(random: random).ring()
        let oldDigest = a.state.roster.digestPrefix
        _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random)
        let owed = try #require(a.state.pendingSyncs[b.deviceID])
        #expect(a.state.pendingSyncs[m.deviceID] == nil)
        #expect(oldDigest != a.state.roster.digestPrefix)
        // An answer to a RingSync of the version before the removal (a replayed reply).
        #expect(a.syncDelivered(to: b.deviceID, version: owed - 1).isEmpty)
        #expect(a.state.pendingSyncs[b.deviceID] == owed)
        #expect(a.sighted(b.deviceID) == [.sync(b.deviceID)])
        // m is no member: a never syncs it again, whatever it claims.
        #expect(a.sighted(m.deviceID).isEmpty)
        #expect(a.syncDelivered(to: b.deviceID, version: owed) == [.persist(a.state)])
        #expect(a.state.pendingSyncs[b.deviceID] == nil)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        #expect(b.state.roster.isOut(m.deviceID))
    }

    // MARK: a plant grinding its id

    /// The open case of RingAttackTests, measured against what §7.3 allows anyway. A thief with
    /// m plants p, ground to sort below every owner, and has p sign a cascading mark for m, so
    /// p's mark is the kept one of two for m (step 4) and p, not the owner, is spared. Compared
    /// with the same thief having p sign plain marks for a and b (which any ever-member may):
    /// the honest machines end in the same rings (each alone), p gets no secret issued after
    /// the attack from either, and every order converges. Closing it would need the kept
    /// cascading mark chosen by something the signer does not choose; every byte of a mark is
    /// the signer's (removedBy is the hash of a key it generates), and the merge must keep one
    /// mark per device by a fixed order to stay associative (§7.3), so no such order exists in v1.
    @Test func aGroundPlantsCascadeDoesNoMoreThanItsPlainMarks() throws {
        let (a0, b0, m) = try KeeperRing(random: random).ring()
        var pKey: Ed25519PrivateKey
        repeat { pKey = try Ed25519PrivateKey(seed: random.bytes(32)) }
        while ![a0.deviceID, b0.deviceID].allSatisfy({ DeviceID(identityKey: pKey.publicKey) < $0 })
        let p = try RosterMember.signed(name: "p", identity: pKey, secret: .generate(generation: 1, day: testDay, using: random))
            .introduced(by: try Introduction.make(for: pKey.publicKey, by: m.identity))
        var planted = m.state.roster
        planted.upsert(p)
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        let cascade = Roster(version: 1, members: Array(planted.entries.values),
                             removalMarks: [m.deviceID: try RemovalMark.make(removing: mEntry, by: pKey, cascading: true)])
        let plains = Roster(version: 1, members: Array(planted.entries.values),
                            removalMarks: [a0.deviceID: try RemovalMark.make(removing: try #require(planted.entries[a0.deviceID]), by: pKey),
                                           b0.deviceID: try RemovalMark.make(removing: try #require(planted.entries[b0.deviceID]), by: pKey)])
        var rings: [String: Set<[String]>] = [:]
        for (label, attack) in [("cascade", cascade), ("plain", plains)] {
            for ownerFirst in [true, false] {
                var (a, b) = (a0, b0)
                if ownerFirst { _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random) }
                _ = try b.receive(planted, from: m.deviceID, random: random)
                let bGiven = b.ownSecret.generation
                _ = try b.receive(attack, from: p.deviceID, random: random)
                if !ownerFirst { _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random) }
                var keepers = [a, b]
                try gossip(&keepers)
                expectConverged(keepers, "\(label) owner first \(ownerFirst)", mutual: false)
                for keeper in keepers {
                    #expect(keeper.state.roster.members[p.deviceID] == nil && keeper.peers[p.deviceID] == nil)
                    rings[label, default: []].insert(names(keeper, keepers))
                }
                #expect(keepers[1].ownSecret.generation > bGiven)
            }
        }
        #expect(rings["cascade"] == rings["plain"], "\(rings)")
    }

    // MARK: clocks

    /// The clock steps back across a day boundary after the day's ratchet: keys never move back
    /// (nothing changes, nothing is re-keyed), and the 30-day re-key still comes on the day the
    /// clock reaches 30 days after the issue day again, not later.
    @Test func aClockSteppedBackAcrossMidnightNeitherRewindsNorDelaysTheReKey() throws {
        var (a, _, _) = try KeeperRing(random: random).ring()
        let issued = try #require(a.ownSecret.chain).day
        #expect(a.ratchet(toDay: issued + 1, random: random).contains(.ratchetOwnSecret(try #require(a.ownSecret.ratcheted(toDay: issued + 1)))))
        let after = a.state
        #expect(a.ratchet(toDay: issued, random: random).isEmpty)
        #expect(a.state == after && a.ownSecret.day == issued + 1)
        let generation = a.ownSecret.generation
        #expect(a.ratchet(toDay: issued + 29, random: random).allSatisfy { if case .rotateOwnSecret = $0 { false } else { true } })
        #expect(a.ratchet(toDay: issued + 3, random: random).isEmpty)
        let actions = a.ratchet(toDay: issued + 30, random: random)
        #expect(a.ownSecret.generation == generation + 1)
        #expect(actions.contains(.rotateOwnSecret(a.ownSecret)))
        #expect(a.ownSecret.day == issued + 30)
    }

    /// The clock runs past the end of another member's chain (F ≤ D): there is no key of day D to
    /// move it to, so the stored key stays at its own day (§3.1, the one exception), covers no day of
    /// the window, and the member's next generation replaces it at its RingSync.
    @Test func aClockPastAMembersChainEndKeepsItsLastKeyUntilTheNextGeneration() throws {
        var (a, b, _) = try KeeperRing(random: random).ring()
        let chain = try #require(b.peers[a.deviceID]?.chain)
        let before = try #require(b.peers[a.deviceID])
        _ = b.ratchet(toDay: chain.endDay + 2, random: random)
        let kept = try #require(b.peers[a.deviceID])
        #expect(kept == before && !kept.covers(day: chain.endDay + 2))
        _ = a.ratchet(toDay: chain.endDay + 2, random: random)
        #expect(a.ownSecret.generation == before.generation + 1 && a.ownSecret.covers(day: chain.endDay + 2))
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        #expect(b.peers[a.deviceID] == a.ownSecret)
    }

    /// The clock runs days ahead (a 30-day re-key is issued on that future day), then is set back
    /// more than a day, so the sender replaces its secret on the clock's day (§4.2). The new
    /// generation covers the corrected clock, its re-key comes 30 days after that day, and the
    /// generations only ever grow (no generation of the future day is reissued with another
    /// secret).
    @Test func aClockAheadThenCorrectedReKeysForwardOnly() throws {
        var (a, b, _) = try KeeperRing(random: random).ring()
        let today = try #require(a.ownSecret.chain).day
        _ = a.ratchet(toDay: today + 40, random: random)
        let ahead = a.ownSecret
        #expect(ahead.day == today + 40)
        _ = a.rekey(random: random, today: today + 1)
        let corrected = a.ownSecret
        #expect(corrected.generation == ahead.generation + 1 && corrected.covers(day: today + 1) && corrected.day == today + 1)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        #expect(b.peers[a.deviceID]?.generation == corrected.generation)
        #expect(a.ratchet(toDay: today + 30, random: random).allSatisfy { if case .rotateOwnSecret = $0 { false } else { true } })
        _ = a.ratchet(toDay: today + 31, random: random)
        #expect(a.ownSecret.generation == corrected.generation + 1)
    }
}

/// The sender's nonces (§4.2) under a rollback of the sealed `ring` record alone (docs/security.md
/// "Key storage at rest": a record restored from a backup under the same credential opens, since it
/// authenticates; the record is from before a re-key, the plain advert counters from after it), and
/// under a clock stepped back and forth across midnight around the day's key ratchet.
@Suite struct RingRecordRollbackTests {
    /// Generation g sealed (E, 0) and (E, 1), the ring re-keyed to g + 1 in the same epoch and sealed
    /// under it, then the `ring` record of generation g is restored beside the counters of g + 1
    /// and batond starts again within E. Whatever the boot mark says (it names g + 1's secret, or
    /// there is none: a daemon without a runtime directory counts every start as its boot's first),
    /// the sender seals nothing under g before it replaced its secret: no (g, E, seq) twice.
    /// The clock steps back across midnight after the day's key ratchet (00:15 UTC), then forward
    /// again: the sender seals nothing in the day its ratcheted key no longer covers nor below its
    /// high-water epoch, continues that epoch's sequence when the clock is back, and never seals one
    /// nonce twice.
    @Test func aSenderClockSteppedBackAndForthAroundMidnight() throws {
        let clock = SenderClockTests()
        // Day 20832 ends with epoch 1,999,967 (SenderClockTests.record opens 1,999,900 ... 2,000,010).
        let issued = try RingKeeper.create(name: "a", today: 20_832, random: SeededRandomFake(seed: 5)).ownSecret
        let day = try #require(issued.chain).day
        let nextDay = try #require(issued.ratcheted(toDay: day + 1))
        var seals: [SenderClockTests.Seal: [[UInt8]]] = [:]
        func advertised(_ actions: [AdvertSender.Action]) -> Bool { actions.contains { if case .advertise = $0 { true } else { false } } }
        var sender = AdvertSender(secret: issued, restored: nil)
        let lastOfDay = (day + 1) * 96 - 1
        let started = sender.start(nowSeconds: seconds(epoch: lastOfDay) + 5)
        #expect(advertised(started))
        clock.record(started, secret: issued, into: &seals)
        // 00:16: the day's ratchet, then a seal in epoch 1 of the next day.
        sender.ratchet(nextDay)
        let after = sender.tick(nowSeconds: seconds(epoch: lastOfDay + 2) + 60)
        #expect(advertised(after))
        clock.record(after, secret: nextDay, into: &seals)
        // Back to 23:50 of the earlier day, and a content change: nothing sealed.
        let back = sender.tick(nowSeconds: seconds(epoch: lastOfDay) + 300)
            + sender.update(AdvertContent(activityType: "org.example.a"), nowSeconds: seconds(epoch: lastOfDay) + 301)
        #expect(!advertised(back))
        // Forward again into the high-water epoch: the waiting change goes out after its sequence.
        let again = sender.tick(nowSeconds: seconds(epoch: lastOfDay + 2) + 120)
        #expect(advertised(again))
        clock.record(again, secret: nextDay, into: &seals)
        #expect(seals.values.allSatisfy { $0.count == 1 }, "a nonce sealed two bodies: \(seals.filter { $0.value.count > 1 }.keys)")
        #expect(Set(seals.keys.filter { $0.epoch == lastOfDay + 2 }.map(\.sequence)) == [0, 1])
    }

    @Test func anOlderRingRecordBesideNewerCountersReKeysBeforeSealing() throws {
        let clock = SenderClockTests()
        let machine = [UInt8](repeating: 0xC, count: 32)
        let (old, newer) = (secret(0x70, generation: 4), secret(0x71, generation: 5))
        var seals: [SenderClockTests.Seal: [[UInt8]]] = [:]
        var mark: SenderBootMark?
        func carry(_ actions: [AdvertSender.Action], _ s: AdvertisingSecret) {
            for case .persist(_, let written) in actions { mark = written }
            clock.record(actions, secret: s, into: &seals)
        }
        let t0 = seconds(epoch: 2_000_000) + 10
        var first = AdvertSender(secret: old, restored: nil, machine: machine)
        carry(first.start(nowSeconds: t0), old)
        carry(first.update(AdvertContent(activityType: "org.example.a"), nowSeconds: t0 + 1), old)
        carry(first.rotateSecret(newer, nowSeconds: t0 + 2), newer)
        let counters = first.counters
        #expect(counters.generation == 5)
        for (label, bootMark, floor) in [("mark of g + 1", mark, t0 + 3), ("no mark, boot long ago", nil, t0 - 86_400)] {
            var restored = AdvertSender(secret: old, restored: counters, machine: machine, forgottenSealsUntil: floor,
                                        bootMark: bootMark, countersExpected: true)
            #expect(restored.needsRekey, "\(label)")
            let actions = restored.start(nowSeconds: t0 + 4) + restored.update(AdvertContent(activityType: "org.example.b"), nowSeconds: t0 + 5)
            #expect(!actions.contains { if case .advertise = $0 { true } else { false } }, "\(label): sealed under the restored secret")
            carry(actions, old)
            // The re-key RingService makes (rekeyIfCloned) lifts it: a new secret seals at once.
            let fresh = secret(0x72, generation: 6)
            let rekeyed = restored.rotateSecret(fresh, nowSeconds: t0 + 6)
            #expect(rekeyed.contains { if case .advertise = $0 { true } else { false } })
            carry(rekeyed, fresh)
        }
        #expect(seals.values.allSatisfy { $0.count == 1 }, "a nonce sealed two bodies: \(seals.filter { $0.value.count > 1 }.keys)")
        // Counters of an earlier generation (a re-key at start, before its counters were written)
        // are no rollback of the record: no re-key for them, the start floor still applies.
        let behind = AdvertSender(secret: newer, restored: SenderCounters(generation: 4, epoch: 2_000_000, nextSequence: 2, revision: 3, machine: machine),
                                  machine: machine, forgottenSealsUntil: t0 + 3, countersExpected: true)
        #expect(!behind.needsRekey && behind.startFloor == 2_000_001)
    }
}
