// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import BatonDBus
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// Issue 23 (B2d): a ring change whose record cannot be saved is refused as a whole, visibly, and
/// never half-applied: a pairing join and `bt-pair remove` as a RingSync already was. The store
/// fails the way a real one does: a ring file on disk that is not a ring record (a save reports it
/// rather than overwrite it), so every save of the ring fails and the file stays as it was.
@Suite("BatonServiceTests: a ring change that cannot be saved is refused", .serialized)
struct UnsavedRingChangeTests {
    static let damaged = Data("not a ring record".utf8)

    static func damageRing(_ node: TransferNode) throws {
        try damaged.write(to: URL(fileURLWithPath: node.stateDirectory + "/ring"))
    }

    static func status(_ node: TransferNode, client: DBusConnection) async throws -> ManagerStatus {
        let reply = try await client.call(destination: node.busName, path: "/org/baton", interface: BatonInterface.manager, method: "GetStatus")
        return try ManagerStatus(try #require(reply.first))
    }

    /// Both people confirmed, then the acceptor cannot save the ring with the new member: its session
    /// fails `not-saved`, its ring, radio and RingSyncs owed stay as they were, GetStatus says why.
    @Test func aPairingJoinThatCannotBeSavedFailsTheSessionAndChangesNothing() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        #expect(try await Self.status(a, client: client).ringChangeRefused == nil)
        let rosterBefore = await a.ring.snapshot().roster
        let p = try await startPairing(a.ringNode, b.ringNode, client: client)
        try await confirmBothCodes(a.ringNode, b.ringNode, p, client: client)
        for (node, path) in [(a.ringNode, p.pathA), (b.ringNode, p.pathB)] {
            #expect(try await eventually(timeout: .seconds(10)) { try await node.property(client, path, "State").stringValue == "reviewing" })
        }
        try Self.damageRing(a)
        _ = try await a.ringNode.call(client, BatonInterface.pairingSession, "Commit", path: p.pathA)
        #expect(try await eventually(timeout: .seconds(10)) { try await a.ringNode.property(client, p.pathA, "State").stringValue == "failed" })
        #expect(try await a.ringNode.property(client, p.pathA, "Error").stringValue == "not-saved")
        // Nothing of the join here: roster, peers, radio, RingSyncs owed, the file.
        let idB = await b.deviceID
        #expect(await a.ring.snapshot().roster == rosterBefore)
        #expect(await a.ring.memberSummaries().count == 1)
        #expect(await a.ring.radio.matcher.memberIDs.isEmpty)
        #expect(await a.ring.pendingSyncs().isEmpty)
        #expect(await a.ring.peers[idB] == nil)
        #expect(try Data(contentsOf: URL(fileURLWithPath: a.stateDirectory + "/ring")) == Self.damaged)
        let status = try await Self.status(a, client: client)
        let sentence = try #require(status.ringChangeRefused)
        #expect(sentence.contains("pairing with \"beta\"") && sentence.contains("nothing changed") && sentence.contains("Free disk space"), "\(sentence)")
        #expect((status.ringChangeRefusedTime ?? 0) > 0)
        _ = try? await b.ringNode.call(client, BatonInterface.pairingSession, "Cancel", path: p.pathB)
        await a.stop()
        await b.stop()
    }

    /// `bt-pair remove` on a machine that cannot save its ring: Failed with a sentence (what, why,
    /// the fix), the member stays, nobody is told, no re-key, GetStatus keeps the refusal.
    @Test func aRemovalThatCannotBeSavedIsFailedAndNothingIsSent() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        let idA = await a.deviceID, idB = await b.deviceID
        #expect(await eventually(timeout: .seconds(10)) { await b.ring.snapshot().isMember(idA) })
        let rosterBefore = await a.ring.snapshot().roster
        let secretBefore = await a.ring.keeper.ownSecret
        try Self.damageRing(a)
        do {
            _ = try await a.ringNode.call(client, BatonInterface.pairing, "Remove", [.string("beta")])
            Issue.record("the removal went ahead without its record")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.Failed", "\(error)")
            #expect(error.message.contains("\"beta\" was not removed") && error.message.contains("nothing changed")
                    && error.message.contains("state directory writable"), "\(error)")
        }
        #expect(await a.ring.snapshot().roster == rosterBefore)
        #expect(await a.ring.keeper.ownSecret == secretBefore)
        #expect(await a.ring.radio.matcher.memberIDs == [idB])
        #expect(await a.ring.pendingSyncs().isEmpty)
        #expect(await a.ring.peers[idB] != nil)
        #expect(try Data(contentsOf: URL(fileURLWithPath: a.stateDirectory + "/ring")) == Self.damaged)
        // Beta heard nothing: alpha is still its member.
        try await Task.sleep(for: .milliseconds(300))
        #expect(await b.ring.snapshot().isMember(idA))
        let sentence = try #require(try await Self.status(a, client: client).ringChangeRefused)
        #expect(sentence.contains("removal of \"beta\""), "\(sentence)")
        await a.stop()
        await b.stop()
    }

    /// A member's RingSync whose merge cannot be saved was already refused whole (answered
    /// `internal`, "ring not saved"); it now also shows in GetStatus.
    @Test func aRingSyncThatCannotBeSavedShowsInStatus() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        let idB = await b.deviceID
        // Beta re-keys: its roster, as its RingSync would carry it, is newer than alpha's.
        await b.ring.rekey(reason: "test")
        let newer = await b.ring.snapshot().roster
        let rosterBefore = await a.ring.snapshot().roster
        try Self.damageRing(a)
        await #expect(throws: WireError.malformed(RingService.unsavedRing)) { _ = try await a.ring.receivedRoster(newer, from: idB) }
        #expect(await a.ring.snapshot().roster == rosterBefore)
        let sentence = try #require(try await Self.status(a, client: client).ringChangeRefused)
        #expect(sentence.contains("RingSync from \(idB.shortForm)") && sentence.contains("nothing changed"), "\(sentence)")
        await a.stop()
        await b.stop()
    }
}
