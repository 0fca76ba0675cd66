// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonServiceFakes
import BatonStore
import BatonTestBus
import BatonTransport
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// A radio whose next `advertise`, once armed, waits until the test releases it: the ring's
/// changes suspend on the radio there, and the test takes a new identity meanwhile.
final class HeldRadio: RadioPort {
    private let armed = Mutex(false)
    private let held = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let adverts = Mutex<[[UInt8]]>([])
    private let stream: AsyncStream<RadioEvent>
    private let continuation: AsyncStream<RadioEvent>.Continuation

    init() { (stream, continuation) = AsyncStream.makeStream() }

    func events() -> AsyncStream<RadioEvent> { stream }
    func advertise(companyID: UInt16, data: [UInt8], connectable: Bool) async throws(RadioError) {
        if armed.withLock({ armed in defer { armed = false }; return armed }) {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in held.withLock { $0 = waiter } }
        }
        adverts.withLock { $0.append(data) }
    }
    func stopAdvertising() async {}
    func startScanning() async throws(RadioError) { continuation.yield(.stateChanged(.ready)) }
    func stopScanning() async {}
    func adapterAddress() async -> RadioAdapterAddress? { nil }

    /// The next advert waits for `release`.
    func arm() { armed.withLock { $0 = true } }
    var isHolding: Bool { held.withLock { $0 != nil } }
    func release() { held.withLock { $0?.resume(); $0 = nil } }
}

