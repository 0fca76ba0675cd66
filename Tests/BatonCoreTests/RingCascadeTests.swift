// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

/// Issue 23, the two capture holes of ring membership: plants past the per-remover bound, and
/// puppets introduced after the removal. One cascading mark (§7.3 "Cascade") removes a device and
/// everything it introduced, now and later, the same at every member in every delivery order.
@Suite struct RingCascadeTests {
    let random = SeededRandomFake(seed: 2_323)

    func pair(_ a: inout RingKeeper, _ b: inout RingKeeper) throws { try KeeperRing(random: random).pair(&a, &b) }

    func ring(_ n: Int) throws -> [RingKeeper] { try KeeperRing(random: random).ring(n) }

    /// A member entry signed by a fresh identity (returned too), introduced by `introducers`.
    func entry(_ name: String, introducedBy introducers: [Ed25519PrivateKey] = [], seed: [UInt8]? = nil) throws -> (RosterMember, Ed25519PrivateKey) {
        let key = try Ed25519PrivateKey(seed: seed ?? random.bytes(32))
        var member = try RosterMember.signed(name: name, identity: key, secret: .generate(generation: 1, day: testDay, using: random))
        for introducer in introducers { member = member.introduced(by: try Introduction.make(for: key.publicKey, by: introducer)) }
        return (member, key)
    }

    /// Every pair of `machines` syncs both ways until nothing changes.
    func syncAll(_ k: inout [RingKeeper], _ machines: [Int]) throws {
        for _ in 0..<6 {
            let before = k.map(\.state.roster)
            for x in machines {
                for y in machines where y != x { _ = try k[y].receive(k[x].state.roster, from: k[x].deviceID, random: random) }
            }
            if k.map(\.state.roster) == before { return }
        }
    }

    /// What `bt-pair remove X` with what X introduced does: one cascading mark.
    func removeWithIntroduced(_ keeper: inout RingKeeper, _ id: DeviceID) throws {
        _ = try keeper.removeMember(id, withIntroduced: true, random: random)
    }

    /// (a) m plants 1,150 identities, more than one remover may tombstone: a chain m → p1 → … →
    /// p600 and a cycle m → q1 → … → q550 → q1 (q1 also introduces itself). The owner on a removes m
    /// with what it introduced, once; b and c hear the plants and the removal in either order and
    /// sync in every order: all 1,151 are out everywhere, the rosters are equal, no plant holds a
    /// key. Before, removing the subtree took one mark per plant and stopped at 1,024.
    @Test func oneCascadingMarkRemovesMorePlantsThanOneRemoverMayMark() async throws {
        // 1,150 plants merged in every delivery order: off the cooperative pool (offPool). Each check
        // made there is collected and asserted here.
        let problems = try await offPool { [self] () throws -> [String] in
            var problems: [String] = []
            func check(_ holds: Bool, _ what: @autoclosure () -> String) { if !holds { problems.append(what()) } }
            var base = try ring(4)
            let (a, b, c, m) = (0, 1, 2, 3)
            let mKey = base[m].identity
            var plants: [RosterMember] = []
            var previous = mKey
            for i in 0..<600 {
                let (plant, key) = try entry("p\(i)", introducedBy: [previous])
                plants.append(plant)
                previous = key
            }
            let cycleSeeds = (0..<550).map { _ in random.bytes(32) }
            let cycleKeys = try cycleSeeds.map { try Ed25519PrivateKey(seed: $0) }
            for i in 0..<550 {
                var introducers = [i == 0 ? mKey : cycleKeys[i - 1]]
                if i == 0 { introducers += [cycleKeys[549], cycleKeys[0]] }
                plants.append(try entry("q\(i)", introducedBy: introducers, seed: cycleSeeds[i]).0)
            }
            check(plants.count > Roster.maxRemovalsPerRemover, "plants.count > Roster.maxRemovalsPerRemover")
            var planted = base[m].state.roster
            for plant in plants { planted.upsert(plant) }
            check(planted.members.count == 4 + plants.count, "planted.members.count == 4 + plants.count")
            let plantIDs = Set(plants.map(\.deviceID))
            check(base[a].introduced(by: base[m].deviceID).isEmpty, "a has not heard of them yet")
            _ = try base[a].receive(planted, from: base[m].deviceID, random: random)
            check(Set(base[a].introduced(by: base[m].deviceID)) == plantIDs, "Set(base[a].introduced(by: base[m].deviceID)) == plantIDs")
            var owner = base[a]
            try removeWithIntroduced(&owner, base[m].deviceID)
            check(owner.state.roster.removalMarks.count == 1, "owner.state.roster.removalMarks.count == 1")
            let fromOwner = owner.state.roster
            let survivors = Set([a, b, c].map { base[$0].deviceID })
            // b hears the plants first and c the removal first, or the other way round.
            for plantsFirst in [0b01, 0b10] {
                for syncOrder in permutations([(a, b), (b, c), (a, c)]) {
                    var k = base
                    k[a] = owner
                    for i in [b, c] {
                        let deliveries = plantsFirst >> (i - 1) & 1 == 1
                            ? [(planted, k[m].deviceID), (fromOwner, k[a].deviceID)] : [(fromOwner, k[a].deviceID), (planted, k[m].deviceID)]
                        for (roster, sender) in deliveries { _ = try k[i].receive(roster, from: sender, random: random) }
                    }
                    // Until nothing changes (entries a cascade took out still arrive, and re-key, §7.4).
                    for _ in 0..<4 {
                        let before = k.map(\.state.roster)
                        for (x, y) in syncOrder {
                            _ = try k[y].receive(k[x].state.roster, from: k[x].deviceID, random: random)
                            _ = try k[x].receive(k[y].state.roster, from: k[y].deviceID, random: random)
                        }
                        if k.map(\.state.roster) == before { break }
                    }
                    var digests: Set<[UInt8]> = []
                    for i in [a, b, c] {
                        let roster = k[i].state.roster
                        check(Set(roster.members.keys) == survivors, "plants first \(plantsFirst), syncs \(syncOrder), at \(i)")
                        check(roster.isOut(k[m].deviceID) && plantIDs.allSatisfy(roster.isOut), "roster.isOut(k[m].deviceID) && plantIDs.allSatisfy(roster.isOut)")
                        check(roster.removalMarks.count == 1, "roster.removalMarks.count == 1")
                        for j in [a, b, c] where j != i { check(k[i].peers[k[j].deviceID] == k[j].ownSecret, "k[i].peers[k[j].deviceID] == k[j].ownSecret") }
                        digests.insert(roster.digest)
                    }
                    check(digests.count == 1, "plants first \(plantsFirst), syncs \(syncOrder)")
                }
            }
            return problems
        }
        #expect(problems.isEmpty, "\(problems.prefix(10))")
    }

