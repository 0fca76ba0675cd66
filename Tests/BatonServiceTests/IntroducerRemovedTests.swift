// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// Issue 23 (B3b): the original attribution stays after the introducer is removed ("introduced by
/// X, removed"): Ring1.ListMembers carries IntroducerRemoved beside IntroducedBy.
@Suite("BatonServiceTests: introduced by X, removed", .serialized)
struct IntroducerRemovedTests {
    @Test func listMembersKeepsTheIntroducerAndSaysItWasRemoved() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let c = try await TransferNode.start(bus, name: "gamma")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        try await pair(b, c, client: client)
        let idB = await b.deviceID, idC = await c.deviceID
        // Alpha learns gamma from beta's RingSync: introduced by beta.
        #expect(await eventually(timeout: .seconds(15)) { await a.ring.snapshot().isMember(idC) })
        func gammaAtAlpha() async throws -> RingMember {
            try #require(try await RingMember.list(a.ringNode.call(client, BatonInterface.ring, "ListMembers")).first { $0.shortID == idC.shortForm })
        }
        let before = try await gammaAtAlpha()
        #expect(before.introducedBy == idB.shortForm)
        #expect(before.introducerRemoved == false)
        let list = ["--bus", bus.address, "--bus-name", a.busName, "list"]
        let (statusBefore, tableBefore, _) = try await runTool(productPath("bt-pair"), list)
        #expect(statusBefore == 0 && tableBefore.contains("introduced by beta (\(idB.shortForm))"), "\(tableBefore)")
        // Beta alone is removed; gamma stays, still introduced by beta, now marked removed.
        _ = try await a.ringNode.call(client, BatonInterface.pairing, "Remove", [.string(idB.shortForm)])
        #expect(await !a.ring.snapshot().isMember(idB))
        let after = try await gammaAtAlpha()
        #expect(after.introducedBy == idB.shortForm)
        #expect(after.introducerRemoved == true)
        let (statusAfter, tableAfter, _) = try await runTool(productPath("bt-pair"), list)
        #expect(statusAfter == 0 && tableAfter.contains("introduced by \(idB.shortForm) (removed)"), "\(tableAfter)")
        let (_, jsonAfter, _) = try await runTool(productPath("bt-pair"), ["--bus", bus.address, "--bus-name", a.busName, "--json", "list"])
        #expect(jsonAfter.contains("\"IntroducerRemoved\":true"), "\(jsonAfter)")
        let summary = try #require(await a.ring.memberSummaries().first { $0.deviceID == idC })
        #expect(summary.introducedBy == idB && summary.introducerRemoved)
        // Members paired here carry neither.
        let selfEntry = try #require(try await RingMember.list(a.ringNode.call(client, BatonInterface.ring, "ListMembers")).first { $0.isSelf })
        #expect(selfEntry.introducedBy == nil && selfEntry.introducerRemoved == nil)
        await a.stop()
        await b.stop()
        await c.stop()
    }
}
