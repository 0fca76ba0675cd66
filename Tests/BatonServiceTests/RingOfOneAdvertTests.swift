// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTestBus
import Foundation
import Testing
@testable import BatonService

/// Issue 23 (daemon bugs): a ring of one that gains a member starts its ring advert at once
/// (protocol §4.2 "Ring of one"), without waiting for a content change.
@Suite("BatonServiceTests: a ring of one starts advertising when it gains a member", .serialized)
struct RingOfOneAdvertTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ringofone-\(UUID().uuidString)")

    @Test func bothSidesAdvertiseTheirRingRightAfterPairing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        #expect(a.radio.onAir == nil && b.radio.onAir == nil, "a ring of one is silent")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        for (node, peer) in [(a, b), (b, a)] {
            // A ring advert (not a pairing advert) is on the air, and the peer recognises it.
            #expect(await eventually(timeout: .seconds(10)) { node.radio.onAir.map { (try? PairingAdvert(decoding: $0)) == nil } ?? false })
            let advert = try #require(node.radio.onAir)
            let id = await node.ring.deviceID
            let before = await peer.ring.radio.matcher.memberIDs
            #expect(before.contains(id))
            peer.radio.hear(advert)
            #expect(await eventually(timeout: .seconds(10)) {
                let seen = await peer.ring.peers[id]?.lastSeen
                return seen != nil
            })
        }
        await a.stop()
        await b.stop()
    }
}