    /// (b) After m's cascading removal, m (removed) and its plant d (taken out) keep introducing:
    /// x by m, y by d. c, which has not heard of the removal, takes both from m; then it hears of
    /// it, and b gets c's roster and d's. x and y never become members where the removal was
    /// heard, and leave c when it arrives there. Before, an introduction by a removed device still
    /// counted: x and y stayed members everywhere the removal of m (and of d) reached.
    @Test func puppetsIntroducedAfterTheRemovalNeverJoin() throws {
        var k = try ring(4)
        let (a, b, c, m) = (0, 1, 2, 3)
        let (plant, plantKey) = try entry("d", introducedBy: [k[m].identity])
        var withPlant = k[m].state.roster
        withPlant.upsert(plant)
        for i in [a, b, c] { _ = try k[i].receive(withPlant, from: k[m].deviceID, random: random) }
        #expect(k[b].state.roster.members[plant.deviceID] != nil)
        try removeWithIntroduced(&k[a], k[m].deviceID)
        _ = try k[b].receive(k[a].state.roster, from: k[a].deviceID, random: random)
        // Puppets introduced after the removal, relayed by m to c (which still holds m).
        let (x, _) = try entry("x", introducedBy: [k[m].identity])
        let (y, _) = try entry("y", introducedBy: [plantKey])
        var later = withPlant
        later.upsert(x)
        later.upsert(y)
        _ = try k[c].receive(later, from: k[m].deviceID, random: random)
        #expect(k[c].state.roster.members[x.deviceID] != nil, "c has not heard of the removal yet")
        // The plant relays them itself: only its marks count where it is out.
        var fromPlant = later
        fromPlant.upsert(try entry("z", introducedBy: [plantKey]).0)
        let puppets = [x.deviceID, y.deviceID]
        for i in [a, b] {
            _ = try k[i].receive(fromPlant, from: plant.deviceID, random: random)
            #expect(puppets.allSatisfy { k[i].state.roster.members[$0] == nil })
        }
        _ = try k[c].receive(k[a].state.roster, from: k[a].deviceID, random: random)
        _ = try k[b].receive(k[c].state.roster, from: k[c].deviceID, random: random)
        #expect(puppets.allSatisfy { k[b].state.roster.members[$0] == nil && k[b].state.roster.entries[$0] != nil })
        try syncAll(&k, [a, b, c])
        for i in [a, b, c] {
            let roster = k[i].state.roster
            #expect(puppets.allSatisfy { roster.members[$0] == nil && roster.isOut($0) }, "at \(i)")
            #expect(roster.members[plant.deviceID] == nil)
            #expect(Set(roster.members.keys) == Set([a, b, c].map { k[$0].deviceID }))
            #expect(!k[i].peers.values.contains(where: { [x.secret, y.secret, plant.secret].contains($0) }))
        }
        #expect(Set([a, b, c].map { k[$0].state.roster.digest }).count == 1)
        // A puppet that pairs with a member that knows is refused like a removed device.
        #expect(throws: WireError.peerRemoved) { try k[b].checkPairingPeer(y.deviceID) }
    }

