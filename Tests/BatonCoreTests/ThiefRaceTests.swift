// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore

/// The lab's race (RingRemovalRaceLabTests) on the core, with every kind of mark: a ring paired as
/// people would (the laptop pairs m1, m1 pairs m2 and the thief); the thief removes the laptop
/// while the owner removes the thief at m2; what is in flight then arrives in every order, and
/// only over channels the receiver still pins (a member, or a removed device handing in its marks,
/// §8.1 and §6.2): a member that started over pins nobody.
@Suite struct ThiefRaceTests {
    let random = SeededRandomFake(seed: 2_324)
    static let names = ["laptop", "m1", "m2", "thief"]
    static let (laptop, m1, m2, thief) = (0, 1, 2, 3)

    /// Whether `receiver` would take a RingSync from `sender` at all.
    static func pins(_ receiver: RingKeeper, _ sender: DeviceID) -> Bool {
        receiver.state.roster.entries[sender] != nil || receiver.state.roster.isOut(sender)
    }

    func deliver(_ k: inout [RingKeeper], _ roster: Roster, from: Int, to: Int) throws {
        guard Self.pins(k[to], k[from].deviceID) else { return }
        _ = try k[to].receive(roster, from: k[from].deviceID, random: random)
    }

    /// The ring paired as in the lab, everyone holding everyone; then both removals.
    func raced(thiefCascades: Bool, ownerCascades: Bool) throws -> [RingKeeper] {
        let ring = KeeperRing(random: random)
        var k = try Self.names.map { try RingKeeper.create(name: $0, today: testDay, random: random) }
        func pair(_ x: Int, _ y: Int) throws {
            var (a, b) = (k[x], k[y])
            try ring.pair(&a, &b)
            (k[x], k[y]) = (a, b)
        }
        try pair(Self.m1, Self.laptop)
        try pair(Self.m2, Self.m1)
        try pair(Self.thief, Self.m1)
        for _ in 0..<3 {
            for x in 0..<4 { for y in 0..<4 where y != x { try deliver(&k, k[x].state.roster, from: x, to: y) } }
        }
        for i in 0..<4 { #expect(k[i].peers.count == 3, "\(Self.names[i]) before the race") }
        _ = try k[Self.thief].removeMember(k[Self.laptop].deviceID, withIntroduced: thiefCascades, random: random)
        _ = try k[Self.m2].removeMember(k[Self.thief].deviceID, withIntroduced: ownerCascades, random: random)
        return k
    }

    /// In flight: the thief's RingSync to m1 and m2, the owner's (m2's) to m1, the laptop's (not yet
    /// told) to m1 and m2, each with its sender's roster of that moment; then m1 and m2 sync.
    func everyOrder(_ k: [RingKeeper], _ check: ([RingKeeper], [Int]) -> Void) throws {
        let (laptop, m1, m2, thief) = (Self.laptop, Self.m1, Self.m2, Self.thief)
        let deliveries: [(from: Int, to: Int)] = [(thief, m1), (thief, m2), (m2, m1), (laptop, m1), (laptop, m2)]
        let sent = k.map(\.state.roster)
        for order in permutations(Array(deliveries.indices)) {
            var views = k
            for index in order { try deliver(&views, sent[deliveries[index].from], from: deliveries[index].from, to: deliveries[index].to) }
            for _ in 0..<4 {
                try deliver(&views, views[m1].state.roster, from: m1, to: m2)
                try deliver(&views, views[m2].state.roster, from: m2, to: m1)
            }
            check(views, order)
        }
    }

    func sees(_ views: [RingKeeper], _ i: Int) -> [String] {
        let names = Dictionary(uniqueKeysWithValues: zip(views.map(\.deviceID), Self.names))
        return views[i].peers.keys.map { names[$0] ?? "?" }.sorted()
    }

    /// `bt-pair remove laptop` on the thief (plain, as the lab's thief), and the owner's removal of
    /// the thief at m2 with or without what it introduced: m1 and m2 end with each other alone.
    @Test(arguments: [false, true]) func aPlainRemovalByTheThiefLosesTheRace(ownerCascades: Bool) throws {
        let k = try raced(thiefCascades: false, ownerCascades: ownerCascades)
        try everyOrder(k) { views, order in
            #expect(sees(views, Self.m1) == ["m2"] && sees(views, Self.m2) == ["m1"],
                    "order \(order): m1 sees \(sees(views, Self.m1)), m2 sees \(sees(views, Self.m2))")
        }
    }

