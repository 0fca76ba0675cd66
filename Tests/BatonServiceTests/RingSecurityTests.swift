// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonStore
import BatonTransport
import Foundation
import Testing
@testable import BatonService

/// Issue 11 on the service side: durable re-keys, clone detection, removed machines, introducers.
@Suite("BatonServiceTests: ring security in the daemon", .serialized)
struct DaemonRingSecurityTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ringsec-\(UUID().uuidString)")

    func pairedNodes(_ a: BusLessNode, _ b: BusLessNode) async throws {
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
    }

    /// A pinned TLS channel from `client`'s identity to `server`'s listener, Hello exchanged (request id 0).
    func channel(from client: BusLessNode, to server: BusLessNode) async throws -> SecureChannel {
        let serverKey = await server.ring.snapshot().identity.publicKey
        let connector = try TLSConnector(identity: await client.ring.snapshot().identity, pins: { PinSet([serverKey]) })
        let channel = try await connector.connect(host: "127.0.0.1", port: server.transfer.port, timeout: .seconds(10))
        let hello = HelloMessage(deviceID: await client.ring.deviceID, rosterDigest: await client.ring.rosterDigest, maxFramePayload: 1_048_576)
        try await channel.send(Frame(type: .hello, requestID: 0, payload: hello.payload))
        let reply = try await channel.receive(timeout: .seconds(10))
        #expect(reply.type == .hello && reply.requestID == 0)
        return channel
    }

    /// §6.2 "A RingSync whose roster removes the server": the server merges it, starts over as §7.4
    /// says (alone, a new secret of the next generation, roster version 1, nothing owed, the old
    /// members forgotten) and replies with a removal notice of itself: version 0, no members, only
    /// the tombstone that removed it, never its new secret.
    @Test func aRingSyncThatRemovesTheResponderIsAnsweredWithItsOwnTombstoneOnly() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        try await pairedNodes(a, b)
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        #expect(await eventually(timeout: .seconds(10)) { await a.ring.pendingSyncs().isEmpty })
        let before = await a.ring.snapshot()
        #expect(before.isMember(idB))
        // beta's roster with a tombstone for alpha signed by beta, as beta's RingSync to alpha.
        var removing = await b.ring.snapshot().roster
        try removing.removing(idA, by: await b.ring.snapshot().identity)
        let mark = try #require(removing.removalMarks[idA])
        let channel = try await channel(from: b, to: a)
        defer { channel.close() }
        try await channel.send(Frame(type: .ringSync, requestID: 9, payload: try removing.encoded()))
        let reply = try await channel.receive(timeout: .seconds(10))
        #expect(reply.type == .ringSync && reply.requestID == 9)
        let notice = try Roster(decoding: reply.payload)
        #expect(notice.version == 0 && notice.members.isEmpty && notice.entries.isEmpty)
        #expect(Array(notice.removalMarks.keys) == [idA])
        #expect(notice.removalMarks[idA]?.remover == idB && notice.removalMarks[idA]?.signature == mark.signature)
        // Then alpha ends the channel: beta is nobody to it any more.
        await #expect(throws: TransportError.self) { _ = try await channel.receive(timeout: .seconds(10)) }
        // alpha started over (§7.3, §7.4): alone, the generation after its last, version 1, nothing owed.
        let after = await a.ring.snapshot()
        #expect(Array(after.roster.members.keys) == [idA])
        #expect(after.roster.removalMarks.isEmpty && !after.isMember(idB))
        #expect(after.ownSecret.generation == before.ownSecret.generation + 1 && after.ownSecret != before.ownSecret)
        #expect(after.rosterVersion == 1)
        #expect(await a.ring.pendingSyncs().isEmpty)
        // Never its new secret: no key or commitment of alpha's new generation is in the reply.
        for secret in [after.ownSecret.bytes, try #require(after.ownSecret.chain?.commitment)] {
            #expect(!reply.payload.indices.dropLast(secret.count - 1).contains { Array(reply.payload[$0..<$0 + secret.count]) == secret })
        }
        await a.stop()
        await b.stop()
    }

    /// The same when the RingSync takes the server out with a cascading mark (its only introducer
    /// removed with what it introduced): the notice holds the cascading tombstones, no member.
    @Test func aRingSyncThatTakesTheResponderOutIsAnsweredWithTheCascadingTombstonesOnly() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let c = try await BusLessNode.start(in: directory, name: "gamma")
        // alpha paired only with gamma, beta only with gamma: alpha's one introducer is gamma.
        try await pairedNodes(a, c)
        try await pairedNodes(b, c)
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID, idC = await c.ring.deviceID
        #expect(await eventually(timeout: .seconds(10)) {
            let atA = await a.ring.snapshot(), atB = await b.ring.snapshot()
            return atA.isMember(idB) && atB.isMember(idA)
        })
        let before = await a.ring.snapshot()
        var removing = await b.ring.snapshot().roster
        try removing.removing(idC, by: await b.ring.snapshot().identity, withIntroduced: true)
        #expect(removing.isOut(idA) && removing.removalMarks[idA] == nil)
        let channel = try await channel(from: b, to: a)
        defer { channel.close() }
        try await channel.send(Frame(type: .ringSync, requestID: 5, payload: try removing.encoded()))
        let reply = try await channel.receive(timeout: .seconds(10))
        #expect(reply.type == .ringSync && reply.requestID == 5)
        let notice = try Roster(decoding: reply.payload)
        #expect(notice.version == 0 && notice.entries.isEmpty)
        #expect(Array(notice.removalMarks.keys) == [idC] && notice.removalMarks[idC]?.cascading == true)
        let after = await a.ring.snapshot()
        #expect(Array(after.roster.members.keys) == [idA] && after.rosterVersion == 1)
        #expect(after.ownSecret.generation == before.ownSecret.generation + 1)
        await a.stop()
        await b.stop()
        await c.stop()
    }

    @Test func aMemberAwayDuringARemovalGetsTheRekeyAtItsNextSightingEvenAfterARestart() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        var c = try await BusLessNode.start(in: directory, name: "gamma")
        try await pairedNodes(a, b)
        try await pairedNodes(a, c)
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID, idC = await c.ring.deviceID
        #expect(await eventually(timeout: .seconds(10)) { await a.ring.pendingSyncs().isEmpty })
        let oldGeneration = await a.ring.snapshot().ownSecret.generation
        #expect(await c.ring.snapshot().roster.members[idA]?.secret.generation == oldGeneration)

        // gamma is away while alpha removes beta: the RingSync with alpha's new secret fails and stays owed.
        await c.stop()
        try await a.ring.remove(idB.description)
        let newSecret = await a.ring.snapshot().ownSecret
        #expect(newSecret.generation == oldGeneration + 1)
        try await Task.sleep(for: .milliseconds(500))
        #expect(await a.ring.pendingSyncs()[idC] != nil)

        // Durable: alpha restarts and still owes gamma the re-key.
        await a.stop()
        a = try await BusLessNode.start(in: directory, name: "alpha")
        #expect(await a.ring.pendingSyncs()[idC] == (await a.ring.snapshot().rosterVersion))
        c = try await BusLessNode.start(in: directory, name: "gamma")
        #expect(await c.ring.snapshot().roster.members[idA]?.secret.generation == oldGeneration)
        // gamma listens on a new port now (DNS-SD would tell alpha); then alpha hears its advert.
        await a.ring.endpointFound(idC, "127.0.0.1:\(c.transfer.port)")
        let record = try ActivityRecord(activityType: "org.example.Reader.reading", title: "t", userInfo: [:], webpageURL: nil, version: 1)
        try await c.ring.radio.publish(record, uid: getuid())
        a.radio.hear(try #require(c.radio.lastAdvert))
        #expect(await eventually(timeout: .seconds(10)) { await c.ring.snapshot().roster.members[idA]?.secret == newSecret })
        #expect(await eventually(timeout: .seconds(10)) { await a.ring.pendingSyncs().isEmpty })
        #expect(await c.ring.snapshot().roster.members[idB] == nil)
        await a.stop()
        await b.stop()
        await c.stop()
    }

    @Test func aHelloFromAMemberRetriesTheRekeyItMissed() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        var c = try await BusLessNode.start(in: directory, name: "gamma")
        try await pairedNodes(a, b)
        try await pairedNodes(a, c)
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID, idC = await c.ring.deviceID
        await c.stop()
        try await a.ring.remove(idB.description)
        try await Task.sleep(for: .milliseconds(500))
        #expect(await a.ring.pendingSyncs()[idC] != nil)
        c = try await BusLessNode.start(in: directory, name: "gamma")
        await a.ring.endpointFound(idC, "127.0.0.1:\(c.transfer.port)")
        // gamma says Hello to alpha (any request opens with one): alpha's own retry delivers and clears the debt.
        try await c.transfer.syncRing(to: idA)
        #expect(await eventually(timeout: .seconds(10)) { await a.ring.pendingSyncs().isEmpty })
        #expect(await c.ring.snapshot().roster.members[idA]?.secret == (await a.ring.snapshot().ownSecret))
        await a.stop()
        await b.stop()
        await c.stop()
    }

    @Test func countersWrittenOnAnotherMachineRekeyTheRing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let machineA = directory.appendingPathComponent("machine-a").path, machineB = directory.appendingPathComponent("machine-b").path
        try "0123456789abcdef0123456789abcdef\n".write(toFile: machineA, atomically: true, encoding: .utf8)
        try "fedcba9876543210fedcba9876543210\n".write(toFile: machineB, atomically: true, encoding: .utf8)
        var a = try await BusLessNode.start(in: directory, name: "alpha", machineIDPaths: ["/nonexistent/machine-id", machineA])
        let b = try await BusLessNode.start(in: directory, name: "beta")
        try await pairedNodes(a, b)
        let idA = await a.ring.deviceID
        let before = await a.ring.snapshot()
        // The counters are written with machine A's value.
        let record = try ActivityRecord(activityType: "org.example.Reader.reading", title: "t", userInfo: [:], webpageURL: nil, version: 1)
        try await a.ring.radio.publish(record, uid: getuid())
        await a.stop()

        // Same machine: nothing changes.
        a = try await BusLessNode.start(in: directory, name: "alpha", machineIDPaths: [machineA])
        #expect(await a.ring.snapshot().ownSecret == before.ownSecret)
        #expect(await a.ring.snapshot().rosterVersion == before.rosterVersion)
        await a.stop()

        // The state directory "copied" to machine B: a new secret, a new roster version, beta hears of it.
        a = try await BusLessNode.start(in: directory, name: "alpha", machineIDPaths: [machineB])
        let after = await a.ring.snapshot()
        #expect(after.ownSecret != before.ownSecret)
        #expect(after.ownSecret.generation == before.ownSecret.generation + 1)
        #expect(after.rosterVersion > before.rosterVersion)
        #expect(await a.ring.radio.needsRekey == false)
        // The counters on disk now belong to machine B and to the new secret.
        let store = try RingStore(directory: StateDirectory(path: directory.appendingPathComponent("alpha").path))
        let counters = try #require(try store.loadCounters())
        #expect(counters.generation == after.ownSecret.generation)
        #expect(counters.machine == MachineIdentity.value(paths: [machineB], store: store))
        #expect(counters.machine != MachineIdentity.value(paths: [machineA], store: store))
        #expect(await eventually(timeout: .seconds(10)) { await b.ring.snapshot().roster.members[idA]?.secret == after.ownSecret })
        // Restarting on B again is not a clone any more.
        await a.stop()
        a = try await BusLessNode.start(in: directory, name: "alpha", machineIDPaths: [machineB])
        #expect(await a.ring.snapshot().ownSecret == after.ownSecret)
        await a.stop()
        await b.stop()
    }

    @Test func aBadIntroductionIsDroppedWithItsMemberWhileTheRestOfTheRosterMerges() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        try await pairedNodes(a, b)
        let idB = await b.ring.deviceID
        // beta's roster with a planted member whose introduction by beta does not verify, beside a
        // newcomer beta really introduced.
        var forged = await b.ring.snapshot().roster
        let stranger = try RosterMember.signed(name: "stranger", identity: Ed25519PrivateKey(),
                                               secret: .generate(generation: 1, day: testDay, using: SystemRandom()))
        forged.upsert(stranger.introduced(by: try Introduction(introducer: idB, signature: [UInt8](repeating: 7, count: 64))))
        let newcomer = try RosterMember.signed(name: "newcomer", identity: Ed25519PrivateKey(),
                                               secret: .generate(generation: 1, day: testDay, using: SystemRandom()))
        forged.upsert(newcomer.introduced(by: try Introduction.make(for: newcomer.identityKey, by: await b.ring.snapshot().identity)))
        let before = await a.ring.snapshot().roster
        // Issue 23: an introduction that does not verify is dropped, not stored; the member it would
        // vouch for is left out, the rest of the roster is merged.
        _ = try await a.ring.receivedRoster(forged, from: idB)
        let after = await a.ring.snapshot().roster
        #expect(after.members.keys.sorted() == (before.members.keys + [newcomer.deviceID]).sorted())
        #expect(await a.ring.isMember(stranger.deviceID) == false)
        #expect(after.members[newcomer.deviceID]?.introductions.map(\.introducer) == [idB])
        await a.stop()
        await b.stop()
    }
}