    /// (c) Machines a person paired stay: the remover (m paired it), a laptop m and b both
    /// introduced, and what that laptop introduced; m and what only m's side introduced go.
    @Test func membersAlsoIntroducedFromOutsideTheSubtreeStay() throws {
        var k = try ring(3)
        let (a, b, m) = (0, 1, 2)
        let (laptop, laptopKey) = try entry("laptop", introducedBy: [k[m].identity, k[b].identity])
        let (phone, _) = try entry("phone", introducedBy: [laptopKey])
        let (plant, plantKey) = try entry("plant", introducedBy: [k[m].identity])
        let (shared, _) = try entry("shared", introducedBy: [plantKey, laptopKey])   // the laptop vouches too
        let (inner, _) = try entry("inner", introducedBy: [plantKey, k[m].identity])
        var roster = k[m].state.roster
        for member in [laptop, phone, plant, shared, inner] { roster.upsert(member) }
        for i in [a, b] { _ = try k[i].receive(roster, from: k[m].deviceID, random: random) }
        #expect(k[a].introduced(by: k[m].deviceID) == [plant.deviceID, inner.deviceID].sorted())
        try removeWithIntroduced(&k[a], k[m].deviceID)
        try syncAll(&k, [a, b])
        for i in [a, b] {
            let held = k[i].state.roster
            #expect(Set(held.members.keys) == Set([k[a].deviceID, k[b].deviceID, laptop.deviceID, phone.deviceID, shared.deviceID]))
            #expect(held.derivedOut == [plant.deviceID, inner.deviceID])
        }
        #expect(k[a].state.roster.digest == k[b].state.roster.digest)
    }

    /// A plant cannot shield itself by signing a cascading mark (only the remover of a cascade is
    /// spared by it, and only when nothing else reaches it) nor its own plants by a plain mark on
    /// their introducer; a cascading mark wins over a plain one for the same device, both ways.
    @Test func plantsCannotShieldThemselvesAndCascadeWinsOverPlain() throws {
        let (owner, ownerKey) = try entry("owner")
        let (other, otherKey) = try entry("other", introducedBy: [ownerKey])
        let (m, mKey) = try entry("m", introducedBy: [ownerKey])
        let (d, dKey) = try entry("d", introducedBy: [mKey])
        let (e, eKey) = try entry("e", introducedBy: [mKey])
        let (f, _) = try entry("f", introducedBy: [eKey])
        let (g, _) = try entry("g", introducedBy: [dKey])
        // owner and other paired with each other; m signed an introduction for owner too.
        let ownerIntroductions = try [mKey, otherKey].map { try Introduction.make(for: ownerKey.publicKey, by: $0) }
        var roster = Roster(version: 1, members: [owner.with(introductions: ownerIntroductions), other, m, d, e, f, g])
        try roster.removing(g.deviceID, by: dKey, withIntroduced: true)   // d signs a cascade to be spared
        try roster.removing(e.deviceID, by: mKey)                          // m shields f behind a plain mark
        var plainFirst = roster
        try roster.removing(m.deviceID, by: ownerKey, withIntroduced: true)
        #expect(Set(roster.members.keys) == [owner.deviceID, other.deviceID])
        #expect(roster.derivedOut == [d.deviceID, f.deviceID])
        // Plain then cascading by another member, merged both ways: the cascading mark is kept.
        try plainFirst.removing(m.deviceID, by: otherKey)
        var x = plainFirst, y = roster
        _ = try x.merge(roster, me: owner.deviceID)
        _ = try y.merge(plainFirst, me: owner.deviceID)
        #expect(x.digest == y.digest && x.removalMarks[m.deviceID]?.cascading == true && x.members == y.members)
        // A cascading mark may follow the plain one on the device that signed it.
        try plainFirst.removing(m.deviceID, by: otherKey, withIntroduced: true)
        #expect(Set(plainFirst.members.keys) == [owner.deviceID, other.deviceID])
    }

