// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore

/// Ring keepers paired through the whole pairing exchange: what the ring-security and red-team
/// suites start their attacks from.
struct KeeperRing {
    let random: SeededRandomFake

    /// `n` keepers paired through the first, then all synced.
    func ring(_ n: Int) throws -> [RingKeeper] {
        var keepers = try (0..<n).map { try RingKeeper.create(name: "k\($0)", today: testDay, random: random) }
        for i in 1..<n {
            var (joiner, hub) = (keepers[i], keepers[0])
            try pair(&joiner, &hub)
            (keepers[i], keepers[0]) = (joiner, hub)
        }
        for i in 1..<n { _ = try keepers[i].receive(keepers[0].state.roster, from: keepers[0].deviceID, random: random) }
        for i in 1..<n { _ = try keepers[0].receive(keepers[i].state.roster, from: keepers[i].deviceID, random: random) }
        for i in 1..<n { _ = try keepers[i].receive(keepers[0].state.roster, from: keepers[0].deviceID, random: random) }
        return keepers
    }

    func pair(_ a: inout RingKeeper, _ b: inout RingKeeper) throws {
        var h = PairingHarness(random: random, initiatorInfo: a.pairingInfo(), responderInfo: b.pairingInfo())
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        h.confirm(initiator: true, responder: true)
        _ = try a.pair(try #require(h.results[.initiator]), random: random)
        _ = try b.pair(try #require(h.results[.responder]), random: random)
    }

    /// a, b and m paired; everyone holds everyone's entry.
    func ring() throws -> (a: RingKeeper, b: RingKeeper, m: RingKeeper) {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        var b = try RingKeeper.create(name: "b", today: testDay, random: random)
        var m = try RingKeeper.create(name: "m", today: testDay, random: random)
        try pair(&a, &b)
        try pair(&m, &a)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        _ = try m.receive(a.state.roster, from: a.deviceID, random: random)
        return (a, b, m)
    }
}

/// Every order of `items` (delivery orders in the ring convergence tests).
func permutations<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    return items.indices.flatMap { i -> [[T]] in
        var rest = items
        let head = rest.remove(at: i)
        return permutations(rest).map { [head] + $0 }
    }
}