    /// A thief that removes the laptop *with what it introduced* (one cascading mark, §7.3 5a):
    /// everything the laptop paired in, transitively, is reached from that root; the owner's remover
    /// m2 is not spared, since the laptop's walk meets it through m1 first. Once the owner's mark for
    /// the thief is in too, the thief's cascade takes out m1 and m2: the ring dissolves, each starts
    /// over alone and the owner pairs the machines again. What is asserted is what matters for
    /// capture: the thief ends with no member holding its key, in every order.
    @Test(arguments: [false, true]) func aCascadingRemovalByTheThiefDissolvesTheRingButCapturesNothing(ownerCascades: Bool) throws {
        let k = try raced(thiefCascades: true, ownerCascades: ownerCascades)
        let thiefID = k[Self.thief].deviceID
        try everyOrder(k) { views, order in
            for member in [Self.m1, Self.m2] {
                #expect(views[member].peers[thiefID] == nil, "order \(order): \(Self.names[member]) sees \(sees(views, member))")
            }
            #expect(sees(views, Self.m1).isEmpty && sees(views, Self.m2).isEmpty,
                    "order \(order): m1 sees \(sees(views, Self.m1)), m2 sees \(sees(views, Self.m2))")
        }
    }
}

/// Found by RingRemovalRaceLabTests: a machine that pairs into a ring holding tombstones re-keys
/// (the merge brings newly removed devices, §7.4) and must send its new secret to the member it
/// paired with as well, or that member keeps the pairing-time secret and hears its adverts as
/// another ring's.
@Suite struct PairingJoinRekeyTests {
    let random = SeededRandomFake(seed: 2_325)

    @Test func aJoinerThatReKeysSyncsItsPairingPeerToo() throws {
        let ring = KeeperRing(random: random)
        var k = try ring.ring(3)
        _ = try k[0].removeMember(k[2].deviceID, random: random)
        var joiner = try RingKeeper.create(name: "laptop", today: testDay, random: random)
        let before = joiner.ownSecret
        var h = PairingHarness(random: random, initiatorInfo: joiner.pairingInfo(), responderInfo: k[0].pairingInfo())
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        h.confirm(initiator: true, responder: true)
        let actions = try joiner.pair(try #require(h.results[.initiator]), random: random)
        _ = try k[0].pair(try #require(h.results[.responder]), random: random)
        // It re-keyed, and the RingSync goes to the peer too (and to k1, known only through the peer).
        #expect(joiner.ownSecret.generation > before.generation)
        #expect(actions.contains(.rotateOwnSecret(joiner.ownSecret)))
        #expect(actions.contains(.sync(k[0].deviceID)))
        #expect(actions.contains(.sync(k[1].deviceID)))
        // Before that RingSync the peer holds the pairing-time secret; after it, the current one.
        #expect(k[0].peers[joiner.deviceID]?.generation == before.generation)
        _ = try k[0].receive(joiner.state.roster, from: joiner.deviceID, random: random)
        #expect(k[0].peers[joiner.deviceID]?.generation == joiner.ownSecret.generation)
    }

    @Test func aJoinerWithoutNewRemovalsDoesNotSyncBackToItsPeer() throws {
        let ring = KeeperRing(random: random)
        var k = try ring.ring(2)
        var joiner = try RingKeeper.create(name: "laptop", today: testDay, random: random)
        let before = joiner.ownSecret
        var h = PairingHarness(random: random, initiatorInfo: joiner.pairingInfo(), responderInfo: k[0].pairingInfo())
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        h.confirm(initiator: true, responder: true)
        let actions = try joiner.pair(try #require(h.results[.initiator]), random: random)
        #expect(joiner.ownSecret == before)
        #expect(!actions.contains(.sync(k[0].deviceID)))
        #expect(actions.contains(.sync(k[1].deviceID)))
    }
}
