// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonTransport
import Foundation
import Glibc
import Testing
@testable import BatonService

/// Two bus-less nodes paired over loopback, with an activity current on `a`: what §6.2 and §9 ask of
/// the transfer's server and client.
struct PublishedPair {
    static let type = "org.example.Reader.reading"
    let a: BusLessNode
    let b: BusLessNode
    let idA: DeviceID
    let hash: TypeHash

    static func start(in directory: URL) async throws -> PublishedPair {
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        let uid = getuid()
        let record = try ActivityRecord(activityType: type, title: "Chapter 3", userInfo: ["page": .integer(3)], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: uid, serial: 1), record)
        try await a.ring.radio.publish(record, uid: uid)
        let hash = DerivedKeys(secret: await a.ring.keeper.ownSecret).typeHash(type)
        return PublishedPair(a: a, b: b, idA: await a.ring.deviceID, hash: hash)
    }

    /// A TLS channel from `b`'s identity to `a`'s listener, Hello exchanged with request id 0.
    func channelFromB() async throws -> SecureChannel {
        let keyOfA = await a.ring.keeper.identity.publicKey
        let connector = try TLSConnector(identity: await b.ring.keeper.identity, pins: { PinSet([keyOfA]) })
        let channel = try await connector.connect(host: "127.0.0.1", port: a.transfer.port, timeout: .seconds(3))
        let hello = HelloMessage(deviceID: await b.ring.deviceID, rosterDigest: await b.ring.rosterDigest, maxFramePayload: 1_048_576)
        try await channel.send(Frame(type: .hello, requestID: 0, payload: hello.payload))
        let reply = try await channel.receive(timeout: .seconds(120))
        #expect(reply.type == .hello && reply.requestID == 0)
        return channel
    }

    func stop() async {
        await a.stop()
        await b.stop()
    }
}

/// A TCP connection that never says a word (no TLS ClientHello).
func idleTCPConnection(port: UInt16) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let status = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard status == 0 else {
        close(descriptor)
        throw TransportError.socket(operation: "connect", errno: errno)
    }
    return descriptor
}

/// True when the peer closed `descriptor` (EOF or reset) within the wait.
func closedByPeer(_ descriptor: Int32, waitingMilliseconds: Int32 = 1000) -> Bool {
    var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
    guard poll(&poller, 1, waitingMilliseconds) == 1 else { return false }
    var byte: UInt8 = 0
    return recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
}

