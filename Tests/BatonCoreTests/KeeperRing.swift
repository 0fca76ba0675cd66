// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore

/// Ring keepers paired through the whole pairing exchange: what the ring-security and red-team
/// suites start their attacks from.
struct KeeperRing {
    let random: SeededRandomFake

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
