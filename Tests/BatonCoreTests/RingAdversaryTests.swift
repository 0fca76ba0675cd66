// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

/// Issue 23, adversarial review of the ring membership that landed (§6.2, §7.3, §7.4 and
/// docs/security.md read alone first): each attack a stolen or rogue member, a thief racing the
/// owner, a removed member, a replayer or a wrong clock could try, against the real core.
@Suite struct RingAdversaryTests {
    let random = SeededRandomFake(seed: 2_305)

    func pair(_ a: inout RingKeeper, _ b: inout RingKeeper) throws { try KeeperRing(random: random).pair(&a, &b) }

    func ring(_ n: Int) throws -> [RingKeeper] { try KeeperRing(random: random).ring(n) }

    /// A member entry signed by a fresh identity (returned too), introduced by `introducers`.
    func entry(_ name: String, introducedBy introducers: [Ed25519PrivateKey] = [], selfIntroduced: Bool = false)
        throws -> (RosterMember, Ed25519PrivateKey) {
        let key = try Ed25519PrivateKey(seed: random.bytes(32))
        var member = try RosterMember.signed(name: name, identity: key, secret: .generate(generation: 1, day: testDay, using: random))
        for introducer in introducers + (selfIntroduced ? [key] : []) {
            member = member.introduced(by: try Introduction.make(for: key.publicKey, by: introducer))
        }
        return (member, key)
    }

