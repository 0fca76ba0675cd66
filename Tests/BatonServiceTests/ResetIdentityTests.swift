// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import BatonTransport
import Foundation
import Testing
@testable import BatonService

/// Issue 23: Pairing1.ResetIdentity and `bt-pair reset-identity` (protocol §7.5): the machine
/// leaves its ring under a new identity, the running transfer proves it, nothing is sent.
@Suite("BatonServiceTests: a new identity (Pairing1.ResetIdentity)", .serialized)
struct ResetIdentityTests {
    @Test func resetLeavesTheRingUnderANewIdentityThatTheTransferProves() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        let oldID = await a.deviceID, idB = await b.deviceID
        let oldKey = await a.ring.keeper.identity.publicKey
        let oldSeed = await a.ring.keeper.state.identitySeed
        let oldGeneration = await a.ring.keeper.ownSecret.generation
        let secretOfB = try #require(await a.ring.keeper.state.roster.members[idB]?.secret)
        let identityOfB = await b.ring.keeper.identity
        let pairedBefore = await handshakeSucceeds(identity: identityOfB, serverKey: oldKey, port: a.transfer.port)
        #expect(pairedBefore)

        let reply = try await a.ringNode.call(client, BatonInterface.pairing, "ResetIdentity")
        let newID = await a.deviceID
        #expect(reply.first?.stringValue == newID.description)
        #expect(newID != oldID)

        // A ring of one: only itself, no tombstone, nothing owed, no member secret; the generation
        // follows the previous one (as when starting over after a removal, §7.4).
        let snapshot = await a.ring.snapshot()
        #expect(Array(snapshot.roster.members.keys) == [newID])
        #expect(snapshot.roster.removalMarks.isEmpty)
        let pending = await a.ring.pendingSyncs()
        #expect(pending.isEmpty)
        let generation = await a.ring.keeper.ownSecret.generation
        #expect(generation == oldGeneration + 1)
        let matcherMembers = await a.ring.radio.matcher.memberIDs
        #expect(matcherMembers.isEmpty)
        let members = try await a.ringNode.members(client)
        #expect(members.count == 1 && members.first?["Self"]?.boolValue == true)
        #expect(members.first?["DeviceId"]?.stringValue == newID.description)

        // On disk: the ring record (0600) holds the new identity and the ring of one; B's secret
        // and the old seed are gone from it, and no peer record of B is left.
        let ringFile = a.stateDirectory + "/ring"
        let mode = try FileManager.default.attributesOfItem(atPath: ringFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let stored = try #require(try RingStore(directory: StateDirectory(path: a.stateDirectory)).loadRing())
        let storedKeeper = try RingKeeper(state: stored)
        #expect(storedKeeper.deviceID == newID)
        #expect(stored.identitySeed != oldSeed)
        #expect(Array(stored.roster.members.keys) == [newID] && stored.roster.removalMarks.isEmpty)
        #expect(!stored.roster.members.values.contains { $0.secret == secretOfB })
        let fileText = String(decoding: try Data(contentsOf: URL(fileURLWithPath: ringFile)), as: UTF8.self)
        #expect(!fileText.contains(oldSeed.hexString))
        let peers = try RingStore(directory: StateDirectory(path: a.stateDirectory)).loadPeers()
        #expect(peers.isEmpty)

        // Nothing was sent: B still lists the old id.
        let bStillKnowsOld = await b.ring.isMember(oldID)
        #expect(bStillKnowsOld)

        // The running transfer proves the new identity, TCP and L2CAP alike, without a restart.
        let newKey = await a.ring.keeper.identity.publicKey
        #expect(a.transfer.connector.identityKey == newKey)
        #expect(a.transfer.secureL2CAP.identityKey == newKey)
        // B is no member of A any more: its handshake is refused whichever key it pins.
        let refusedOld = await handshakeSucceeds(identity: identityOfB, serverKey: oldKey, port: a.transfer.port)
        let refusedNew = await handshakeSucceeds(identity: identityOfB, serverKey: newKey, port: a.transfer.port)
        #expect(!refusedOld && !refusedNew)

        // The owner removes the old id on B, then pairs A again: A's listener proves the new key.
        _ = try await b.ringNode.call(client, BatonInterface.pairing, "Remove", [.string(oldID.shortForm)])
        try await pair(a, b, client: client)
        let rejoined = await b.ring.isMember(newID)
        #expect(rejoined)
        let provesNew = await handshakeSucceeds(identity: identityOfB, serverKey: newKey, port: a.transfer.port)
        #expect(provesNew)
        let provesOld = await handshakeSucceeds(identity: identityOfB, serverKey: oldKey, port: a.transfer.port)
        #expect(!provesOld)
        // A's connector dials B under the new identity: B serves it as the new member.
        let channel = try await a.transfer.connector.connect(host: "127.0.0.1", port: b.transfer.port, timeout: .seconds(5))
        defer { channel.close() }
        #expect(channel.peerDeviceID == idB)
        let hello = HelloMessage(deviceID: newID, rosterDigest: 0, maxFramePayload: 1024)
        try await channel.send(Frame(type: .hello, requestID: 1, payload: hello.payload))
        #expect(try await channel.receive(timeout: .seconds(120)).type == .hello)
        let servedAsNew = await eventually(timeout: .seconds(10)) { await b.transfer.openChannelCount(from: newID) >= 1 }
        #expect(servedAsNew)
        await a.stop()
        await b.stop()
    }