    /// A flag flipped on a mark in transit does not verify: plain and cascading marks are signed
    /// over different bytes. The record form carries the flag byte; any other flag is malformed.
    @Test func theFlagIsSignedAndEncoded() throws {
        let (owner, ownerKey) = try entry("owner")
        let (m, _) = try entry("m", introducedBy: [ownerKey])
        var roster = Roster(version: 1, members: [owner, m])
        try roster.removing(m.deviceID, by: ownerKey, withIntroduced: true)
        let mark = try #require(roster.removalMarks[m.deviceID])
        let record = try #require(mark.record)
        #expect(record.count == 113 + 80 && record[112] == 0x01)
        #expect(try Roster(decoding: roster.encoded()) == roster)
        var bad = record
        bad[112] = 0x02
        #expect(throws: WireError.malformed("roster removed entry")) { _ = try RemovalMark.parse(record: bad) }
        let flipped = try RemovalMark(remover: mark.remover, signature: mark.signature, removedKey: mark.removedKey,
                                      introductions: mark.introductions, cascading: false)
        var local = Roster(version: 1, members: [owner, m])
        #expect(throws: WireError.badSignature) {
            _ = try local.merge(Roster(version: 1, members: [owner], removalMarks: [m.deviceID: flipped]), me: owner.deviceID)
        }
        #expect(!flipped.isValid(removing: m.deviceID, removerKey: ownerKey.publicKey))
        #expect(mark.isValid(removing: m.deviceID, removerKey: ownerKey.publicKey))
    }

    /// (d) Property: random rosters of 12 identities (introductions that form chains and cycles,
    /// plain and cascading marks by random members), 3 or 4 views of them merged in every order,
    /// each twice: one digest, one member set, one derived set.
    @Test(arguments: [3, 4]) func everyDeliveryOrderDerivesTheSameMembers(views count: Int) throws {
        var cascaded = 0
        for trial in 0..<12 {
            let keys = try (0..<12).map { _ in try Ed25519PrivateKey(seed: random.bytes(32)) }
            let ids = keys.map { DeviceID(identityKey: $0.publicKey) }
            var full: [RosterMember] = []
            var optional: [[Introduction]] = []
            for i in 0..<12 {
                full.append(try RosterMember.signed(name: "n\(i)", identity: keys[i], secret: .generate(generation: 1, day: testDay, using: random)))
                var extra: [Introduction] = []
                for j in 0..<12 where j != 0 && random.bytes(1)[0] < 40 { extra.append(try Introduction.make(for: keys[i].publicKey, by: keys[j])) }
                optional.append(extra)
            }
            func view() throws -> Roster {
                var members: [RosterMember] = []
                for i in 0..<12 {
                    // Every entry keeps one introduction by an earlier identity, so every view is vouched from the founder.
                    var introductions = i == 0 ? [] : [try Introduction.make(for: keys[i].publicKey, by: keys[Int(random.bytes(1)[0]) % i])]
                    introductions += optional[i].filter { _ in random.bytes(1)[0] < 160 }
                    members.append(full[i].with(introductions: introductions))
                }
                var roster = Roster(version: 1, members: members)
                for _ in 0..<3 {
                    let target = 1 + Int(random.bytes(1)[0]) % 11, remover = Int(random.bytes(1)[0]) % 12
                    guard target != remover, roster.members[ids[remover]] != nil || roster.removalMarks[ids[remover]] != nil else { continue }
                    _ = roster.remove(ids[target], by: keys[remover], withIntroduced: random.bytes(1)[0] < 128)
                }
                return roster
            }
            let views = try (0..<count).map { _ in try view() }
            var results: Set<[String]> = []
            for order in permutations(Array(views.indices)) {
                var held = Roster(version: 1, members: [full[0]])
                for index in order + order { _ = try held.merge(views[index], me: ids[0]) }
                results.insert([held.digest.description, held.members.keys.sorted().description, held.derivedOut.sorted().description])
                if order == Array(views.indices), !held.derivedOut.isEmpty { cascaded += 1 }
            }
            #expect(results.count == 1, "trial \(trial)")
        }
        #expect(cascaded > 0, "some trial takes members out by a cascade")
    }
}
