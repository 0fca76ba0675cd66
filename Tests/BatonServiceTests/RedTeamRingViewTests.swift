// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonServiceFakes
import BatonStore
import BatonTestBus
import BatonTransport
import Foundation
import Testing
@testable import BatonService

// Issue 25, "attack the restructured daemon from the docs alone", the ring side: RingService
// publishes each saved change to its RingView at once, and tells its observers (the transfer's
// pins, channels and served answers) only after the radio took the change (a re-key's new advert
// can take BlueZ a while). A removed member (protocol §6.2: "may still connect, send Hello and
// RingSync, and nothing else") tries to be served in that window. Each test fails if it is.

@Suite("BatonServiceTests: a removed member in the window between its removal and the transfer hearing of it", .serialized)
struct RedTeamRingViewTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ringviewattack-\(UUID().uuidString)")
    static let type = "org.example.Reader.reading"

    /// A node as BusLessNode, with `radio` (a HeldRadio for the source).
    struct Node {
        let ring: RingService
        let pairing: PairingService
        let transfer: TransferService
        let activities: FakeActivities

        static func start(in directory: URL, name: String, radio: any RadioPort) async throws -> Node {
            let ring = try RingService(store: RingStore(directory: StateDirectory(path: directory.appendingPathComponent(name).path)),
                                       radio: radio, clock: SystemWallClock(),
                                       configuration: .init(deviceName: name, listenHost: "127.0.0.1"), log: { _ in })
            await ring.start()
            let pairing = PairingService(ring: ring, discovery: nil, clock: SystemWallClock(), log: { _ in })
            let activities = FakeActivities()
            let transfer = try await TransferService.start(ring: ring, activities: activities,
                                                           configuration: BusLessNode.transferConfiguration, log: { _ in })
            return Node(ring: ring, pairing: pairing, transfer: transfer, activities: activities)
        }

        func stop() async {
            await transfer.stop()
            await pairing.stop()
            await ring.stop()
        }
    }

    /// Alpha (held radio, an activity on the air) paired with beta; beta's channel to alpha after
    /// its Hello; the reference of alpha's activity as beta computes it.
    func scene() async throws -> (a: Node, b: Node, held: HeldRadio, channel: SecureChannel, reference: ActivityReference) {
        let held = HeldRadio()
        let a = try await Node.start(in: directory, name: "alpha", radio: held)
        let b = try await Node.start(in: directory, name: "beta", radio: FakeRadio())
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await eventually(timeout: .seconds(60)) { await a.pairing.session(pathA)?.phase.stateName == "paired" })
        #expect(await eventually(timeout: .seconds(60)) { await b.pairing.session(pathB)?.phase.stateName == "paired" })
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        #expect(await eventually(timeout: .seconds(30)) { await b.ring.isMember(idA) && a.ring.view.isMember(idB, asIdentity: idA) })
        let record = try ActivityRecord(activityType: Self.type, title: "alpha's secret chapter", userInfo: ["page": .integer(3)],
                                        webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), record)
        _ = try await a.ring.radio.publish(record, uid: getuid())
        let publication = try #require(await a.ring.radio.currentPublication())
        let channel = try await b.transfer.connector.connect(host: "127.0.0.1", port: a.transfer.port, timeout: .seconds(30))
        let hello = HelloMessage(deviceID: idB, rosterDigest: a.ring.view.current.rosterDigest, maxFramePayload: 1_048_576)
        try await channel.send(Frame(type: .hello, requestID: 1, payload: hello.payload))
        #expect(try await channel.receive(timeout: .seconds(30)).type == .hello)
        return (a, b, held, channel, ActivityReference(typeHash: publication.typeHash, revision: publication.revision))
    }

    /// Beta's FetchActivity reaches alpha's app (a slow WillSave); meanwhile alpha removes beta: the
    /// removal is saved (the view no longer lists beta) and its re-key waits on the radio. The app
    /// then answers: beta must get no ActivityPayload (its removal was saved before the answer), and
    /// no ActivityContinued of it is taken.
    @Test func aFetchInFlightWhenTheRemovalIsSavedIsNotAnswered() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, held, channel, reference) = try await scene()
        defer { channel.close() }
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        a.activities.setTransferDelay(.seconds(8))
        try await channel.send(Frame(type: .fetchActivity, requestID: 2, payload: reference.payload))
        #expect(await eventually(timeout: .seconds(30)) { a.activities.transferRequests == 1 })

        held.arm()
        let removal = Task { try await a.ring.remove(idB.description) }
        #expect(await eventually(timeout: .seconds(30)) { held.isHolding })
        #expect(!a.ring.view.isMember(idB, asIdentity: idA), "the removal is saved and in the view")

        // The app answers now (the delay ends); the radio still holds the removal's re-key.
        var reply: Frame?
        do { reply = try await channel.receive(timeout: .seconds(60)) } catch {}
        #expect(reply?.type != .activityPayload, "alpha answered its removed member's fetch after saving the removal")
        if let reply, reply.type == .activityPayload, let record = try? ActivityRecord(decoding: reply.payload) {
            Issue.record("beta received \"\(record.title)\"")
        }
        // Nor may beta report the fetch as continued.
        do {
            try await channel.send(Frame(type: .activityContinued, requestID: 3, payload: reference.payload))
            let answer = try await channel.receive(timeout: .seconds(10))
            #expect(answer.type != .ack, "alpha took its removed member's ActivityContinued")
        } catch {}
        held.release()
        try await removal.value
        #expect(a.activities.continuedDevices.isEmpty)
        await a.stop()
        await b.stop()
    }

    /// The same window for a request sent after the removal was saved: alpha's transfer has not
    /// heard of it yet (the re-key waits on the radio), but beta gets nothing but an error for a
    /// FetchActivity, an ActivityContinued, a FetchDocument or a ClaimEditSession (before the fix
    /// the claim released alpha's edit session to it); Hello is still answered (§6.2).
    @Test func aRequestSentAfterTheRemovalWasSavedIsRefused() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, held, channel, reference) = try await scene()
        defer { channel.close() }
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        // Alpha owns the edit session of a document its current activity carries (§6.6).
        let sessions = try EditSessions(directory: StateDirectory(path: directory.appendingPathComponent("alpha-sessions").path))
        try await sessions.commitLocal("plan-7", digest: SHA256.hash(Array("first".utf8)), uid: getuid())
        a.activities.setEditSessions(sessions, savedDigest: SHA256.hash(Array("saved".utf8)))
        held.arm()
        let removal = Task { try await a.ring.remove(idB.description) }
        #expect(await eventually(timeout: .seconds(30)) { held.isHolding })
        #expect(!a.ring.view.isMember(idB, asIdentity: idA))

        var answers: [FrameType] = []
        let claim = try EditSessionClaim(documentID: "plan-7", baseRevision: 1).payload
        for (id, type) in [(UInt32(10), FrameType.fetchActivity), (11, .activityContinued), (12, .fetchDocument), (13, .claimEditSession)] {
            let payload = type == .fetchDocument ? DocumentRequest(activity: reference, digest: DocumentRequest.anySnapshot, offset: 0).payload
                : type == .claimEditSession ? claim : reference.payload
            do {
                try await channel.send(Frame(type: type, requestID: id, payload: payload))
                answers.append(try await channel.receive(timeout: .seconds(30)).type)
            } catch { break }
        }
        #expect(answers.allSatisfy { $0 == .error }, "alpha answered its removed member: \(answers)")
        #expect(a.activities.transferRequests == 0, "the removed member's fetch reached alpha's app")
        #expect(await sessions.owner(of: "plan-7", uid: getuid()) == .thisMachine, "the edit session was released to the removed member")
        #expect(a.activities.saves == 0)
        held.release()
        try await removal.value
        await a.stop()
        await b.stop()
    }
    /// A removal that cannot be saved (a ring file that is not a ring record: every save fails) is
    /// refused whole: the view still lists beta, exactly the ring as saved, and beta is served as
    /// the member it still is; a RingSync from beta that would remove alpha, refused for the same
    /// reason, shows nowhere either.
    @Test func aRefusedRemovalNeverShowsInTheViewNorOnTheWire() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, _, channel, reference) = try await scene()
        defer { channel.close() }
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        let before = a.ring.view.current
        try Data("not a ring record".utf8).write(to: directory.appendingPathComponent("alpha").appendingPathComponent("ring"))
        await #expect(throws: (any Error).self) { try await a.ring.remove(idB.description) }
        #expect(a.ring.view.isMember(idB, asIdentity: idA))
        #expect(a.ring.view.current.roster == before.roster && a.ring.view.current.ownSecret == before.ownSecret)
        #expect(await a.ring.snapshot().roster == a.ring.view.current.roster)

        // Beta's own roster removing alpha, as its RingSync would carry it: refused, nothing kept.
        try await b.ring.remove(idA.description)
        let removing = await b.ring.snapshot().roster
        await #expect(throws: WireError.malformed(RingService.unsavedRing)) { _ = try await a.ring.receivedRoster(removing, from: idB) }
        #expect(a.ring.view.current.roster == before.roster && a.ring.view.current.deviceID == idA)

        // Still a member: served.
        try await channel.send(Frame(type: .fetchActivity, requestID: 2, payload: reference.payload))
        #expect(try await channel.receive(timeout: .seconds(30)).type == .activityPayload)
        await a.stop()
        await b.stop()
    }

    /// batond dies after saving a removal and before the radio and the transfer heard of it (the
    /// re-key held on the radio): the restarted ring is the saved one, beta out of it, and beta's
    /// fetch from the restarted transfer is refused.
    @Test func aRemovalSavedBeforeACrashIsWhatTheRestartedDaemonKeeps() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, held, channel, reference) = try await scene()
        channel.close()
        let idB = await b.ring.deviceID
        held.arm()
        let removal = Task { try await a.ring.remove(idB.description) }
        #expect(await eventually(timeout: .seconds(30)) { held.isHolding })
        let saved = a.ring.view.current

        // The "crash": a new daemon on the same state directory while the old one is stuck.
        let again = try await Node.start(in: directory, name: "alpha", radio: FakeRadio())
        let idA = await again.ring.deviceID
        #expect(idA == saved.deviceID)
        #expect(!again.ring.view.isMember(idB, asIdentity: idA))
        #expect(again.ring.view.current.roster == saved.roster)
        #expect(again.ring.view.current.ownSecret.generation == saved.ownSecret.generation)
        let record = try ActivityRecord(activityType: Self.type, title: "after the restart", userInfo: [:], webpageURL: nil, version: 1)
        again.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), record)
        _ = try await again.ring.radio.publish(record, uid: getuid())
        let fresh = try #require(await again.ring.radio.currentPublication())
        var answers: [FrameType] = []
        if let channel = try? await b.transfer.connector.connect(host: "127.0.0.1", port: again.transfer.port, timeout: .seconds(30)) {
            defer { channel.close() }
            for (id, wanted) in [(UInt32(1), reference), (2, ActivityReference(typeHash: fresh.typeHash, revision: fresh.revision))] {
                do {
                    try await channel.send(Frame(type: .fetchActivity, requestID: id, payload: wanted.payload))
                    answers.append(try await channel.receive(timeout: .seconds(30)).type)
                } catch { break }
            }
        }
        #expect(!answers.contains(.activityPayload), "the restarted daemon served its removed member: \(answers)")
        #expect(again.activities.transferRequests == 0)
        held.release()
        _ = await removal.result
        await again.stop()
        await a.stop()
        await b.stop()
    }
    /// Beta's ClaimEditSession reaches alpha's app (a slow save of the document); meanwhile alpha
    /// removes beta (saved, the re-key held on the radio). Once the app saved, the session is not
    /// released to beta: an error, alpha still owns it.
    @Test func aClaimInFlightWhenTheRemovalIsSavedReleasesNothing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, held, channel, _) = try await scene()
        defer { channel.close() }
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        let sessions = try EditSessions(directory: StateDirectory(path: directory.appendingPathComponent("alpha-sessions").path))
        try await sessions.commitLocal("plan-7", digest: SHA256.hash(Array("first".utf8)), uid: getuid())
        a.activities.setEditSessions(sessions, savedDigest: SHA256.hash(Array("saved".utf8)))
        a.activities.setSaveDelay(.seconds(8))
        let claim = try EditSessionClaim(documentID: "plan-7", baseRevision: 1).payload
        try await channel.send(Frame(type: .claimEditSession, requestID: 2, payload: claim))
        #expect(await eventually(timeout: .seconds(30)) { a.activities.saves == 1 })

        held.arm()
        let removal = Task { try await a.ring.remove(idB.description) }
        #expect(await eventually(timeout: .seconds(30)) { held.isHolding })
        #expect(!a.ring.view.isMember(idB, asIdentity: idA))
        var reply: Frame?
        do { reply = try await channel.receive(timeout: .seconds(60)) } catch {}
        #expect(reply?.type != .editSessionGrant, "alpha released the edit session to its removed member")
        #expect(await sessions.owner(of: "plan-7", uid: getuid()) == .thisMachine)
        held.release()
        try await removal.value
        await a.stop()
        await b.stop()
    }
}
