// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

/// Issue 23, roster part: membership as a convergent replicated set (§7.3). Each finding has a
/// test that failed on the core before the change.
@Suite struct RosterConvergenceTests {
    let random = SeededRandomFake(seed: 2323)

    func pair(_ a: inout RingKeeper, _ b: inout RingKeeper) throws { try KeeperRing(random: random).pair(&a, &b) }

    func ring(_ n: Int) throws -> [RingKeeper] { try KeeperRing(random: random).ring(n) }

    /// Finding 1: a thief t reaches b first with "remove a"; the owner's a removes t at c. Before,
    /// b dropped a and then ignored a's mark (its remover no longer vouched): t stayed in at b.
    @Test func mutualRemovalsEndWithBothOutAtEveryMember() throws {
        var k = try ring(4)
        let (a, t) = (k[0].deviceID, k[3].deviceID)
        _ = k[3].remove(a, random: random)
        _ = k[0].remove(t, random: random)
        _ = try k[1].receive(k[3].state.roster, from: t, random: random)   // b hears the thief first
        _ = try k[2].receive(k[0].state.roster, from: a, random: random)   // c hears the owner first
        for _ in 0..<3 {
            _ = try k[1].receive(k[2].state.roster, from: k[2].deviceID, random: random)
            _ = try k[2].receive(k[1].state.roster, from: k[1].deviceID, random: random)
        }
        for i in [1, 2] {
            #expect(k[i].state.roster.removed.isSuperset(of: [a, t]))
            #expect(k[i].peers[t] == nil && k[i].peers[a] == nil)
        }
        #expect(k[1].state.roster.digest == k[2].state.roster.digest)
        #expect(k[1].peers[k[2].deviceID] == k[2].ownSecret)
    }

