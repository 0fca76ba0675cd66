// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonCore
import BatonCrypto

/// Attacks on ring membership formed from protocol.md §7.3–§7.4 and security.md alone (a rogue
/// member, a thief with a member's state, a removed machine, a rolled-back state directory, a
/// racing initiator), each asserting the defence the text promises.
@Suite struct RingAttackTests {
    let random = SeededRandomFake(seed: 7_731)

    func ring() throws -> (a: RingKeeper, b: RingKeeper, m: RingKeeper) { try KeeperRing(random: random).ring() }

    /// A member entry signed by a fresh identity (returned too), introduced by `introducers`.
    func entry(_ name: String, introducedBy introducers: [Ed25519PrivateKey] = [], key given: Ed25519PrivateKey? = nil) throws -> (RosterMember, Ed25519PrivateKey) {
        let key = try given ?? Ed25519PrivateKey(seed: random.bytes(32))
        var member = try RosterMember.signed(name: name, identity: key, secret: .generate(generation: 1, day: testDay, using: random))
        for introducer in introducers { member = member.introduced(by: try Introduction.make(for: key.publicKey, by: introducer)) }
        return (member, key)
    }

    /// A fresh identity whose device id sorts below every one of `ids` (a few tries: what a rogue
    /// grinds so that its mark is the kept one among marks of one kind, §7.3 step 4).
    func keyBelow(_ ids: [DeviceID]) throws -> Ed25519PrivateKey {
        while true {
            let key = try Ed25519PrivateKey(seed: random.bytes(32))
            if ids.allSatisfy({ DeviceID(identityKey: key.publicKey) < $0 }) { return key }
        }
    }

    func sync(_ x: inout RingKeeper, _ y: inout RingKeeper) throws {
        for _ in 0..<4 {
            let before = (x.state.roster, y.state.roster)
            _ = try y.receive(x.state.roster, from: x.deviceID, random: random)
            _ = try x.receive(y.state.roster, from: y.deviceID, random: random)
            if (x.state.roster, y.state.roster) == before { return }
        }
    }

    /// The roster's wire value with the `removed` records passed through `edit`.
    func editingRemoved(_ roster: Roster, _ edit: ([UInt8]) -> [UInt8]) throws -> Roster {
        guard case .dictionary(var top) = roster.propertyValue, let removed = top["removed"]?.arrayValue else { throw WireError.malformed("test") }
        top["removed"] = .array(removed.map { value in value.bytesValue.map { .bytes(edit($0)) } ?? value })
        return try Roster(value: .dictionary(top))
    }

    // MARK: replays and rollbacks