/// Issue 23, `bt-pair reset-identity` seen by an attacker who read the docs (protocol §7.5,
/// security.md "A new identity", dbus-api.md Pairing1.ResetIdentity): what the reset promises to
/// forget stays forgotten, whatever was in flight when it ran and whatever is restored after it.
@Suite("BatonServiceTests: attacks on a new identity (Pairing1.ResetIdentity)", .serialized)
struct ResetIdentityAttackTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("resetattack-\(UUID().uuidString)")

    func ringNode(_ name: String, radio: any RadioPort) async throws -> (ring: RingService, pairing: PairingService) {
        let ring = try RingService(store: RingStore(directory: StateDirectory(path: directory.appendingPathComponent(name).path)),
                                   radio: radio, clock: SystemWallClock(),
                                   configuration: .init(deviceName: name, listenHost: "127.0.0.1"), log: { _ in })
        await ring.start()
        return (ring, PairingService(ring: ring, discovery: nil, clock: SystemWallClock(), log: { _ in }))
    }

    /// A removal (or a merged RingSync) re-keys: its changes reach the radio one call at a time,
    /// and the ring actor is free while the radio works. A reset taken in between must not be undone
    /// by the rest of those changes: the radio would match the old ring's adverts again (a ring of
    /// one that listens for members it forgot, §7.5 "forgets ... what it knew of the members").
    @Test func aRingChangeInFlightDoesNotHandTheOldMembersBackToTheRadio() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let held = HeldRadio()
        let a = try await ringNode("alpha", radio: held), b = try await ringNode("beta", radio: FakeRadio()),
            c = try await ringNode("gamma", radio: FakeRadio())
        let idB = await b.ring.deviceID, idC = await c.ring.deviceID
        _ = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await eventually(timeout: .seconds(30)) { await a.ring.isMember(idB) })
        _ = try await pairWithoutBus(a.pairing, c.pairing)
        #expect(await eventually(timeout: .seconds(30)) { await a.ring.isMember(idC) })
        #expect(Set(await a.ring.radio.matcher.memberIDs) == [idB, idC])

        // The owner removes gamma; its re-key stops on the radio (the advert under the new secret).
        held.arm()
        let removal = Task { try await a.ring.remove(idC.description) }
        let holding = await eventually(timeout: .seconds(30)) { held.isHolding }
        #expect(holding)
        // Meanwhile the owner takes a new identity: a ring of one, nobody matched.
        let reset = try await a.pairing.resetIdentity()
        #expect(await a.ring.radio.matcher.memberIDs.isEmpty)
        held.release()
        try await removal.value

        // The removal's remaining changes (beta's secret for the matcher, RingSync to beta) belong
        // to the ring left: the radio still matches nobody and seals with the new identity's secret.
        #expect(await a.ring.radio.matcher.memberIDs.isEmpty)
        let radioSecret = await a.ring.radio.ownSecret, ringSecret = await a.ring.keeper.ownSecret
        #expect(radioSecret == ringSecret)
        let stored = try #require(try RingStore(directory: StateDirectory(path: directory.appendingPathComponent("alpha").path)).loadRing())
        #expect(try RingKeeper(state: stored).deviceID == reset.deviceID)
        #expect(Array(stored.roster.members.keys) == [reset.deviceID])
        for node in [a, b, c] {
            await node.pairing.stop()
            await node.ring.stop()
        }
    }

    /// A RingSync of the old ring whose merge is still reaching the radio when the reset runs (the
    /// member removed gamma, so alpha re-keys): the merge's remaining changes stay off the radio,
    /// and the reply to beta is no roster at all, never the new identity's (its key and secret).
    @Test func aRingSyncMergingDuringTheResetGetsNoReplyOfTheNewRing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let held = HeldRadio()
        let a = try await ringNode("alpha", radio: held), b = try await ringNode("beta", radio: FakeRadio()),
            c = try await ringNode("gamma", radio: FakeRadio())
        let idB = await b.ring.deviceID, idC = await c.ring.deviceID
        for (x, y) in [(a, b), (a, c), (b, c)] {
            let idY = await y.ring.deviceID
            _ = try await pairWithoutBus(x.pairing, y.pairing)
            #expect(await eventually(timeout: .seconds(30)) { await x.ring.isMember(idY) })
        }
        try await b.ring.remove(idC.description)
        let rosterOfB = await b.ring.snapshot().roster
        #expect(rosterOfB.removalMarks[idC] != nil)

        held.arm()
        let merge = Task { try await a.ring.receivedRoster(rosterOfB, from: idB) }
        #expect(await eventually(timeout: .seconds(30)) { held.isHolding })
        let reset = try await a.pairing.resetIdentity()
        held.release()
        let reply = await merge.result
        if case .success(let roster) = reply {
            #expect(!roster.members.keys.contains(reset.deviceID), "the old member got the new identity's entry")
        }
        #expect(await a.ring.radio.matcher.memberIDs.isEmpty)
        let members = await a.ring.snapshot().roster.members.keys
        #expect(Array(members) == [reset.deviceID])
        for node in [a, b, c] {
            await node.pairing.stop()
            await node.ring.stop()
        }
    }

    /// While a pairing waits for its user's final commit (reviewing), the join is not done: a
    /// reset then is NotReady (dbus-api.md: "a pairing session is open"), so the commit can never
    /// join the old ring's merge under the new identity.
    @Test func refusedWhileAPairingWaitsForItsCommit() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await ringNode("alpha", radio: FakeRadio()), b = try await ringNode("beta", radio: FakeRadio())
        let before = await a.ring.deviceID, idB = await b.ring.deviceID
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing, commit: false)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(30)) { await pairing.session(path)?.phase.stateName == "reviewing" })
        }
        await #expect(throws: ServiceFailure.self) { _ = try await a.pairing.resetIdentity() }
        do {
            _ = try await a.pairing.resetIdentity()
        } catch {
            guard case .notReady(let message) = error else { Issue.record("not NotReady: \(error)"); return }
            #expect(message.contains("a pairing session is open"))
        }
        #expect(await a.ring.deviceID == before)
        // The commit joins under the identity the pairing proved; the reset goes ahead after it.
        try await a.pairing.commit(pathA, uid: getuid(), accepted: true)
        try await b.pairing.commit(pathB, uid: getuid(), accepted: true)
        #expect(await eventually(timeout: .seconds(30)) { await a.pairing.session(pathA)?.phase.stateName == "paired" })
        #expect(await a.ring.isMember(idB))
        let reset = try await a.pairing.resetIdentity()
        #expect(reset.previous == before && reset.deviceID != before)
        #expect(await !a.ring.isMember(idB))
        for node in [a, b] {
            await node.pairing.stop()
            await node.ring.stop()
        }
    }

    /// §7.5 "channels of the old ring are closed": a member of the old ring that holds a channel
    /// opened before the reset gets nothing more on it (no Hello, no activity).
    @Test func aChannelOpenedBeforeTheResetServesNothingAfterIt() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b) = try await pairedAlphaAndBeta()
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        #expect(await eventually(timeout: .seconds(30)) { await b.ring.isMember(idA) })
        let channel = try await b.transfer.connector.connect(host: "127.0.0.1", port: a.transfer.port, timeout: .seconds(10))
        defer { channel.close() }
        let hello = HelloMessage(deviceID: idB, rosterDigest: 0, maxFramePayload: 1024)
        try await channel.send(Frame(type: .hello, requestID: 1, payload: hello.payload))
        #expect(try await channel.receive(timeout: .seconds(10)).type == .hello)
        #expect(await eventually(timeout: .seconds(10)) { await a.transfer.openChannelCount(from: idB) == 1 })

        _ = try await a.pairing.resetIdentity()
        #expect(await eventually(timeout: .seconds(10)) { await a.transfer.openChannelCount(from: idB) == 0 })
        // Whatever beta sends now on its old channel, nothing but an error or the end comes back.
        var answered: FrameType?
        do {
            try await channel.send(Frame(type: .hello, requestID: 2, payload: hello.payload))
            let reply = try await channel.receive(timeout: .seconds(10))
            answered = reply.type
        } catch {}
        #expect(answered == nil || answered == .error, "answered \(String(describing: answered))")
        await a.stop()
        await b.stop()
    }

    /// An old member that A dials (a RingSync owed to it, a fetch) holds its Hello answer until A's
    /// ring changed under the open channel; then it answers, forcing a RingSync. `change` is that
    /// change; returns every roster A sent on the held channel.
    func rostersSentOnAHeldChannel(change: (BusLessNode, DeviceID) async throws -> Void) async throws -> (sent: [Roster], a: BusLessNode) {
        let (a, b) = try await pairedAlphaAndBeta()
        let idB = await b.ring.deviceID, keyOfA = await a.ring.keeper.identity.publicKey
        // Beta's keys (the old member, or whoever holds a copy of them) answer at beta's endpoint.
        let fake = try TLSListener(identity: await b.ring.keeper.identity, pins: { PinSet([keyOfA]) }, host: "127.0.0.1", port: 0)
        defer { fake.close() }
        await b.stop()
        await a.ring.endpointWorked(idB, "127.0.0.1:\(fake.port)")
        #expect(await a.ring.endpoints(of: idB).first == "127.0.0.1:\(fake.port)")
        let sync = Task { try await a.transfer.syncRing(to: idB) }
        let channel = try await fake.accept()
        defer { channel.close() }
        let hello = try await channel.receive(timeout: .seconds(15))
        #expect(hello.type == .hello)
        try await change(a, idB)
        let answer = HelloMessage(deviceID: idB, rosterDigest: 0, maxFramePayload: 1_048_576)
        try? await channel.send(Frame(type: .hello, requestID: hello.requestID, payload: answer.payload))
        var sent: [Roster] = []
        while let frame = try? await channel.receive(timeout: .seconds(10)) {
            guard frame.type == .ringSync, let roster = try? Roster(decoding: frame.payload) else { continue }
            sent.append(roster)
            // Answer as beta would (an empty roster changes nothing), so A could go on.
            try? await channel.send(Frame(type: .ringSync, requestID: frame.requestID, payload: try Roster(version: 1).encoded()))
        }
        _ = await sync.result
        return (sent, a)
    }

    /// §7.5: the old ring's members learn nothing of the new identity. An old member (or a thief
    /// with its keys) that holds its Hello answer on a channel A opened before the reset must not
    /// receive A's new roster: it carries the new identity key and its advertising secret, which
    /// would let the old member read and track the new identity's adverts.
    @Test func aHeldHelloDoesNotGetTheNewIdentitysRoster() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var newID: DeviceID?
        let (sent, a) = try await rostersSentOnAHeldChannel { a, _ in newID = try await a.pairing.resetIdentity().deviceID }
        let id = try #require(newID)
        let newSecret = await a.ring.keeper.ownSecret
        #expect(!sent.contains { $0.members[id] != nil }, "the new identity's entry reached the old member")
        #expect(!sent.contains { $0.members.values.contains { $0.secret.generation == newSecret.generation && $0.deviceID == id } })
        #expect(sent.count == 0, "roster(s) sent after the reset")
        await a.stop()
    }

    /// §7.4: after a removal the removed member holds only old secrets. A member removed while it
    /// held its Hello answer on a channel opened before must not receive the re-keyed roster.
    @Test func aHeldHelloDoesNotGetTheRosterOfItsRemoval() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var idA: DeviceID?
        let (sent, a) = try await rostersSentOnAHeldChannel { a, idB in
            idA = await a.ring.deviceID
            try await a.ring.remove(idB.description)
        }
        let me = try #require(idA)
        let rekeyed = await a.ring.keeper.ownSecret
        #expect(!sent.contains { $0.members[me]?.secret == rekeyed }, "the re-keyed secret reached the removed member")
        #expect(sent.count == 0, "roster(s) sent after the removal")
        await a.stop()
    }

    func publish(_ node: BusLessNode, _ title: String, version: Int64) async throws {
        _ = try await node.ring.radio.publish(try ActivityRecord(activityType: "org.example.Reader.reading", title: title, userInfo: [:],
                                                                 webpageURL: nil, version: version), uid: getuid())
    }

    /// Alpha seals under its old identity, a copy of its state directory is taken, it seals more,
    /// takes a new identity, is paired again with beta (whose owner removed the old id first, as
    /// security.md says) and seals under the new one. Then `restore` puts (part of) the copy back
    /// and alpha starts again within the same boot. Returns the restarted node, every advert, every
    /// secret and the old id.
    /// alpha and beta, paired, both sides done (beta's commit may end after alpha's on a loaded machine).
    func pairedAlphaAndBeta() async throws -> (BusLessNode, BusLessNode) {
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await eventually(timeout: .seconds(60)) { await a.pairing.session(pathA)?.phase.stateName == "paired" })
        #expect(await eventually(timeout: .seconds(60)) { await b.pairing.session(pathB)?.phase.stateName == "paired" })
        return (a, b)
    }

    func restoredAfterAReset(restore: (URL, URL) throws -> Void) async throws
        -> (again: BusLessNode, beta: BusLessNode, adverts: [[UInt8]], secrets: [AdvertisingSecret], oldID: DeviceID, oldSecret: AdvertisingSecret) {
        let runtime = directory.appendingPathComponent("run").path
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let a = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        // Both sides paired (beta's commit may finish after alpha's on a loaded machine).
        #expect(await eventually(timeout: .seconds(60)) { await a.pairing.session(pathA)?.phase.stateName == "paired" })
        #expect(await eventually(timeout: .seconds(60)) { await b.pairing.session(pathB)?.phase.stateName == "paired" })
        try await publish(a, "one", version: 1)
        let alpha = directory.appendingPathComponent("alpha"), copy = directory.appendingPathComponent("alpha-copy")
        try FileManager.default.copyItem(at: alpha, to: copy)
        try await publish(a, "two", version: 2)
        try await publish(a, "three", version: 3)
        let oldID = await a.ring.deviceID, oldSecret = await a.ring.keeper.ownSecret

        _ = try await a.pairing.resetIdentity()
        try await b.ring.remove(oldID.description)
        let (pathAgain, pathBAgain) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await eventually(timeout: .seconds(60)) { await a.pairing.session(pathAgain)?.phase.stateName == "paired" })
        #expect(await eventually(timeout: .seconds(60)) { await b.pairing.session(pathBAgain)?.phase.stateName == "paired" })
        try await publish(a, "four", version: 4)
        try await publish(a, "five", version: 5)
        let newSecret = await a.ring.keeper.ownSecret
        let before = a.radio.allAdverts
        await a.stop()

        try restore(copy, alpha)
        let again = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        try await publish(again, "six", version: 6)
        try await publish(again, "seven", version: 7)
        let againSecret = await again.ring.keeper.ownSecret
        return (again, b, before + again.radio.allAdverts, [oldSecret, newSecret, againSecret], oldID, oldSecret)
    }

    static func reusedNonces(_ adverts: [[UInt8]], secrets: [AdvertisingSecret]) -> [RollbackNonceTests.Nonce] {
        var seen: [RollbackNonceTests.Nonce: Set<[UInt8]>] = [:]
        RollbackNonceTests.record(adverts, secrets: secrets, nowSeconds: Int64(Date().timeIntervalSince1970), into: &seen)
        return seen.filter { $0.value.count > 1 }.map(\.key)
    }

    /// A backup of the state directory from before the reset, restored whole (without a reboot):
    /// the old identity comes back (it is what the backup holds; security.md "A new identity"), and
    /// no (key, epoch, sequence) seals two bodies, under the old secret or the new one.
    @Test func aStateDirectoryFromBeforeTheResetNeverSealsANonceTwice() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let run = try await restoredAfterAReset { copy, alpha in
            try FileManager.default.removeItem(at: alpha)
            try FileManager.default.copyItem(at: copy, to: alpha)
        }
        #expect(await run.again.ring.deviceID == run.oldID)
        let reused = Self.reusedNonces(run.adverts, secrets: run.secrets)
        #expect(reused.isEmpty, "nonces sealed twice: \(reused.map { "epoch \($0.epoch) seq \($0.sequence)" })")
        await run.again.stop()
        await run.beta.stop()
    }

    /// Only the old `ring` record put back (the advert counters stay those of the new identity's
    /// later generation): the old identity comes back, but it replaces its own secret before it
    /// seals (security.md: a ring record restored alone beside counters of a later generation), so
    /// no nonce of the old secret repeats.
    @Test func theOldRingRecordRestoredAloneReplacesItsSecret() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let run = try await restoredAfterAReset { copy, alpha in
            let ring = alpha.appendingPathComponent("ring")
            try FileManager.default.removeItem(at: ring)
            try FileManager.default.copyItem(at: copy.appendingPathComponent("ring"), to: ring)
        }
        #expect(await run.again.ring.deviceID == run.oldID)
        #expect(await run.again.ring.keeper.ownSecret != run.oldSecret)
        let reused = Self.reusedNonces(run.adverts, secrets: run.secrets)
        #expect(reused.isEmpty, "nonces sealed twice: \(reused.map { "epoch \($0.epoch) seq \($0.sequence)" })")
        await run.again.stop()
        await run.beta.stop()
    }

    /// §7.5 "Nothing about the reset is sent: ... no advert", and §4.2: a ring of one sends no ring
    /// advert. The advert alpha carried for its old ring goes off the air with the reset, and
    /// nothing new is sealed (an old member that still holds alpha's old secret hears nothing more,
    /// and the new secret is heard by nobody).
    @Test func theResetTakesTheRingAdvertOffTheAirAndSealsNothing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b) = try await pairedAlphaAndBeta()
        try await publish(a, "one", version: 1)
        #expect(a.radio.onAir != nil)
        _ = try await a.pairing.resetIdentity()
        let sealed = a.radio.allAdverts.count
        #expect(a.radio.onAir == nil)
        try await publish(a, "two", version: 2)
        await a.ring.tick()
        #expect(a.radio.allAdverts.count == sealed)
        #expect(a.radio.onAir == nil)
        await a.stop()
        await b.stop()
    }

    /// A Continue from an old member that the member answers only after the reset (it held the
    /// fetch): §7.5 closes the old ring's channels, so the activity of the ring just left is not
    /// delivered here, and the old member is not told it was continued.
    @Test func aFetchAnsweredAfterTheResetDeliversNothing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let type = "org.example.Reader.reading"
        let a = try await BusLessNode.start(in: directory, name: "alpha", handled: [type])
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, _) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await eventually(timeout: .seconds(30)) { await a.pairing.session(pathA)?.phase.stateName == "paired" })
        let idB = await b.ring.deviceID, keyOfA = await a.ring.keeper.identity.publicKey
        let fake = try TLSListener(identity: await b.ring.keeper.identity, pins: { PinSet([keyOfA]) }, host: "127.0.0.1", port: 0)
        defer { fake.close() }
        await b.stop()
        await a.ring.endpointWorked(idB, "127.0.0.1:\(fake.port)")
        let continued = Task { try await a.continuation.continueActivity(from: idB.description, type: type, uid: getuid()) }
        let channel = try await fake.accept()
        defer { channel.close() }
        let hello = try await channel.receive(timeout: .seconds(15))
        let theirs = try HelloMessage(payload: hello.payload)
        // The same roster digest: no RingSync, the fetch comes next.
        let answer = HelloMessage(deviceID: idB, rosterDigest: theirs.rosterDigest, maxFramePayload: 1_048_576)
        try await channel.send(Frame(type: .hello, requestID: hello.requestID, payload: answer.payload))
        let fetch = try await channel.receive(timeout: .seconds(15))
        #expect(fetch.type == .fetchActivity || fetch.type == .fetchActivityOfVersions)

        _ = try await a.pairing.resetIdentity()
        let record = try ActivityRecord(activityType: type, title: "planted after the reset", userInfo: [:], webpageURL: nil, version: 1)
        try? await channel.send(Frame(type: .activityPayload, requestID: fetch.requestID, payload: try record.encoded()))
        var after: [FrameType] = []
        while let frame = try? await channel.receive(timeout: .seconds(5)) { after.append(frame.type) }
        _ = await continued.result
        #expect(a.activities.delivered.isEmpty, "delivered after the reset: \(a.activities.delivered.map(\.record.title))")
        #expect(!after.contains(.activityContinued), "told the old member: \(after)")
        await a.stop()
    }

    /// Another local account learns nothing of the identities from the state directory: after the
    /// reset every file there (ring record, peers, advert counters) is the daemon's alone (0600) and
    /// the old seed is in none of them.
    @Test func theStateDirectoryKeepsBothIdentitiesFromOtherAccounts() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b) = try await pairedAlphaAndBeta()
        try await publish(a, "one", version: 1)
        let oldSeed = await a.ring.keeper.state.identitySeed.hexString
        _ = try await a.pairing.resetIdentity()
        let path = directory.appendingPathComponent("alpha").path
        let names = try FileManager.default.contentsOfDirectory(atPath: path)
        #expect(names.contains("ring"))
        for name in names {
            let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + name)
            guard attributes[.type] as? FileAttributeType == .typeRegular else { continue }
            let mode = try #require(attributes[.posixPermissions] as? Int)
            #expect(mode & 0o077 == 0, "\(name) is \(String(mode, radix: 8))")
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path + "/" + name)), as: UTF8.self)
            #expect(!text.contains(oldSeed), "\(name) still holds the old identity's seed")
        }
        await a.stop()
        await b.stop()
    }

    /// The clock went back (or forward) before the reset: the new secret is of the generation after
    /// the previous one whatever the day, issued on the day the clock gives now (§7.5), and two
    /// resets never issue one generation twice under one identity (each is a fresh identity anyway).
    @Test func aClockStepDoesNotChooseTheGeneration() throws {
        var keeper = try RingKeeper.create(name: "alpha", today: 20_000, generation: 7, random: SystemRandom())
        let old = keeper.deviceID
        let actions = try keeper.resetIdentity(today: 19_000, random: SystemRandom())
        #expect(keeper.deviceID != old)
        #expect(keeper.ownSecret.generation == 8 && keeper.ownSecret.day == 19_000)
        #expect(keeper.today == 19_000)
        guard case .persist(let state) = actions.first else { Issue.record("persist is not first: \(actions)"); return }
        #expect(state == keeper.state)
        // At the end of the generations: starts again at 1 (no wrap), under another identity.
        var last = try RingKeeper.create(name: "omega", today: 5, generation: RosterMember.maxGeneration, random: SystemRandom())
        _ = try last.resetIdentity(today: 4, random: SystemRandom())
        #expect(last.ownSecret.generation == 1)
    }
}