    @Test func refusedWhileAPairingSessionIsOpen() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha")
        let client = try DBusConnection(bus: .address(bus.address))
        let before = await a.service.deviceID
        let path = try #require(try await a.call(client, BatonInterface.pairing, "Accept", [.propertyDictionary([:])]).first?.objectPathValue)
        do {
            _ = try await a.call(client, BatonInterface.pairing, "ResetIdentity")
            Issue.record("ResetIdentity was not refused during a pairing session")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.NotReady", "\(error)")
            #expect(error.message.contains("a pairing session is open"), "\(error)")
        }
        let during = await a.service.deviceID
        #expect(during == before)
        // Once the session ended, the reset goes ahead.
        _ = try await a.call(client, BatonInterface.pairingSession, "Cancel", path: path)
        let ended = await eventually(timeout: .seconds(10)) { (try? await a.property(client, path, "State").stringValue) == "failed" }
        #expect(ended)
        let reply = try await a.call(client, BatonInterface.pairing, "ResetIdentity")
        let after = await a.service.deviceID
        #expect(after != before && reply.first?.stringValue == after.description)
        // A restart keeps the new identity and its secret: the advert counters were written for it,
        // so nothing looks restored or cloned (no re-key).
        let secret = await a.service.keeper.ownSecret
        await a.pairing.stop()
        await a.service.stop()
        a.connection.close()
        let again = try await RingNode.start(bus, name: "alpha", stateDirectory: a.stateDirectory)
        let restartedID = await again.service.deviceID, restartedSecret = await again.service.keeper.ownSecret
        #expect(restartedID == after)
        #expect(restartedSecret == secret)
        let needsRekey = await again.service.radio.needsRekey
        #expect(!needsRekey)
        await again.pairing.stop()
        await again.service.stop()
    }

    /// The prompt: without a terminal nothing is asked or reset; in a terminal "n" changes nothing
    /// (exit 2) and "y" resets, --json printing the new and the previous id.
    @Test func theCommandAsksInATerminalAndPrintsBothIds() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha")
        let tool = productPath("bt-pair")
        let before = await a.service.deviceID
        let (status, out, err) = try await runTool(tool, ["--bus", bus.address, "--bus-name", a.busName, "reset-identity"])
        #expect(status == 1 && out.isEmpty, "\(err)")
        #expect(err.contains("run it in a terminal"), "\(err)")
        let untouched = await a.service.deviceID
        #expect(untouched == before)

        // script(1) gives bt-pair a terminal on stdin; what it prints comes back through script's stdout.
        func inTerminal(_ answer: String, json: Bool) async throws -> (Int32, String) {
            let command = ([tool, "--bus", bus.address, "--bus-name", a.busName] + (json ? ["--json"] : []) + ["reset-identity"])
                .map { "'\($0)'" }.joined(separator: " ")
            let run = try RunningTool("/usr/bin/script", ["-qec", command, "/dev/null"], stdin: answer)
            let status = await run.status(killedAfter: .seconds(60))
            var lines: [String] = []
            while let line = await run.nextLine() { lines.append(line) }
            return (status, lines.joined(separator: "\n"))
        }
        let (noStatus, noText) = try await inTerminal("n\n", json: false)
        #expect(noStatus == 2, "\(noText)")
        #expect(noText.contains("bt-pair remove \(before.shortForm)") && noText.contains("[y/N]"), "\(noText)")
        #expect(noText.contains("nothing changed"), "\(noText)")
        let stillBefore = await a.service.deviceID
        #expect(stillBefore == before)

        let (yesStatus, yesText) = try await inTerminal("y\n", json: true)
        #expect(yesStatus == 0, "\(yesText)")
        let after = await a.service.deviceID
        #expect(after != before)
        // The terminal carries the prompt and the echoed answer too: the document is the last {...}.
        let start = try #require(yesText.range(of: "{\"Result\"", options: .backwards)), end = try #require(yesText.range(of: "}", options: .backwards))
        let jsonText = String(yesText[start.lowerBound..<end.upperBound])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(jsonText.utf8)) as? [String: Any], "\(yesText)")
        #expect(Set(document.keys) == ["Result", "DeviceId", "PreviousDeviceId"])
        #expect(document["Result"] as? String == "identity-reset")
        #expect(document["DeviceId"] as? String == after.description)
        #expect(document["PreviousDeviceId"] as? String == before.description)
        await a.pairing.stop()
        await a.service.stop()
    }

    /// What the radio heard of the old ring's members goes with them: the last sighting, where the
    /// advert came from (dialled over L2CAP), the member row of the diagnostic dump.
    @Test func theRadioForgetsTheOldRingsMembers() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await HandoffNode.start(bus, name: "alpha"), b = try await HandoffNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a.node, b.node, client: client)
        let idA = await a.node.deviceID
        b.radio.hear(try #require(a.radio.lastAdvert), from: BluetoothAddress(testing: "4B:22:33:44:55:66"))
        let heard = await eventually(timeout: .seconds(15)) { await b.node.ring.radio.heardEndpoint(of: idA) != nil }
        #expect(heard)
        let sightingBefore = await b.node.ring.radio.lastSighting(of: idA)
        #expect(sightingBefore != nil)
        let dumpBefore = try await b.node.ring.radio.dumpRadio(format: "json")
        #expect(dumpBefore.contains(idA.shortForm))

        _ = try await b.node.ringNode.call(client, BatonInterface.pairing, "ResetIdentity")
        let forgotten = await eventually(timeout: .seconds(10)) {
            let endpoint = await b.node.ring.radio.heardEndpoint(of: idA), sighting = await b.node.ring.radio.lastSighting(of: idA)
            return endpoint == nil && sighting == nil
        }
        #expect(forgotten)
        let dumpAfter = try await b.node.ring.radio.dumpRadio(format: "json")
        #expect(!dumpAfter.contains(idA.shortForm), "\(dumpAfter)")
        let summaries = await b.node.ring.memberSummaries()
        #expect(summaries.count == 1 && summaries.first?.isSelf == true && summaries.first?.peer == nil)
        await a.node.stop()
        await b.node.stop()
    }

    /// The new ring record is written before anything takes the new identity: a record that cannot
    /// be written (here the file on disk was damaged, which a save reports rather than overwrites)
    /// refuses the reset, and the machine keeps its identity and ring.
    @Test func aRecordThatCannotBeWrittenChangesNothing() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha")
        let client = try DBusConnection(bus: .address(bus.address))
        let before = await a.service.deviceID
        let ringFile = a.stateDirectory + "/ring"
        let damaged = Data("not a ring record".utf8)
        try damaged.write(to: URL(fileURLWithPath: ringFile))
        do {
            _ = try await a.call(client, BatonInterface.pairing, "ResetIdentity")
            Issue.record("the reset went ahead without its record")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.Failed", "\(error)")
            #expect(error.message.contains("nothing changed"), "\(error)")
        }
        let after = await a.service.deviceID
        #expect(after == before)
        let property = try await client.call(destination: a.busName, path: BatonObjectPath.ring, interface: "org.freedesktop.DBus.Properties",
                                             method: "Get", arguments: [.string(BatonInterface.ring), .string("DeviceId")])
        #expect(property.first?.unwrapped.stringValue == before.description)
        #expect(try Data(contentsOf: URL(fileURLWithPath: ringFile)) == damaged)
        await a.pairing.stop()
        await a.service.stop()
    }

    /// A RingSync of the old ring that reaches the ring after the reset (on a channel the transfer
    /// accepted before it) is refused: it must not merge the old members back in.
    @Test func aRingSyncOfTheOldRingIsRefusedAfterTheReset() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        let p = try await startPairing(a, b, client: client)
        try await confirmAndCommit(a, b, p, client: client)
        let idB = await b.service.deviceID
        let joined = await eventually(timeout: .seconds(10)) { await a.service.isMember(idB) }
        #expect(joined)
        let rosterOfB = await b.service.snapshot().roster
        _ = try await a.call(client, BatonInterface.pairing, "ResetIdentity")
        let newID = await a.service.deviceID
        await #expect(throws: WireError.notRingMember) { _ = try await a.service.receivedRoster(rosterOfB, from: idB) }
        let members = await a.service.snapshot().roster.members.keys
        #expect(Array(members) == [newID])
        for node in [a, b] {
            await node.pairing.stop()
            await node.service.stop()
        }
    }
}