    /// A removed machine (or a thief with its old state) replays every roster it held before the
    /// removal, and the member entries a cascade took out, in every order after the cascading mark:
    /// nothing comes back, the digest does not move.
    @Test func replayedOldRostersResurrectNothing() throws {
        var (a, b, m) = try ring()
        let (plant, _) = try entry("p", introducedBy: [m.identity])
        let beforeRemoval = m.state.roster
        var planted = m.state.roster
        planted.upsert(plant)
        _ = try b.receive(planted, from: m.deviceID, random: random)
        _ = try a.receive(planted, from: m.deviceID, random: random)
        _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random)
        try sync(&a, &b)
        let settled = a.state.roster.digest
        #expect(b.state.roster.digest == settled)
        for replay in [[beforeRemoval, planted], [planted, beforeRemoval]] {
            var (x, y) = (a, b)
            for roster in replay {
                _ = try x.receive(roster, from: m.deviceID, random: random)
                _ = try y.receive(roster, from: b.deviceID, random: random)   // relayed by a member that kept it
            }
            for keeper in [x, y] {
                #expect(keeper.state.roster.digest == settled)
                #expect(keeper.state.roster.isOut(m.deviceID) && keeper.state.roster.isOut(plant.deviceID))
                #expect(keeper.peers[m.deviceID] == nil && keeper.peers[plant.deviceID] == nil)
            }
        }
    }

    /// A plain mark by b for m arrives before or after a's cascading mark for m, at a member that
    /// heard either first: the cascading mark is kept everywhere (a replayed plain mark cannot
    /// downgrade it and let m's plants back), and the digests are equal.
    @Test func anOldPlainMarkNeverDowngradesACascade() throws {
        let (a0, b0, m) = try ring()
        let (plant, _) = try entry("p", introducedBy: [m.identity])
        var planted = m.state.roster
        planted.upsert(plant)
        var (a, b) = (a0, b0)
        _ = try a.receive(planted, from: m.deviceID, random: random)
        _ = try b.receive(planted, from: m.deviceID, random: random)
        var plainAtB = b
        _ = try plainAtB.removeMember(m.deviceID, random: random)
        var cascadeAtA = a
        _ = try cascadeAtA.removeMember(m.deviceID, withIntroduced: true, random: random)
        // An observer that heard neither (a's roster before it removed m), in both orders.
        var results: [Roster] = []
        for order in [[plainAtB.state.roster, cascadeAtA.state.roster], [cascadeAtA.state.roster, plainAtB.state.roster]] {
            var observer = a.state.roster
            for roster in order { _ = try observer.merge(roster, me: a.deviceID) }
            let mark = try #require(observer.removalMarks[m.deviceID])
            #expect(mark.cascading && mark.remover == a.deviceID)
            #expect(observer.isOut(plant.deviceID) && observer.members[plant.deviceID] == nil)
            results.append(observer)
        }
        #expect(results[0].digest == results[1].digest && results[0].members == results[1].members)
        // And the member that signed the plain mark takes the cascade when it comes later.
        _ = try plainAtB.receive(cascadeAtA.state.roster, from: a.deviceID, random: random)
        #expect(plainAtB.state.roster.removalMarks[m.deviceID]?.cascading == true && plainAtB.state.roster.isOut(plant.deviceID))
    }

    /// A member's state directory is rolled back to before its last re-key, so it issues the same
    /// generation again with another secret while the ring holds the lost one. Its own entry must
    /// win back: the ring ends up with the secret the member advertises under, and equal digests.
    @Test func aRolledBackStateDirectoryGetsItsSecretBackToTheRing() throws {
        var (a, b, m) = try ring()
        let snapshot = a.state
        _ = a.rekey(random: random)
        try sync(&a, &b)
        #expect(b.peers[a.deviceID] == a.ownSecret)
        let lost = a.ownSecret
        var restored = try RingKeeper(state: snapshot)
        _ = restored.rekey(random: random)   // the same generation again, another secret
        #expect(restored.ownSecret.generation == lost.generation && restored.ownSecret != lost)
        try sync(&restored, &b)
        try sync(&restored, &m)
        try sync(&b, &m)
        #expect(b.peers[a.deviceID] == restored.ownSecret)
        #expect(m.peers[a.deviceID] == restored.ownSecret)
        #expect(restored.state.roster.digest == b.state.roster.digest && b.state.roster.digest == m.state.roster.digest)
    }

    // MARK: cascades by several removers

    /// a and b (both owners) remove m with what it introduced at the same time, and m's plant p
    /// with it. Whichever mark is kept, both owners stay members, p and m are out, everywhere the
    /// same in both delivery orders.
    @Test func twoOwnersCascadingOneDeviceBothStay() throws {
        let (a0, b0, m) = try ring()
        let (plant, _) = try entry("p", introducedBy: [m.identity])
        var planted = m.state.roster
        planted.upsert(plant)
        var (a, b) = (a0, b0)
        _ = try a.receive(planted, from: m.deviceID, random: random)
        _ = try b.receive(planted, from: m.deviceID, random: random)
        var (x, y) = (a, b)
        _ = try x.removeMember(m.deviceID, withIntroduced: true, random: random)
        _ = try y.removeMember(m.deviceID, withIntroduced: true, random: random)
        var digests: Set<[UInt8]> = []
        for xFirst in [true, false] {
            var (p, q) = (x, y)
            if xFirst { try sync(&p, &q) } else { try sync(&q, &p) }
            for keeper in [p, q] {
                let roster = keeper.state.roster
                #expect(Set(roster.members.keys) == [a.deviceID, b.deviceID])
                #expect(roster.isOut(m.deviceID) && roster.isOut(plant.deviceID))
                #expect(roster.removalMarks[m.deviceID]?.remover == min(a.deviceID, b.deviceID))
                digests.insert(roster.digest)
            }
            #expect(p.peers[q.deviceID] == q.ownSecret && q.peers[p.deviceID] == p.ownSecret)
        }
        #expect(digests.count == 1)
    }

    /// Two rogues, m (paired by a) and n (paired by b), each with a plant; a removes m with what it
    /// introduced and b, later or at the same time, removes n so. Pairing introduces both ways, so
    /// n → b → a and m → a → b: each owner is reached from the other's root through the other
    /// owner. Both owners must stay members (the remover of a cascade is spared by it), the plants
    /// and rogues go, in both orders.
    @Test func twoOwnersCascadingTwoRoguesBothStay() throws {
        var (a0, b0, m) = try ring()
        var n = try RingKeeper.create(name: "n", today: testDay, random: random)
        try KeeperRing(random: random).pair(&n, &b0)
        try sync(&a0, &b0)
        _ = try m.receive(a0.state.roster, from: a0.deviceID, random: random)
        _ = try n.receive(b0.state.roster, from: b0.deviceID, random: random)
        let (p, _) = try entry("p", introducedBy: [m.identity])
        let (o, _) = try entry("o", introducedBy: [n.identity])
        var fromM = m.state.roster
        fromM.upsert(p)
        var fromN = n.state.roster
        fromN.upsert(o)
        _ = try a0.receive(fromM, from: m.deviceID, random: random)
        _ = try b0.receive(fromN, from: n.deviceID, random: random)
        try sync(&a0, &b0)
        #expect(Set(a0.state.roster.members.keys) == Set([a0, b0, m, n].map(\.deviceID) + [p.deviceID, o.deviceID]))
        for sequential in [true, false] {
            var digests: Set<[UInt8]> = []
            var (a, b) = (a0, b0)
            _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random)
            if sequential { try sync(&a, &b) }
            _ = try b.removeMember(n.deviceID, withIntroduced: true, random: random)
            try sync(&a, &b)
            for keeper in [a, b] {
                let roster = keeper.state.roster
                #expect(Set(roster.members.keys) == [a.deviceID, b.deviceID], "at \(keeper.state.name), sequential \(sequential)")
                #expect([m, n].allSatisfy { roster.isOut($0.deviceID) } && roster.isOut(p.deviceID) && roster.isOut(o.deviceID))
                digests.insert(roster.digest)
            }
            #expect(digests.count == 1)
        }
    }

    /// Plants that hide behind plants that signed cascades: m plants p2; p2 plants d and z and
    /// signs a cascading mark for d; p2 and z introduce p; p signs a cascading mark for z and
    /// plants r. The owner a removes m with what it introduced. A walk from m meets p2 first (not
    /// a's), so p2 is not spared, and then neither is p behind it: all of them are out, a and b stay.
    @Test func plantsBehindPlantsThatSignedCascadesAreNotSpared() throws {
        var (a, b, m) = try ring()
        let (p2, p2Key) = try entry("p2", introducedBy: [m.identity])
        let (d, _) = try entry("d", introducedBy: [p2Key])
        let (z, zKey) = try entry("z", introducedBy: [p2Key])
        let (p, pKey) = try entry("p", introducedBy: [p2Key, zKey])
        let (r, _) = try entry("r", introducedBy: [pKey])
        var planted = m.state.roster
        for plant in [p2, d, z, p, r] { planted.upsert(plant) }
        let marks = [d.deviceID: try RemovalMark.make(removing: d, by: p2Key, cascading: true),
                     z.deviceID: try RemovalMark.make(removing: z, by: pKey, cascading: true)]
        let withMarks = Roster(version: 1, members: Array(planted.members.values), removalMarks: marks)
        _ = try b.receive(planted, from: m.deviceID, random: random)
        _ = try b.receive(withMarks, from: m.deviceID, random: random)
        #expect(b.state.roster.members[p.deviceID] != nil && b.state.roster.members[r.deviceID] != nil)
        _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random)
        try sync(&a, &b)
        for keeper in [a, b] {
            #expect(Set(keeper.state.roster.members.keys) == [a.deviceID, b.deviceID], "at \(keeper.state.name)")
            #expect([p2, d, z, p, r].allSatisfy { keeper.state.roster.isOut($0.deviceID) && keeper.peers[$0.deviceID] == nil })
        }
        #expect(a.state.roster.digest == b.state.roster.digest)
    }

    /// A thief holding m plants p (ground to sort below every owner, so its mark is the kept one
    /// of two cascading marks for m) and p's own plant q, and has p sign a cascading mark for m,
    /// before or after the owner on a removes m with what it introduced. The text spares only the
    /// kept mark's signer, so p is spared instead of a. The defence that must hold: no honest
    /// member keeps p or q as a member while staying in the ring itself (no capture): wherever p
    /// or q is still a member, that member is taken out too and starts over. Both orders converge.
    @Test func aPlantsRacingCascadeCapturesNothing() throws {
        let (a0, b0, m) = try ring()
        let pKey = try keyBelow([a0.deviceID, b0.deviceID])
        let (p, _) = try entry("p", introducedBy: [m.identity], key: pKey)
        let (q, _) = try entry("q", introducedBy: [pKey])
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        let pMark = try RemovalMark.make(removing: mEntry, by: pKey, cascading: true)
        var crafted = m.state.roster
        crafted.upsert(p)
        crafted.upsert(q)
        let planted = crafted
        crafted = Roster(version: 1, members: Array(crafted.members.values), removalMarks: [m.deviceID: pMark])
        var digests: Set<[UInt8]> = []
        for ownerFirst in [true, false] {
            var (a, b) = (a0, b0)
            // m hands b its plants while b has not heard of any removal, then p hands b its mark.
            if ownerFirst { _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random) }
            _ = try b.receive(planted, from: m.deviceID, random: random)
            _ = try b.receive(crafted, from: p.deviceID, random: random)
            if !ownerFirst { _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random) }
            try sync(&a, &b)
            for keeper in [a, b] {
                // No honest machine holds p or q as a member with a key, so they get no new secret.
                #expect(keeper.peers[p.deviceID] == nil && keeper.peers[q.deviceID] == nil, "p or q a member at \(keeper.state.name)")
                #expect(keeper.state.roster.members[p.deviceID] == nil && keeper.state.roster.members[q.deviceID] == nil)
            }
            // b kept p's mark (p sorts first), so p, not a, was spared and b was taken out with
            // the rest of m's reach: it started over alone (what any ever-member's plain marks
            // could do, §7.3 "Removal wins"); b is no member of anything p holds.
            #expect(b.state.roster.entries.keys.sorted() == [b.deviceID])
        }
    }

    /// A cascading (or plain) mark that removes its own signer is left out (step 4: `removedBy`
    /// must differ from the removed device): a thief cannot take a member out "in its own name"
    /// to have its plants spared as that member's.
    @Test func aMarkRemovingItsOwnSignerIsLeftOut() throws {
        let (a, b, m) = try ring()
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        for cascading in [true, false] {
            let selfMark = try RemovalMark.make(removing: mEntry, by: m.identity, cascading: cascading)
            let crafted = Roster(version: 1, members: Array(m.state.roster.members.values), removalMarks: [m.deviceID: selfMark])
            var keeper = b
            let before = keeper.state.roster.digest
            _ = try keeper.receive(crafted, from: a.deviceID, random: random)
            #expect(keeper.state.roster.removalMarks[m.deviceID] == nil)
            #expect(!keeper.state.roster.isOut(m.deviceID))
            #expect(keeper.state.roster.digest == before)
        }
    }

    /// Plants hidden behind plain marks: m plants t and p (p introduced by m and by t) and u
    /// (introduced only by t), then signs a plain mark for t itself, so t is a removed device
    /// whose introductions still count. The owner removes m with what it introduced: p and u are
    /// out (reached from m through t, every introducer removed or in the set), wherever the
    /// plain mark arrives first.
    @Test func plantsBehindPlainMarksAreTakenOut() throws {
        let (a0, b0, m) = try ring()
        let (t, tKey) = try entry("t", introducedBy: [m.identity])
        let (p, _) = try entry("p", introducedBy: [m.identity, tKey])
        let (u, _) = try entry("u", introducedBy: [tKey])
        var planted = m.state.roster
        for plant in [t, p, u] { planted.upsert(plant) }
        let hidden = Roster(version: 1, members: Array(planted.members.values),
                            removalMarks: [t.deviceID: try RemovalMark.make(removing: t, by: m.identity)])
        for hiddenFirst in [true, false] {
            var (a, b) = (a0, b0)
            _ = try b.receive(planted, from: m.deviceID, random: random)
            if hiddenFirst { _ = try b.receive(hidden, from: m.deviceID, random: random) }
            _ = try a.receive(planted, from: m.deviceID, random: random)
            _ = try a.removeMember(m.deviceID, withIntroduced: true, random: random)
            try sync(&a, &b)
            if !hiddenFirst {
                _ = try b.receive(hidden, from: m.deviceID, random: random)
                try sync(&a, &b)
            }
            for keeper in [a, b] {
                #expect(Set(keeper.state.roster.members.keys) == [a.deviceID, b.deviceID], "at \(keeper.state.name), hidden first \(hiddenFirst)")
                #expect([t, p, u].allSatisfy { keeper.state.roster.isOut($0.deviceID) })
            }
            #expect(a.state.roster.digest == b.state.roster.digest)
        }
    }

    /// A member's key relayed ratcheted days ahead (the relay's clock stepped forward) does not
    /// move the receiver's key for it: with one commitment the earlier day is kept (§3.1, §7.3).
    @Test func aKeyRelayedDaysAheadDoesNotDeafenTheReceiver() throws {
        var (a, b, m) = try ring()
        let before = a.peers[m.deviceID]
        _ = b.ratchet(toDay: testDay + 5, random: random)
        #expect(b.state.roster.members[m.deviceID]?.secret.day == testDay + 5)
        _ = try a.receive(b.state.roster, from: b.deviceID, random: random)
        #expect(a.peers[m.deviceID] == before)
        #expect(a.state.roster.members[m.deviceID]?.secret.day == testDay)
    }

    // MARK: flag bytes and encodings

    /// The flag byte of a removal record flipped, added, duplicated or set to another value: a
    /// plain mark cannot become cascading nor back (`badSignature`), any other byte or length is
    /// `malformed(roster removed entry)`.
    @Test func flagByteTampering() throws {
        let (a, b, m) = try ring()
        let mEntry = try #require(a.state.roster.members[m.deviceID])
        for cascading in [false, true] {
            var roster = a.state.roster
            try roster.removing(mEntry.deviceID, by: a.identity, withIntroduced: cascading)
            let honest = try editingRemoved(roster) { $0 }
            var keeper = b
            _ = try keeper.receive(honest, from: a.deviceID, random: random)
            #expect(keeper.state.roster.removalMarks[m.deviceID]?.cascading == cascading)
            // Flip the kind: the signature input no longer matches.
            let flipped = try editingRemoved(roster) { record in cascading ? Array(record.prefix(112)) + record.dropFirst(113) : Array(record.prefix(112)) + [0x01] + record.dropFirst(112) }
            #expect(flipped.removalMarks[m.deviceID]?.cascading == !cascading)
            var victim = b
            #expect(throws: WireError.badSignature) { _ = try victim.receive(flipped, from: a.deviceID, random: random) }
            #expect(victim.state.roster == b.state.roster)
            // Another flag value, a duplicated flag, a trailing byte.
            for edit: ([UInt8]) -> [UInt8] in [
                { Array($0.prefix(112)) + [0x02] + $0.dropFirst(cascading ? 113 : 112) },
                { Array($0.prefix(112)) + [0x01, 0x01] + $0.dropFirst(cascading ? 113 : 112) },
                { $0 + [0x00] },
                { $0 + [0x01] + [UInt8](repeating: 0, count: 80) },
            ] {
                #expect(throws: WireError.malformed("roster removed entry")) { _ = try editingRemoved(roster, edit) }
            }
        }
    }

    /// An introduction relayed twice for one introducer, in both encodings (`introducedBy` +
    /// `introduction` and `introductions`), one of them forged with lower signature bytes. Picking
    /// the lower one before checking (this core, before) dropped the valid one; checking first
    /// would keep it: two readings of one roster. Now the two forms must agree for one introducer
    /// (`malformed(roster introductions)`), and a forged introduction alone plants nobody.
    @Test func aForgedLowerIntroductionCannotCrowdOutTheValidOne() throws {
        let (a, b, m) = try ring()
        let (newcomer, key) = try entry("n")
        let valid = try Introduction.make(for: key.publicKey, by: m.identity)
        let forged = try Introduction(introducer: m.deviceID, signature: [UInt8](repeating: 0, count: 64))
        var relayed = m.state.roster
        relayed.upsert(newcomer.with(introductions: [valid]))
        guard case .dictionary(var top) = relayed.propertyValue, var list = top["members"]?.arrayValue,
              let index = list.firstIndex(where: { $0.dictionaryValue?["deviceId"]?.bytesValue == newcomer.deviceID.bytes }),
              case .dictionary(var fields) = list[index] else { Issue.record("no entry"); return }
        fields["introductions"] = .bytes(forged.introducer.bytes + forged.signature)
        list[index] = .dictionary(fields)
        top["members"] = .array(list)
        #expect(throws: WireError.malformed("roster introductions")) { _ = try Roster(value: .dictionary(top)) }
        // The same record in both forms is one introduction.
        fields["introductions"] = .bytes(valid.introducer.bytes + valid.signature)
        list[index] = .dictionary(fields)
        top["members"] = .array(list)
        var keeper = a
        _ = try keeper.receive(try Roster(value: .dictionary(top)), from: m.deviceID, random: random)
        #expect(keeper.state.roster.members[newcomer.deviceID]?.introductions == [valid])
        fields["introductions"] = .bytes(forged.introducer.bytes + forged.signature)
        // The forgery alone: the newcomer is reached by nobody, so it is left out.
        fields["introducedBy"] = nil
        fields["introduction"] = nil
        list[index] = .dictionary(fields)
        top["members"] = .array(list)
        var other = b
        _ = try other.receive(try Roster(value: .dictionary(top)), from: m.deviceID, random: random)
        #expect(other.state.roster.members[newcomer.deviceID] == nil)
    }

    // MARK: merge time

    /// The slowest cascade the text allows that we could build: a root r (cascaded by the owner)
    /// and layers i = 1…k, each of two entries: `a_i` introduced by r and by `b_i`, `b_i` introduced
    /// only by `a_(i-1)` (and `a_0` also by the owner, so it stays). Each round of the S(X)
    /// fixed point of §7.3 step 5a can drop only one more layer, so a naive computation takes k
    /// rounds over every entry. Plus tombstones up to the per-remover bound. One merge must finish
    /// in seconds (printed; the assertion is on the result, all layers stay).
    @Test func craftedCascadeRosterMergesQuickly() throws {
        let (a, _, m) = try ring()
        let layers = Int(ProcessInfo.processInfo.environment["BATON_ATTACK_LAYERS"] ?? "") ?? 900
        let root = m.identity
        // Keys first (signing is what takes time here, not the merge).
        var entries: [RosterMember] = []
        var previousA: Ed25519PrivateKey = a.identity
        for i in 0..<layers {
            let aKey = try Ed25519PrivateKey(seed: random.bytes(32))
            let bKey = try Ed25519PrivateKey(seed: random.bytes(32))
            let (bEntry, _) = try entry("b\(i)", introducedBy: [previousA], key: bKey)
            let (aEntry, _) = try entry("a\(i)", introducedBy: [root, bKey], key: aKey)
            entries += [aEntry, bEntry]
            previousA = aKey
        }
        // Tombstones: m removes 300 of its own extra plants (each a member first, then marked).
        var marks: [DeviceID: RemovalMark] = [:]
        for i in 0..<300 {
            let (extra, _) = try entry("t\(i)", introducedBy: [root])
            marks[extra.deviceID] = try RemovalMark.make(removing: extra, by: root, cascading: i % 2 == 0)
        }
        var crafted = m.state.roster
        for entry in entries { crafted.upsert(entry) }
        crafted = Roster(version: 1, members: Array(crafted.members.values), removalMarks: marks)
        print("RingAttackTests: crafted roster encodes to \(try crafted.encoded().count) bytes")
        var owner = a
        _ = try owner.receive(crafted, from: m.deviceID, random: random)
        _ = try owner.removeMember(m.deviceID, withIntroduced: true, random: random)
        // The timed merge: a fresh member (b's view before any of it) takes the owner's roster.
        let onlyHonest = Roster(version: 1, members: [try #require(owner.state.roster.members[a.deviceID])])
        let clock = ContinuousClock()
        var fresh = onlyHonest
        let elapsed = try clock.measure { _ = try fresh.merge(owner.state.roster, me: owner.deviceID) }
        print("RingAttackTests: merging a crafted roster of \(owner.state.roster.entries.count) entries and \(owner.state.roster.removalMarks.count) tombstones took \(elapsed)")
        #expect(fresh.digest == owner.state.roster.digest)
        // Layer by layer, every a_i and b_i stays (b_(i+1) through a_i, a_i through its b_i... from the owner).
        #expect(entries.allSatisfy { fresh.members[$0.deviceID] != nil })
    }

    /// The same with one entry per layer: `c_i` introduced by the root and by `c_(i-1)`, `c_0` by
    /// the root and the owner (spared). As many as fit in 1,048,576 bytes: each round of the naive
    /// fixed point drops one entry.
    @Test func craftedCascadeChainMergesQuickly() throws {
        let (a, _, m) = try ring()
        let count = Int(ProcessInfo.processInfo.environment["BATON_ATTACK_CHAIN"] ?? "") ?? 2_000
        var previous = a.identity
        var crafted = m.state.roster
        var chain: [RosterMember] = []
        for i in 0..<count {
            let key = try Ed25519PrivateKey(seed: random.bytes(32))
            let (c, _) = try entry("\(i % 10)", introducedBy: [m.identity, previous], key: key)
            chain.append(c)
            crafted.upsert(c)
            previous = key
        }
        print("RingAttackTests: crafted chain roster encodes to \(try crafted.encoded().count) bytes")
        var owner = a
        _ = try owner.receive(crafted, from: m.deviceID, random: random)
        _ = try owner.removeMember(m.deviceID, withIntroduced: true, random: random)
        var fresh = Roster(version: 1, members: [try #require(owner.state.roster.members[a.deviceID])])
        let elapsed = try ContinuousClock().measure { _ = try fresh.merge(owner.state.roster, me: owner.deviceID) }
        let cascadeOnly = ContinuousClock().measure { _ = Roster.cascade(entries: owner.state.roster.entries, marks: owner.state.roster.removalMarks) }
        print("RingAttackTests: merging a crafted chain of \(owner.state.roster.entries.count) entries took \(elapsed) (the cascade alone \(cascadeOnly))")
        #expect(fresh.digest == owner.state.roster.digest)
        #expect(chain.allSatisfy { fresh.members[$0.deviceID] != nil })
    }

    /// The cascade computed by the faster passes equals the fixed point of §7.3 step 5a as
    /// written (the reference below, the rounds of the definition), on random graphs with cycles,
    /// plain and cascading marks, marks without keys, removers inside the subtree and unknown
    /// introducers.
    @Test func fastCascadeEqualsTheDefinition() throws {
        let template = try entry("x").0
        let zero = [UInt8](repeating: 0, count: 64)
        for round in 0..<400 {
            let n = 4 + round % 17
            let ids = (0..<n).map { _ in try! DeviceID(bytes: random.bytes(16)) }
            let stranger = try DeviceID(bytes: random.bytes(16))
            func someIntroductions() throws -> [Introduction] {
                let count = random.int(0...3)
                let picked = (0..<count).map { _ in random.int(0...n * 10) < 3 ? stranger : ids[random.int(0...n - 1)] }
                return try Set(picked).map { try Introduction(introducer: $0, signature: zero) }
            }
            var entries: [DeviceID: RosterMember] = [:]
            var marks: [DeviceID: RemovalMark] = [:]
            for id in ids {
                let introductions = try someIntroductions()
                switch random.int(0...9) {
                case 0, 1: marks[id] = try RemovalMark(remover: ids[random.int(0...n - 1)], signature: zero, removedKey: random.bytes(32),
                                                       introductions: introductions, cascading: true)
                case 2: marks[id] = try RemovalMark(remover: ids[random.int(0...n - 1)], signature: zero, removedKey: random.bytes(32),
                                                   introductions: introductions)
                case 3: marks[id] = try RemovalMark(remover: ids[random.int(0...n - 1)], signature: zero)
                default: entries[id] = template.with(introductions: introductions)
                }
            }
            #expect(Roster.cascade(entries: entries, marks: marks) == Self.referenceCascade(entries: entries, marks: marks), "round \(round)")
        }
    }

    /// The worst the faster passes allow: layers where only a reachability pass drops the next
    /// one (`a_i` introduced by the root and `b_i`, `b_i` only by the removed `t_i`, `t_i` by
    /// `a_(i-1)`), as many layers as a merge result can hold before its encoding is checked
    /// (two 1,048,576-byte rosters), and with BATON_ATTACK_BOUNDS set 3,333 layers (up to the
    /// count bounds, not encodable). Entries with unchecked signatures: only the cascade is timed.
    @Test func alternatingCascadeWorstCase() throws {
        let template = try entry("x").0
        let zero = [UInt8](repeating: 0, count: 64)
        func id() throws -> DeviceID { try DeviceID(bytes: random.bytes(16)) }
        let atTheCountBounds = ProcessInfo.processInfo.environment["BATON_ATTACK_BOUNDS"] != nil
        for layers in atTheCountBounds ? [1_700, 3_333] : [1_700] {
            let (root, owner) = (try id(), try id())
            var entries: [DeviceID: RosterMember] = [owner: template.with(introductions: [try Introduction(introducer: root, signature: zero)])]
            var marks: [DeviceID: RemovalMark] = [root: try RemovalMark(remover: owner, signature: zero, removedKey: random.bytes(32), cascading: true)]
            var previous = owner
            var layer: [DeviceID] = []
            for _ in 0..<layers {
                let (a, b, t) = (try id(), try id(), try id())
                marks[t] = try RemovalMark(remover: owner, signature: zero, removedKey: random.bytes(32),
                                           introductions: [try Introduction(introducer: previous, signature: zero)])
                entries[b] = template.with(introductions: [try Introduction(introducer: t, signature: zero)])
                entries[a] = template.with(introductions: try [root, b].map { try Introduction(introducer: $0, signature: zero) })
                layer += [a, b]
                previous = a
            }
            var out: Set<DeviceID> = []
            let elapsed = ContinuousClock().measure { out = Roster.cascade(entries: entries, marks: marks) }
            print("RingAttackTests: the cascade of \(entries.count) entries and \(marks.count) tombstones in \(layers) alternating layers took \(elapsed)")
            #expect(out.isDisjoint(with: layer) && !out.contains(owner))
        }
    }

    /// §7.3 step 5a as the rounds of its definition (the core before it was made faster; the spare
    /// as one walk per root).
    static func referenceCascade(entries: [DeviceID: RosterMember], marks: [DeviceID: RemovalMark]) -> Set<DeviceID> {
        var roots: [DeviceID: DeviceID] = [:]
        for (id, mark) in marks where mark.cascading { roots[id] = mark.remover }
        guard !roots.isEmpty else { return [] }
        var introducers: [DeviceID: [DeviceID]] = [:]
        for (id, entry) in entries { introducers[id] = entry.introductions.map(\.introducer) }
        for (id, mark) in marks where mark.removedKey != nil && roots[id] == nil { introducers[id] = mark.introductions.map(\.introducer) }
        var children: [DeviceID: [DeviceID]] = [:]
        for (id, list) in introducers { for introducer in list { children[introducer, default: []].append(id) } }

        func subtree(sparing spared: Set<DeviceID>) -> Set<DeviceID> {
            var set = Set(introducers.keys).subtracting(spared)
            while true {
                // Reached from C through members of the set ...
                var reached: Set<DeviceID> = []
                var frontier = Array(roots.keys)
                while let next = frontier.popLast() {
                    for id in children[next] ?? [] where set.contains(id) && reached.insert(id).inserted { frontier.append(id) }
                }
                // ... and introduced by nobody but the set and removed devices.
                let kept = reached.filter { id in introducers[id]!.allSatisfy { reached.contains($0) || marks[$0] != nil } }
                if kept == set { return set }
                set = kept
            }
        }
        let first = subtree(sparing: [])
        // The largest set of removers in S0 every walk from a root through S0 meets first at that
        // root's own remover, as the definition reads: one walk per root, stopping at the set.
        var spared = Set(roots.values).filter { first.contains($0) }
        while !spared.isEmpty {
            var reachedBy: [DeviceID: Set<DeviceID>] = [:]
            for (root, signer) in roots {
                var seen: Set<DeviceID> = []
                var frontier = [root]
                while let next = frontier.popLast() {
                    for id in children[next] ?? [] where first.contains(id) && seen.insert(id).inserted {
                        if !spared.contains(id) { frontier.append(id) }
                    }
                }
                for id in seen { reachedBy[id, default: []].insert(signer) }
            }
            let kept = spared.filter { reachedBy[$0] == [$0] }
            if kept == spared { break }
            spared = kept
        }
        return spared.isEmpty ? first : subtree(sparing: spared)
    }
}
