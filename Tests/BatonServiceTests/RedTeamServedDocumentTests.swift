// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonServiceFakes
import BatonTransport
import Foundation
import Testing
@testable import BatonService

/// Red team on protocol §6.5 "Source rules": a source also serves FetchDocument for the revision of
/// an ActivityPayload it sent that member, while that activity is current. Members beta and gamma
/// speak raw frames to alpha, the source, whose app saved (a new advert revision) after each fetch.
@Suite("BatonServiceTests: red team, the document of a served payload", .serialized)
struct RedTeamServedDocumentTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-served-\(UUID().uuidString)")
    static let type = "org.example.Drawing.editing"
    static let uid = getuid()

    enum Answer: Equatable {
        case bytes([UInt8])
        case refused(ErrorFrame.Code)
    }

    struct Ring {
        let a: BusLessNode, b: BusLessNode, c: BusLessNode
        let hash: TypeHash
        let first: [UInt8], second: [UInt8]
    }

    static func record(page: Int64) throws -> ActivityRecord {
        try ActivityRecord(activityType: type, title: "Plan", userInfo: ["page": .integer(page)], webpageURL: nil, version: 1)
    }

    /// alpha paired with beta and with gamma; alpha's activity (uid, serial 1) is on the air with a
    /// snapshot ("first").
    func ring() async throws -> Ring {
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let c = try await BusLessNode.start(in: directory, name: "gamma")
        for other in [b, c] {
            let (pathA, pathOther) = try await pairWithoutBus(a.pairing, other.pairing)
            for (pairing, path) in [(a.pairing, pathA), (other.pairing, pathOther)] {
                #expect(await eventually(timeout: .seconds(120)) { await pairing.session(path)?.phase.stateName == "paired" })
            }
        }
        let first = Array("the first snapshot".utf8), second = Array("the snapshot attached later".utf8)
        try setDocument(a, first, name: "first")
        a.activities.setCurrent(ActivityID(uid: Self.uid, serial: 1), try Self.record(page: 1))
        try await a.ring.radio.publish(try Self.record(page: 1), uid: Self.uid)
        let hash = DerivedKeys(secret: await a.ring.keeper.ownSecret).typeHash(Self.type)
        return Ring(a: a, b: b, c: c, hash: hash, first: first, second: second)
    }

    func setDocument(_ node: BusLessNode, _ bytes: [UInt8], name: String) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("snapshot-\(name)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        node.activities.setDocument(AttachedDocument(path: path, info: try DocumentInfo(totalSize: UInt64(bytes.count), digest: SHA256.hash(bytes),
                                                                                       mediaType: "text/plain", documentID: "plan-1")))
    }

    func stop(_ r: Ring) async {
        for node in [r.a, r.b, r.c] { await node.stop() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// A TLS channel from `member`'s identity to alpha's listener, Hello exchanged.
    static func channel(from member: BusLessNode, to a: BusLessNode) async throws -> SecureChannel {
        let keyOfA = await a.ring.keeper.identity.publicKey
        let connector = try TLSConnector(identity: await member.ring.keeper.identity, pins: { PinSet([keyOfA]) })
        let channel = try await connector.connect(host: "127.0.0.1", port: a.transfer.port, timeout: .seconds(120))
        let hello = HelloMessage(deviceID: await member.ring.deviceID, rosterDigest: await member.ring.rosterDigest, maxFramePayload: 1_048_576)
        try await channel.send(Frame(type: .hello, requestID: 0, payload: hello.payload))
        #expect(try await channel.receive(timeout: .seconds(120)).type == .hello)
        return channel
    }

    static func ask(_ channel: SecureChannel, _ frame: Frame) async throws -> Frame {
        try await channel.send(frame)
        let reply = try await channel.receive(timeout: .seconds(120))
        #expect(reply.requestID == frame.requestID)
        return reply
    }

    /// FetchActivity(any revision): the payload's revision.
    static func fetch(_ channel: SecureChannel, _ r: Ring, id: UInt32) async throws -> UInt32 {
        let reply = try await ask(channel, Frame(type: .fetchActivity, requestID: id,
                                                 payload: ActivityReference(typeHash: r.hash, revision: ActivityReference.anyRevision).payload))
        #expect(reply.type == .activityPayload)
        return try ActivityRecord(decoding: reply.payload).revision
    }

    /// What the source answers a FetchDocument(hash, revision, zero digest, 0): the bytes of the
    /// whole stream, or the error code.
    static func document(_ channel: SecureChannel, _ r: Ring, revision: UInt32, id: UInt32) async throws -> Answer {
        let asked = DocumentRequest(activity: ActivityReference(typeHash: r.hash, revision: revision), digest: DocumentRequest.anySnapshot, offset: 0)
        let reply = try await ask(channel, Frame(type: .fetchDocument, requestID: id, payload: asked.payload))
        if reply.type == .error { return .refused(try ErrorFrame(payload: reply.payload).code) }
        #expect(reply.type == .documentInfo)
        let info = try DocumentInfo(payload: reply.payload)
        var bytes: [UInt8] = []
        while UInt64(bytes.count) < info.totalSize {
            let chunk = try await channel.receive(timeout: .seconds(120))
            #expect(chunk.type == .documentChunk && chunk.requestID == id)
            bytes += try DocumentChunk(payload: chunk.payload).data
        }
        return .bytes(bytes)
    }

    /// The app's save moves the advert's revision (WillSave changed the activity): republished.
    static func save(_ r: Ring, page: Int64) async throws -> UInt32 {
        try await r.a.ring.radio.publish(try record(page: page), uid: uid)
        return try #require(await r.a.ring.radio.currentPublication()?.revision)
    }

    /// Attack: FetchDocument naming a revision the member was never served (the revision before the
    /// advert moved, fetched by nobody; one made up), and the revision of the payload served to
    /// another member (gamma's). Held: `unknownActivity` each time; the payload's own member gets
    /// the document under it (the rule under test), and the advert's revision serves anyone.
    @Test func aRevisionNeverServedToThatMemberGetsNoDocument() async throws {
        let r = try await ring()
        let beta = try await Self.channel(from: r.b, to: r.a), gamma = try await Self.channel(from: r.c, to: r.a)
        defer { beta.close(); gamma.close() }
        let old = try #require(await r.a.ring.radio.currentPublication()?.revision)
        let servedToGamma = try await Self.fetch(gamma, r, id: 1)
        #expect(servedToGamma == old)
        let now = try await Self.save(r, page: 2)
        #expect(now != old)
        #expect(try await Self.document(beta, r, revision: old, id: 2) == .refused(.unknownActivity), "gamma's payload, not beta's")
        #expect(try await Self.document(beta, r, revision: (now + 7) & AdvertBody.maxRevision, id: 3) == .refused(.unknownActivity))
        #expect(try await Self.document(gamma, r, revision: (old + 7) & AdvertBody.maxRevision, id: 4) == .refused(.unknownActivity))
        #expect(try await Self.document(gamma, r, revision: old, id: 5) == .bytes(r.first))
        #expect(try await Self.document(beta, r, revision: now, id: 6) == .bytes(r.first))
        await stop(r)
    }

    /// Attack: after the payload, the user's next activity of the same type becomes current (a new
    /// id), or the activity of another user of the source machine (the same type, the same serial)
    /// goes on the air; and a payload already followed by ActivityContinued. Held: the old
    /// payload's revision gets `unknownActivity` (the document now attached is another activity's).
    @Test func anotherActivityOrAReportedPayloadGetsNoDocument() async throws {
        let r = try await ring()
        let beta = try await Self.channel(from: r.b, to: r.a)
        defer { beta.close() }
        // The user's next activity (serial 2) of the same type.
        let first = try await Self.fetch(beta, r, id: 1)
        r.a.activities.setCurrent(ActivityID(uid: Self.uid, serial: 2), try Self.record(page: 5))
        _ = try await Self.save(r, page: 5)
        #expect(try await Self.document(beta, r, revision: first, id: 2) == .refused(.unknownActivity))
        // Another user's activity (uid + 1, serial 1 as the first one's) of the same type.
        r.a.activities.setCurrent(ActivityID(uid: Self.uid, serial: 1), try Self.record(page: 1))
        _ = try await Self.save(r, page: 1)
        let second = try await Self.fetch(beta, r, id: 3)
        r.a.activities.setCurrent(ActivityID(uid: Self.uid + 1, serial: 1), try Self.record(page: 9))
        try await r.a.ring.radio.publish(try Self.record(page: 9), uid: Self.uid + 1)
        #expect(await r.a.ring.radio.currentPublication()?.uid == Self.uid + 1)
        #expect(try await Self.document(beta, r, revision: second, id: 4) == .refused(.unknownActivity))
        // Back to the first user's activity: its payload, once reported, names no document any more.
        r.a.activities.setCurrent(ActivityID(uid: Self.uid, serial: 1), try Self.record(page: 1))
        _ = try await Self.save(r, page: 1)
        let third = try await Self.fetch(beta, r, id: 5)
        _ = try await Self.save(r, page: 2)
        #expect(try await Self.document(beta, r, revision: third, id: 6) == .bytes(r.first))
        let report = try await Self.ask(beta, Frame(type: .activityContinued, requestID: 7,
                                                    payload: ActivityReference(typeHash: r.hash, revision: third).payload))
        #expect(report.type == .ack)
        #expect(try await Self.document(beta, r, revision: third, id: 8) == .refused(.unknownActivity))
        await stop(r)
    }

    /// Attack: after the payload, the app edits the document (no snapshot to serve), then commits
    /// a new snapshot of the same activity. Found: the old payload's revision was then served the
    /// new snapshot, one the payload never went with (a media player's next track under the last
    /// one's position). Fixed: a payload's revision names the snapshot attached when it was sent;
    /// another one is `unknownActivity` (delivered without a document, as a changed snapshot is).
    @Test func aPayloadNamesTheSnapshotItWentWithOnly() async throws {
        let r = try await ring()
        let beta = try await Self.channel(from: r.b, to: r.a)
        defer { beta.close() }
        let served = try await Self.fetch(beta, r, id: 1)
        _ = try await Self.save(r, page: 2)
        // Edited since its snapshot: nothing to serve.
        r.a.activities.setDocument(nil)
        #expect(try await Self.document(beta, r, revision: served, id: 2) == .refused(.unknownActivity))
        // A new snapshot of the same activity, republished.
        try setDocument(r.a, r.second, name: "second")
        let now = try await Self.save(r, page: 3)
        #expect(try await Self.document(beta, r, revision: served, id: 3) == .refused(.unknownActivity))
        // The advert's revision serves the new one; a payload fetched now serves it under its revision.
        #expect(try await Self.document(beta, r, revision: now, id: 4) == .bytes(r.second))
        let fresh = try await Self.fetch(beta, r, id: 5)
        _ = try await Self.save(r, page: 4)
        #expect(try await Self.document(beta, r, revision: fresh, id: 6) == .bytes(r.second))
        await stop(r)
    }

    /// Attack: gamma fetches again and again (each fetch is a payload the source remembers) to push
    /// beta's payload out of the source's memory, so that beta's document is refused and its
    /// activity delivered without it. Found: the 64 remembered payloads were shared, oldest out
    /// first, whoever fetched. Fixed: past 64 the source forgets the oldest of the member that
    /// holds the most: gamma forgets its own.
    @Test func anotherMemberCannotPushAPayloadOutOfTheSourcesMemory() async throws {
        let r = try await ring()
        let beta = try await Self.channel(from: r.b, to: r.a), gamma = try await Self.channel(from: r.c, to: r.a)
        defer { beta.close(); gamma.close() }
        let served = try await Self.fetch(beta, r, id: 1)
        for id in UInt32(2)...UInt32(2 + TransferService.servedLimit) { _ = try await Self.fetch(gamma, r, id: id) }
        _ = try await Self.save(r, page: 2)
        #expect(try await Self.document(beta, r, revision: served, id: 1_000) == .bytes(r.first))
        let report = try await Self.ask(beta, Frame(type: .activityContinued, requestID: 1_001,
                                                    payload: ActivityReference(typeHash: r.hash, revision: served).payload))
        #expect(report.type == .ack, "beta's report is still accepted")
        await stop(r)
    }

    /// Attack: beta holds a served payload, then is removed from alpha's ring. Held: the source
    /// forgets what it served beta (the entry is gone) and beta's FetchDocument is refused.
    @Test func aRemovedMemberLosesItsServedPayloads() async throws {
        let r = try await ring()
        let beta = try await Self.channel(from: r.b, to: r.a)
        defer { beta.close() }
        let served = try await Self.fetch(beta, r, id: 1)
        _ = try await Self.save(r, page: 2)
        let idB = await r.b.ring.deviceID
        let reference = ActivityReference(typeHash: r.hash, revision: served)
        #expect(await r.a.transfer.servedPayload(reference, to: idB, activity: ActivityID(uid: Self.uid, serial: 1), snapshot: SHA256.hash(r.first)))
        try await r.a.ring.remove("beta")
        #expect(await eventually(timeout: .seconds(120)) {
            await !r.a.transfer.servedPayload(reference, to: idB, activity: ActivityID(uid: Self.uid, serial: 1), snapshot: SHA256.hash(r.first))
        })
        let answer = try? await Self.document(beta, r, revision: served, id: 2)
        #expect(answer != .bytes(r.first), "the document went to a removed member")
        await stop(r)
    }

    /// Attack: beta holds a served payload, then alpha takes a new identity (every member leaves its
    /// ring). Held: everything served is forgotten, and beta's FetchDocument gets nothing.
    @Test func aNewIdentityForgetsEveryServedPayload() async throws {
        let r = try await ring()
        let beta = try await Self.channel(from: r.b, to: r.a), gamma = try await Self.channel(from: r.c, to: r.a)
        defer { beta.close(); gamma.close() }
        let served = try await Self.fetch(beta, r, id: 1), toGamma = try await Self.fetch(gamma, r, id: 1)
        _ = try await Self.save(r, page: 2)
        let idB = await r.b.ring.deviceID, idC = await r.c.ring.deviceID
        let activity = ActivityID(uid: Self.uid, serial: 1), digest = SHA256.hash(r.first)
        _ = try await r.a.ring.resetIdentity()
        #expect(await eventually(timeout: .seconds(120)) {
            let b = await r.a.transfer.servedPayload(ActivityReference(typeHash: r.hash, revision: served), to: idB, activity: activity, snapshot: digest)
            let c = await r.a.transfer.servedPayload(ActivityReference(typeHash: r.hash, revision: toGamma), to: idC, activity: activity, snapshot: digest)
            return !b && !c
        })
        let answer = try? await Self.document(beta, r, revision: served, id: 2)
        #expect(answer != .bytes(r.first), "the document went to a device of the old ring")
        await stop(r)
    }
}