@Suite("BatonServiceTests: transfer rules of protocol §6.2 and §9", .serialized)
struct TransferRuleTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-rules-\(UUID().uuidString)")

    @Test func aServedFetchEntitlesOneActivityContinued() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let record = try await p.b.transfer.fetch(member: p.idA, typeHash: p.hash, revision: ActivityReference.anyRevision)
        let first = p.b.transfer.makeRequestID()
        try await p.b.transfer.sendContinued(member: p.idA, typeHash: p.hash, revision: record.revision, requestID: first)
        #expect(p.a.activities.continuedDevices == ["beta"])
        // The same request id again (a lost Ack): the stored reply, the app is not told twice.
        try await p.b.transfer.sendContinued(member: p.idA, typeHash: p.hash, revision: record.revision, requestID: first)
        // A new request id for the fetch already reported: refused, the app is not told again.
        await #expect(throws: TransferError.remote(ErrorFrame(code: .unknownActivity, message: "no such transfer"))) {
            try await p.b.transfer.sendContinued(member: p.idA, typeHash: p.hash, revision: record.revision)
        }
        #expect(p.a.activities.continuedDevices == ["beta"])
        // A second fetch entitles a second report.
        _ = try await p.b.transfer.fetch(member: p.idA, typeHash: p.hash, revision: record.revision)
        try await p.b.transfer.sendContinued(member: p.idA, typeHash: p.hash, revision: record.revision)
        #expect(p.a.activities.continuedDevices == ["beta", "beta"])
        await p.stop()
    }

    /// §9 step 4: the entitlement is per answered payload fetch, not per (h, r). A receiver that
    /// fetched one (h, r) twice (a prefetch then a fetch on accept, or a fetch repeated under a new
    /// request id) may report twice, each report is accepted and the source's app is told twice; a
    /// third report of that (h, r) is refused.
    @Test func twoFetchesOfOneRevisionEntitleTwoActivityContinued() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let first = try await p.b.transfer.fetch(member: p.idA, typeHash: p.hash, revision: ActivityReference.anyRevision)
        let second = try await p.b.transfer.fetch(member: p.idA, typeHash: p.hash, revision: first.revision)
        #expect(second.revision == first.revision)
        #expect(await p.a.transfer.activityPayloadsSent == 2)
        #expect(p.a.activities.continuedDevices.isEmpty)
        try await p.b.transfer.sendContinued(member: p.idA, typeHash: p.hash, revision: first.revision)
        #expect(p.a.activities.continuedDevices == ["beta"])
        try await p.b.transfer.sendContinued(member: p.idA, typeHash: p.hash, revision: first.revision)
        #expect(p.a.activities.continuedDevices == ["beta", "beta"])
        await #expect(throws: TransferError.remote(ErrorFrame(code: .unknownActivity, message: "no such transfer"))) {
            try await p.b.transfer.sendContinued(member: p.idA, typeHash: p.hash, revision: first.revision)
        }
        #expect(p.a.activities.continuedDevices == ["beta", "beta"])
        await p.stop()
    }

    @Test func activityContinuedForRevisionAllOnesIsUnknownActivity() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        // Even after a fetch asked with 0xFFFFFFFF: the report names the payload's revision, never that.
        _ = try await p.b.transfer.fetch(member: p.idA, typeHash: p.hash, revision: ActivityReference.anyRevision)
        await #expect(throws: TransferError.remote(ErrorFrame(code: .unknownActivity, message: "no such transfer"))) {
            try await p.b.transfer.sendContinued(member: p.idA, typeHash: p.hash, revision: ActivityReference.anyRevision)
        }
        #expect(p.a.activities.continuedDevices.isEmpty)
        await p.stop()
    }

    static let requestTypes: [FrameType] = [.fetchActivity, .activityContinued]
    static let revisionsOutOfRange: [UInt32] = [1 << 24, 0x1234_5678, 0xFFFF_FFFE]

    @Test(arguments: requestTypes, revisionsOutOfRange)
    func aRevisionOutOfRangeIsMalformedAndTheConnectionStaysOpen(type: FrameType, revision: UInt32) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let channel = try await p.channelFromB()
        defer { channel.close() }
        var payload = p.hash.bytes
        payload.appendBigEndian(revision)
        // The core refuses it as §10.7 says...
        #expect(throws: WireError.malformed("revision")) { _ = try ActivityReference(payload: payload) }
        // ...and the server answers Error(malformed) with the request's id.
        try await channel.send(Frame(type: type, requestID: 7, payload: payload))
        let refusal = try await channel.receive(timeout: .seconds(120))
        #expect(refusal.type == .error && refusal.requestID == 7)
        #expect(try ErrorFrame(payload: refusal.payload).code == .malformed)
        // The connection stays open: the next request on it is served.
        let fetch = Frame(type: .fetchActivity, requestID: 8,
                          payload: ActivityReference(typeHash: p.hash, revision: ActivityReference.anyRevision).payload)
        try await channel.send(fetch)
        let answer = try await channel.receive(timeout: .seconds(120))
        #expect(answer.type == .activityPayload && answer.requestID == 8)
        await p.stop()
    }

    @Test func theClientSaysHelloWithRequestIDZero() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        // A fake endpoint holding A's identity records the ids of the frames it receives.
        let keyOfB = await p.b.ring.keeper.identity.publicKey
        let fake = try TLSListener(identity: await p.a.ring.keeper.identity, pins: { PinSet([keyOfB]) }, host: "127.0.0.1", port: 0)
        defer { fake.close() }
        let versionOfA = await p.a.ring.rosterDigest, idA = p.idA
        let seen = Task {
            guard let channel = try? await fake.accept() else { return [Frame]() }
            defer { channel.close() }
            guard let hello = try? await channel.receive(timeout: .seconds(120)) else { return [] }
            let ours = HelloMessage(deviceID: idA, rosterDigest: versionOfA, maxFramePayload: 1_048_576)
            try? await channel.send(Frame(type: .hello, requestID: hello.requestID, payload: ours.payload))
            guard let request = try? await channel.receive(timeout: .seconds(120)) else { return [hello] }
            return [hello, request]
        }
        await p.b.ring.endpointWorked(p.idA, "127.0.0.1:\(fake.port)")
        _ = try? await p.b.transfer.fetch(member: p.idA, typeHash: p.hash, revision: ActivityReference.anyRevision)
        let frames = await seen.value
        #expect(frames.map(\.type) == [.hello, .fetchActivity])
        #expect(frames.first?.requestID == 0)
        #expect(frames.last?.requestID != 0)
        await p.stop()
    }

    @Test func idleStrangersHoldingEveryHandshakeSlotDoNotLockAMemberOut() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        // 40 connections that never start TLS: 32 fill the handshake budget, the rest are closed on arrival.
        let idle = try (0..<40).map { _ in try idleTCPConnection(port: p.a.transfer.port) }
        defer { idle.forEach { close($0) } }
        #expect(idle.suffix(8).allSatisfy { closedByPeer($0) })
        // Once they have waited a moment, a member's connection takes the oldest one's place...
        try await Task.sleep(for: TLSListener.evictionAge + .milliseconds(200))
        let record = try await p.b.transfer.fetch(member: p.idA, typeHash: p.hash, revision: ActivityReference.anyRevision)
        #expect(record.title == "Chapter 3")
        #expect(closedByPeer(idle[0]))
        // ...and strangers still hold at most 32 at once: the member's channel left the handshake
        // budget, so one newcomer takes its place and the next ones push the oldest out.
        let more = try (0..<4).map { _ in try idleTCPConnection(port: p.a.transfer.port) }
        defer { more.forEach { close($0) } }
        #expect(idle[1...3].allSatisfy { closedByPeer($0) })
        try await Task.sleep(for: .milliseconds(200))
        #expect((idle + more).filter { !closedByPeer($0, waitingMilliseconds: 0) }.count == 32)
        await p.stop()
    }

    @Test func membersHaveABudgetOfTheirOwn() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        var channels: [SecureChannel] = []
        defer { channels.forEach { $0.close() } }
        for _ in 0..<TransferService.maxMemberChannels { channels.append(try await p.channelFromB()) }
        // One more passes the handshake (the client finishes first in TLS 1.3) and is then closed.
        let keyOfA = await p.a.ring.keeper.identity.publicKey
        let connector = try TLSConnector(identity: await p.b.ring.keeper.identity, pins: { PinSet([keyOfA]) })
        let extra = try await connector.connect(host: "127.0.0.1", port: p.a.transfer.port, timeout: .seconds(3))
        defer { extra.close() }
        await #expect(throws: TransportError.self) { _ = try await extra.receive(timeout: .seconds(3)) }
        // Strangers still get their handshake slots meanwhile, and a member channel that ends frees its slot.
        let stranger = try idleTCPConnection(port: p.a.transfer.port)
        defer { close(stranger) }
        #expect(!closedByPeer(stranger, waitingMilliseconds: 300))
        channels.removeFirst().close()
        #expect(await eventually { (try? await p.channelFromB()).map { $0.close(); return true } ?? false })
        await p.stop()
    }
}