    /// Thief t removes the owner's laptop a while a removes t; b, c and d hear the two removals in
    /// every order (b, c, d each first from t or first from a), t keeps sending its roster after
    /// it was removed, then the three sync in every order. Everywhere: t and a out, the same roster,
    /// the survivors know each other's current secrets and nobody's are t's.
    @Test func aThiefRacingTheOwnersRemovalIsOutEverywhereInEveryDeliveryOrder() throws {
        let base = try ring(5)
        let (a, t) = (0, 4)
        var thief = base[t], owner = base[a]
        _ = try thief.removeMember(owner.deviceID, random: random)
        _ = try owner.removeMember(thief.deviceID, random: random)
        let (fromThief, fromOwner) = (thief.state.roster, owner.state.roster)
        for thiefFirst in 0..<8 {
            for syncOrder in permutations([(1, 2), (2, 3), (1, 3)]) {
                var k = base
                for i in 1...3 {
                    let deliveries = thiefFirst >> (i - 1) & 1 == 1
                        ? [(fromThief, k[t].deviceID), (fromOwner, k[a].deviceID)]
                        : [(fromOwner, k[a].deviceID), (fromThief, k[t].deviceID)]
                    for (roster, sender) in deliveries { _ = try k[i].receive(roster, from: sender, random: random) }
                    // The thief sends again after it was removed here: only its marks count.
                    _ = try k[i].receive(fromThief, from: k[t].deviceID, random: random)
                }
                for _ in 0..<2 {
                    for (x, y) in syncOrder {
                        _ = try k[y].receive(k[x].state.roster, from: k[x].deviceID, random: random)
                        _ = try k[x].receive(k[y].state.roster, from: k[y].deviceID, random: random)
                    }
                }
                var digests: Set<[UInt8]> = []
                for i in 1...3 {
                    let roster = k[i].state.roster
                    #expect(roster.removed.isSuperset(of: [k[a].deviceID, k[t].deviceID]))
                    #expect(Set(k[i].peers.keys) == Set((1...3).filter { $0 != i }.map { k[$0].deviceID }))
                    for j in 1...3 where j != i { #expect(k[i].peers[k[j].deviceID] == k[j].ownSecret) }
                    #expect(!k[i].peers.values.contains(thief.ownSecret))
                    #expect(roster.removalNotice(for: k[t].deviceID)?.members.isEmpty == true)
                    digests.insert(roster.digest)
                }
                #expect(digests.count == 1, "thief first at \(thiefFirst), syncs \(syncOrder)")
            }
        }
    }

    /// A removed thief keeps pairing puppets and sending its roster: a member that removed it takes
    /// its marks only, never a member it lists (not even one it introduced after the removal).
    @Test func aRemovedMachinesRingSyncBringsNoMember() throws {
        var k = try ring(3)
        let (a, b, t) = (0, 1, 2)
        _ = try k[a].removeMember(k[t].deviceID, random: random)
        _ = try k[b].receive(k[a].state.roster, from: k[a].deviceID, random: random)
        var puppet = try RingKeeper.create(name: "k0", today: testDay, random: random)   // the owner's name
        var thief = k[t]
        try pair(&puppet, &thief)
        let before = k[b].state.roster
        let actions = try k[b].receive(thief.state.roster, from: thief.deviceID, random: random)
        #expect(actions.isEmpty)
        #expect(k[b].state.roster == before)
        #expect(k[b].state.roster.members[puppet.deviceID] == nil)
        #expect(k[b].peers[thief.deviceID] == nil)
        // Its reply is a removal notice: no member, no key.
        let notice = try #require(k[b].state.roster.removalNotice(for: thief.deviceID))
        #expect(notice.members.isEmpty && notice.removed == [thief.deviceID] && notice.version == 0)
    }

    /// Old RingSyncs replayed (recorded before a re-key and before a removal) never bring back an
    /// older generation or a removed member, and change nothing at all.
    @Test func replayedOldRosterChangesNothing() throws {
        var k = try ring(4)
        let (a, b, c, d) = (0, 1, 2, 3)
        let recorded = k[c].state.roster
        _ = k[b].rekey(random: random)
        _ = try k[a].receive(k[b].state.roster, from: k[b].deviceID, random: random)
        _ = try k[a].removeMember(k[d].deviceID, random: random)
        let before = k[a].state
        for _ in 0..<2 {
            #expect(try k[a].receive(recorded, from: k[c].deviceID, random: random).isEmpty)
        }
        #expect(k[a].state == before)
        #expect(k[a].peers[k[b].deviceID] == k[b].ownSecret)
        #expect(k[a].peers[k[d].deviceID] == nil)
    }

    /// Clock stepped forward: ratcheting a member's key keeps every introduction of every member.
    /// Before, `RosterMember.ratcheted` kept only the first, so after each day change a member
    /// introduced by b and by m read "introduced by m" alone and fell into `bt-pair remove m`'s
    /// subtree.
    @Test func aDayChangeKeepsEveryIntroduction() throws {
        var k = try ring(3)
        let (a, b, m) = (0, 1, 2)
        var y = try RingKeeper.create(name: "y", today: testDay, random: random)
        var kb = k[b], km = k[m]
        try pair(&y, &kb)
        try pair(&y, &km)
        (k[b], k[m]) = (kb, km)
        _ = try k[a].receive(k[b].state.roster, from: k[b].deviceID, random: random)
        _ = try k[a].receive(k[m].state.roster, from: k[m].deviceID, random: random)
        let held = try #require(k[a].state.roster.members[y.deviceID]).introductions.map(\.introducer)
        #expect(Set(held) == [k[b].deviceID, k[m].deviceID])
        _ = k[a].ratchet(toDay: testDay + 1, random: random)
        #expect(k[a].state.roster.members[y.deviceID]?.introductions.map(\.introducer) == held)
        #expect(k[a].introduced(by: k[m].deviceID).isEmpty)
        var roster = k[a].state.roster
        roster.ratchet(toDay: testDay + 3)
        #expect(roster.members[y.deviceID]?.introductions.map(\.introducer) == held)
    }

    /// Clock stepped forward on one member and back on another (a re-key issued days earlier):
    /// keys of other days never change the digest, and both converge on the same roster with keys
    /// that lead to each member's signed commitment.
    @Test func membersWhoseClocksDisagreeStillConverge() throws {
        var k = try ring(3)
        let (a, b, c) = (0, 1, 2)
        _ = k[a].ratchet(toDay: testDay + 5, random: random)
        _ = k[b].rekey(random: random, today: testDay - 3)
        for _ in 0..<2 {
            for (x, y) in [(a, b), (b, c), (a, c)] {
                _ = try k[y].receive(k[x].state.roster, from: k[x].deviceID, random: random)
                _ = try k[x].receive(k[y].state.roster, from: k[y].deviceID, random: random)
            }
        }
        #expect(Set(k.map(\.state.roster.digest)).count == 1)
        for i in [a, b, c] {
            for j in [a, b, c] where j != i {
                let held = try #require(k[i].peers[k[j].deviceID])
                #expect(held.generation == k[j].ownSecret.generation)
                #expect(held.chain?.commitment == k[j].ownSecret.chain?.commitment)
            }
        }
    }

    /// Steering `bt-pair remove m`: plants that introduce themselves or each other (a cycle) are
    /// still offered with m; an introduction m adds to the owner's own machine does not pull it in,
    /// and members that lost an introducer earlier are not offered with an unrelated m. Before, a
    /// self-introduction or a cycle kept plants out of the offered subtree.
    @Test func plantsCannotEscapeTheOfferedSubtree() throws {
        let (bEntry, bKey) = try entry("b")
        let (mEntry, mKey) = try entry("m", introducedBy: [bKey])
        let (laptop, laptopKey) = try entry("laptop", introducedBy: [bKey, mKey])   // m added its own
        let (y1, y1Key) = try entry("y1", introducedBy: [mKey])
        let (y2, y2Key) = try entry("y2", introducedBy: [mKey, y1Key])
        let y1Cycled = y1.introduced(by: try Introduction.make(for: y1Key.publicKey, by: y2Key))
        let (z, _) = try entry("z", introducedBy: [mKey], selfIntroduced: true)
        let (w, _) = try entry("w", introducedBy: [mKey, laptopKey])
        let (r, rKey) = try entry("r", introducedBy: [bKey])
        let (orphan, _) = try entry("o", introducedBy: [rKey])          // r's alone: not m's
        let (shared, _) = try entry("s", introducedBy: [rKey, mKey])    // m's and the removed r's
        var roster = Roster(version: 1, members: [bEntry, mEntry, laptop, y1Cycled, y2, z, w, r, orphan, shared])
        try roster.removing(r.deviceID, by: bKey)
        let expected = [y1.deviceID, y2.deviceID, z.deviceID, shared.deviceID].sorted()
        #expect(roster.introducedSubtree(of: mEntry.deviceID, me: bEntry.deviceID) == expected)
    }

    /// Bloat: a roster listing more than 10,000 members is refused before any entry is parsed.
    @Test func aRosterPastTheMemberBoundIsRefusedUnread() throws {
        let junk = PropertyValue.dictionary([:])
        let value = PropertyValue.dictionary(["version": .integer(1), "members": .array(Array(repeating: junk, count: Roster.maxMembers + 1)), "removed": .array([])])
        #expect(throws: WireError.malformed("roster size")) { _ = try Roster(value: value) }
        let marks = PropertyValue.dictionary(["version": .integer(1), "members": .array([]), "removed": .array(Array(repeating: .bytes([]), count: Roster.maxRemovals + 1))])
        #expect(throws: WireError.malformed("roster size")) { _ = try Roster(value: marks) }
    }

    /// Bloat: a device holding 10,000 tombstones removes nobody more, refused with the error §7.3
    /// names for that bound (`malformed(roster size)`; before: "roster removals per remover", the
    /// other bound's), and nothing changes.
    @Test func removingPastTheTombstoneBoundIsRefusedAsTheSizeBound() throws {
        let (me, meKey) = try entry("me")
        let (victim, _) = try entry("victim", introducedBy: [meKey])
        var marks: [DeviceID: RemovalMark] = [:]
        for _ in 0..<Roster.maxRemovals {
            // Not signed: only the count matters to the local check, which comes first.
            let key = random.bytes(32)
            marks[DeviceID(identityKey: key)] = try RemovalMark(remover: try DeviceID(bytes: random.bytes(16)), signature: random.bytes(64), removedKey: key)
        }
        var roster = Roster(version: 3, members: [me, victim], removalMarks: marks)
        let before = roster
        #expect(throws: WireError.malformed("roster size")) { try roster.removing(victim.deviceID, by: meKey) }
        #expect(roster == before)
    }

    /// Bloat through pairing: roster parts are joined whatever their sizes (empty parts too), a
    /// total past the RingSync limit is `payloadTooLarge` before it is stored, `more` of another
    /// type is `malformed(roster more)`.
    @Test func rosterPartsAreBoundedByTheirTotal() throws {
        let bytes = try Roster(version: 1, members: [try entry("a").0, try entry("b").0]).encoded()
        var assembler = RosterChunks.Assembler()
        var joined: [UInt8]?
        for (i, byte) in bytes.enumerated() {
            #expect(try assembler.add(["msg": .string("roster"), "roster": .bytes([]), "more": .boolean(true)]) == nil)
            joined = try assembler.add(["msg": .string("roster"), "roster": .bytes([byte]), "more": .boolean(i < bytes.count - 1)])
        }
        #expect(joined == bytes)
        #expect(RosterChunks.messages(for: bytes).count == 1)
        var big = RosterChunks.Assembler()
        let piece = [UInt8](repeating: 0, count: 65_536)
        for _ in 0..<16 { #expect(try big.add(["msg": .string("roster"), "roster": .bytes(piece), "more": .boolean(true)]) == nil) }
        #expect(throws: WireError.payloadTooLarge(limit: FrameType.ringSync.maxPayload, actual: FrameType.ringSync.maxPayload + 1)) {
            _ = try big.add(["msg": .string("roster"), "roster": .bytes([0])])
        }
        var typed = RosterChunks.Assembler()
        #expect(throws: WireError.malformed("roster more")) { _ = try typed.add(["msg": .string("roster"), "roster": .bytes(bytes), "more": .integer(1)]) }
    }

    /// Bloat: two rosters that each encode within the RingSync limit but whose union does not:
    /// the merge is refused whole with `payloadTooLarge` (code 3), the local roster unchanged.
    @Test func aMergeThatNoLongerEncodesIsRefusedWhole() throws {
        let (founder, founderKey) = try entry(String(repeating: "f", count: 64))
        var first = Roster(version: 1, members: [founder]), second = first
        var size = 0
        while size <= FrameType.ringSync.maxPayload / 2 + 4_096 {
            let longName = String(repeating: "x", count: 64)
            first.upsert(try entry(longName, introducedBy: [founderKey]).0)
            second.upsert(try entry(longName, introducedBy: [founderKey]).0)
            if first.members.count % 64 == 0 { size = try first.encoded().count }
        }
        _ = try second.encoded()
        let before = first
        #expect(throws: WireError.self) { _ = try first.merge(second, me: founder.deviceID) }
        do { _ = try first.merge(second, me: founder.deviceID) } catch { #expect(ErrorFrame(refusedRoster: error).code == .payloadTooLarge) }
        #expect(first == before)
    }
}