    /// Property: any removals made at once on 3-5 machines, merged in every delivery order on
    /// every machine, give the same roster everywhere (commutative, associative, idempotent).
    @Test(arguments: [3, 4, 5]) func everyDeliveryOrderGivesTheSameRoster(n: Int) throws {
        for round in 0..<4 {
            var k = try ring(n)
            var targets: Set<DeviceID> = []
            for i in 0..<n {
                let roll = Int(random.bytes(1)[0])
                guard roll % 3 != 0 else { continue }
                let target = (i + 1 + roll % (n - 1)) % n
                _ = k[i].remove(k[target].deviceID, random: random)
                targets.insert(k[target].deviceID)
                if roll % 5 == 0 { _ = k[i].rekey(random: random) }
            }
            let rosters = k.map(\.state.roster)
            var digests: Set<[UInt8]> = []
            for j in 0..<n {
                let others = (0..<n).filter { $0 != j }
                for order in permutations(others) {
                    var r = rosters[j]
                    for i in order { _ = try r.merge(rosters[i], me: k[j].deviceID) }
                    // Idempotent: merging everything once more changes nothing.
                    for i in order { #expect(try !r.merge(rosters[i], me: k[j].deviceID).changed) }
                    #expect(r.removed == targets, "round \(round)")
                    digests.insert(r.digest)
                }
            }
            #expect(digests.count == 1, "round \(round): \(digests.count) different rosters")
        }
    }

    /// Finding 2: marks for identities that never joined are not kept.
    @Test func marksForIdentitiesThatNeverJoinedAreLeftOut() throws {
        var k = try ring(3)
        var bogus = k[2].state.roster
        var marks = bogus.removalMarks
        for i in 0..<24 {
            let id = try DeviceID(bytes: [UInt8](repeating: UInt8(i + 1), count: 16))
            marks[id] = try RemovalMark.make(removing: id, by: k[2].identity)
        }
        bogus = Roster(version: 9, members: Array(bogus.members.values), removalMarks: marks)
        _ = try k[0].receive(bogus, from: k[2].deviceID, random: random)
        #expect(k[0].state.roster.removed.isEmpty)
    }

    /// `count` members, all introduced by the founder (seeds[0]), not synced anywhere.
    func members(_ count: Int) throws -> (Roster, [[UInt8]]) {
        let seeds = (0..<count).map { _ in random.bytes(32) }
        let founder = try Ed25519PrivateKey(seed: seeds[0])
        var roster = Roster(version: 1)
        for (i, seed) in seeds.enumerated() {
            let key = try Ed25519PrivateKey(seed: seed)
            var entry = try RosterMember.signed(name: "machine-\(i)", identity: key, secret: .generate(generation: 1, day: testDay, using: random))
            if i > 0 { entry = entry.introduced(by: try Introduction.make(for: key.publicKey, by: founder)) }
            roster.upsert(entry)
        }
        return (roster, seeds)
    }

    /// Finding 2: a merge that would break the per-remover bound is refused whole, nothing changes.
    @Test func aMergeBreakingABoundIsRefusedWhole() async throws {
        // Over a thousand removals, each re-encoding the roster: off the cooperative pool (offPool).
        let observed = try await offPool { [self] () throws -> (merge: WireError?, unchanged: Bool, full: WireError?) in
            let (base, seeds) = try members(Roster.maxRemovalsPerRemover + 12)
            let founder = try Ed25519PrivateKey(seed: seeds[0])
            let ids = seeds.map { DeviceID(identityKey: try! Ed25519PrivateKey(seed: $0).publicKey) }
            var first = base, second = base
            for id in ids[2..<(Roster.maxRemovalsPerRemover - 2)] { try first.removing(id, by: founder) }
            for id in ids[(Roster.maxRemovalsPerRemover - 2)...] { try second.removing(id, by: founder) }
            let before = first
            var mergeError: WireError?
            do throws(WireError) { _ = try first.merge(second, me: ids[1]) } catch { mergeError = error }
            // The remover itself cannot go past the bound either.
            var full = base
            for id in ids[2..<(Roster.maxRemovalsPerRemover + 2)] { try full.removing(id, by: founder) }
            var fullError: WireError?
            do throws(WireError) { try full.removing(ids[1], by: founder) } catch { fullError = error }
            return (mergeError, first == before, fullError)
        }
        #expect(observed.merge == WireError.malformed("roster removals per remover"))
        #expect(observed.unchanged)
        #expect(observed.full == WireError.malformed("roster removals per remover"))
    }

    /// Finding 2: a 64-member ring with 1,000 removals over its life pairs (the roster in parts),
    /// syncs (under the RingSync limit) and persists (encodes and decodes to the same roster).
    @Test func aSixtyFourMemberRingWithAThousandRemovalsPairsSyncsAndPersists() async throws {
        struct Observed: Sendable {
            var bytes = 0, decodesToItself = false, frame = 0, parts = 0
            var peers = 0, removed = 0, memberKnowsNewcomer = false
        }
        // A thousand removals, each re-encoding the roster: off the cooperative pool (offPool).
        let observed = try await offPool { [self] () throws -> Observed in
            var seen = Observed()
            var (roster, seeds) = try members(1_064)
            let keys = try seeds.prefix(4).map { try Ed25519PrivateKey(seed: $0) }
            for i in 0..<1_000 { try roster.removing(DeviceID(identityKey: try Ed25519PrivateKey(seed: seeds[64 + i]).publicKey), by: keys[i % 4]) }
            let bytes = try roster.encoded()
            seen.bytes = bytes.count
            seen.decodesToItself = try Roster(decoding: bytes) == roster
            seen.parts = RosterChunks.messages(for: bytes).count
            seen.frame = try Frame(type: .ringSync, requestID: 1, payload: bytes).encoded().count
            // Pairing: a new machine joins the founder's ring through the whole exchange.
            var founder = try RingKeeper(state: .init(name: "machine-0", identitySeed: seeds[0], roster: roster))
            var x = try RingKeeper.create(name: "x", today: testDay, random: random)
            try pair(&x, &founder)
            seen.peers = x.peers.count
            seen.removed = x.state.roster.removed.count
            // RingSync: another member merges the founder's roster as received.
            var member = try RingKeeper(state: .init(name: "machine-1", identitySeed: seeds[1], roster: roster))
            _ = try member.receive(try Roster(decoding: founder.state.roster.encoded()), from: founder.deviceID, random: random)
            seen.memberKnowsNewcomer = member.peers[x.deviceID] != nil
            return seen
        }
        #expect(observed.bytes <= FrameType.ringSync.maxPayload)
        #expect(observed.decodesToItself)
        print("roster sizes: 64 members + 1,000 removals: roster \(observed.bytes) bytes, RingSync frame \(observed.frame) bytes, "
              + "pairing roster in \(observed.parts) sealed messages of at most \(RosterChunks.maxPartBytes) roster bytes")
        #expect(observed.peers == 64)
        #expect(observed.removed == 1_000)
        #expect(observed.memberKnowsNewcomer)
    }

    /// Finding 3: a member cannot rewrite or strip "introduced by" of a member others know; a
    /// forged introduction is dropped, and a later newcomer still pairs.
    @Test func introductionsOfKnownMembersAreVerifiedAndNeverStripped() throws {
        var k = try ring(3)
        let (a, b, m) = (0, 1, 2)
        var y = try RingKeeper.create(name: "y", today: testDay, random: random)
        var kb = k[b]
        try pair(&y, &kb)
        k[b] = kb
        _ = try k[a].receive(k[b].state.roster, from: k[b].deviceID, random: random)
        _ = k[a].remove(k[b].deviceID, random: random)   // y's introducer is gone
        let held = try #require(k[a].state.roster.members[y.deviceID])
        #expect(held.introductions.map(\.introducer) == [k[b].deviceID])
        // m sends y's entry stripped and with a forged introduction "by a".
        let forged = held.with(introductions: [try Introduction(introducer: k[a].deviceID, signature: [UInt8](repeating: 9, count: 64))])
        let mEntry = try #require(k[m].state.roster.members[k[m].deviceID])
        _ = try k[a].receive(Roster(version: 5, members: [mEntry, forged]), from: k[m].deviceID, random: random)
        _ = try k[a].receive(Roster(version: 6, members: [mEntry, held.with(introductions: [])]), from: k[m].deviceID, random: random)
        #expect(k[a].state.roster.members[y.deviceID]?.introductions == held.introductions, "introduced by b, removed")
        // A newcomer pairing with a verifies every introduction it receives: pairing works.
        var n = try RingKeeper.create(name: "n", today: testDay, random: random)
        var ka = k[a]
        try pair(&n, &ka)
        k[a] = ka
        #expect(n.peers[y.deviceID] != nil)
    }

    /// Finding 4: removing m does not re-sign m's introductions with the remover's key, and
    /// `bt-pair remove m` offers the whole chain m → y1 → y2.
    @Test func removalKeepsAttributionAndOffersTheWholeSubtree() throws {
        var k = try ring(3)
        let (a, m) = (0, 2)
        var y1 = try RingKeeper.create(name: "y1", today: testDay, random: random)
        var y2 = try RingKeeper.create(name: "y2", today: testDay, random: random)
        var km = k[m]
        try pair(&y1, &km)
        k[m] = km
        try pair(&y2, &y1)
        _ = try k[m].receive(y1.state.roster, from: y1.deviceID, random: random)
        _ = try k[a].receive(k[m].state.roster, from: k[m].deviceID, random: random)
        #expect(k[a].introduced(by: k[m].deviceID) == [y1.deviceID, y2.deviceID].sorted())
        _ = k[a].remove(k[m].deviceID, random: random)
        let y1Entry = try #require(k[a].state.roster.members[y1.deviceID])
        #expect(y1Entry.introductions.map(\.introducer) == [k[m].deviceID], "still introduced by m, not laundered")
        #expect(k[a].introduced(by: k[m].deviceID) == [y1.deviceID, y2.deviceID].sorted())
    }

    /// Finding 6: a member cannot pin the version; a sync owed for a later change is not cleared
    /// by the answer to an earlier one.
    @Test func aPinnedVersionNeitherSticksNorClearsALaterSync() throws {
        var k = try ring(3)
        let (a, b, m) = (0, 1, 2)
        var pinned = k[m].state.roster
        pinned.version = UInt64(Int64.max)
        _ = try k[a].receive(pinned, from: k[m].deviceID, random: random)
        #expect(k[a].state.roster.version < 1_000)
        let earlier = k[a].state.roster.version
        _ = k[a].remove(k[m].deviceID, random: random)
        #expect(k[a].state.pendingSyncs[k[b].deviceID] == k[a].state.roster.version)
        #expect(k[a].state.roster.version > earlier)
        _ = k[a].syncDelivered(to: k[b].deviceID, version: earlier)
        #expect(k[a].state.pendingSyncs[k[b].deviceID] != nil)
    }

    /// A RingSync roster without its sender's own entry is refused (§7.3); refusals map to codes (§6.2).
    @Test func aRosterWithoutItsSendersEntryIsRefused() throws {
        var k = try ring(3)
        var other = k[1].state.roster
        other = Roster(version: 3, members: other.members.values.filter { $0.deviceID != k[2].deviceID }, removalMarks: other.removalMarks)
        #expect(throws: WireError.malformed("roster sender entry")) { _ = try k[0].receive(other, from: k[2].deviceID, random: random) }
        #expect(ErrorFrame(refusedRoster: .badSignature).code == .malformed)
        #expect(ErrorFrame(refusedRoster: .malformed("roster removals per remover")).code == .payloadTooLarge)
        #expect(ErrorFrame(refusedRoster: .malformed("ring not saved")).code == .internalError)
    }
}
