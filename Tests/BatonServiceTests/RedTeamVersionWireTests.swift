// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
@testable import BatonTransport
import Foundation
import Testing
@testable import BatonService

/// Red-team pass on FetchActivityOfVersions (0x0C) as a rogue ring member sees the source: raw frames
/// over the pinned TLS channel against a real TransferService (protocol §2.1, §6.1–6.3, §9 step 3).
/// The source's current activity ("Chapter 3") has version 1; its (fake) app counts how often it is
/// asked for state (`transferRequests`: the WillSave step).
@Suite("BatonServiceTests: red team, FetchActivityOfVersions against the source", .serialized)
struct RedTeamVersionWireTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-version-\(UUID().uuidString)")

    /// Type hash, revision, range count byte, then the ranges as given (the count need not match them).
    static func payload(_ p: PublishedPair, revision: UInt32 = ActivityReference.anyRevision, count: Int? = nil,
                        ranges: [(UInt64, UInt64)]) -> [UInt8] {
        var out = p.hash.bytes
        out.appendBigEndian(revision)
        out.append(UInt8(count ?? ranges.count))
        for (lowest, highest) in ranges {
            out.appendBigEndian(lowest)
            out.appendBigEndian(highest)
        }
        return out
    }

    static func ask(_ channel: SecureChannel, _ frame: Frame) async throws -> Frame {
        try await channel.send(frame)
        let reply = try await channel.receive(timeout: .seconds(10))
        #expect(reply.requestID == frame.requestID)
        return reply
    }

    static func code(_ frame: Frame) -> ErrorFrame.Code? {
        frame.type == .error ? (try? ErrorFrame(payload: frame.payload))?.code : nil
    }

    /// The connection still serves: a plain FetchActivity on it gets the payload.
    static func stillServes(_ channel: SecureChannel, _ p: PublishedPair, id: UInt32) async throws {
        let fetch = Frame(type: .fetchActivity, requestID: id, payload: ActivityReference(typeHash: p.hash, revision: ActivityReference.anyRevision).payload)
        #expect(try await ask(channel, fetch).type == .activityPayload)
    }

    /// Attack: range counts 0, 17 and 255 (with as many ranges as fit, and with none), a range whose
    /// lowest is above its highest, a payload that ends inside a range, bytes after the last range,
    /// revisions ≥ 2²⁴ that are not 0xFFFFFFFF. Held: each is `Error(malformed)` with the request's id,
    /// the app is not asked, nothing is sent, and the connection keeps serving (§6.2, §6.3).
    @Test func undecodableVersionRequestsAreMalformedAndTheConnectionStaysOpen() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let channel = try await p.channelFromB()
        defer { channel.close() }
        let sixteen = Array(repeating: (UInt64(0), UInt64.max), count: 16)
        var bad: [[UInt8]] = [
            Self.payload(p, count: 0, ranges: []),
            Self.payload(p, count: 0, ranges: [(1, 1)]),
            Self.payload(p, count: 17, ranges: []),
            Self.payload(p, count: 17, ranges: sixteen),
            Self.payload(p, count: 255, ranges: [(1, 1)]),
            Self.payload(p, ranges: [(2, 1)]),
            Self.payload(p, ranges: [(1, 1), (UInt64.max, 0)]),
            Self.payload(p, count: 2, ranges: [(1, 1)]),
            Array(Self.payload(p, ranges: [(1, 1)]).dropLast(3)),
            Self.payload(p, ranges: [(1, 1)]) + [0],
            Self.payload(p, count: 1, ranges: [(1, 1), (1, 1)]),
            Array(p.hash.bytes) + [0xFF, 0xFF],
        ]
        for revision: UInt32 in [1 << 24, 0xFFFF_FFFE] { bad.append(Self.payload(p, revision: revision, ranges: [(1, 1)])) }
        for (index, payload) in bad.enumerated() {
            let reply = try await Self.ask(channel, Frame(type: .fetchActivityOfVersions, requestID: UInt32(100 + index), payload: payload))
            #expect(Self.code(reply) == .malformed, "payload \(index)")
        }
        #expect(p.a.activities.transferRequests == 0, "the app was never asked")
        #expect(await p.a.transfer.activityPayloadsSent == 0)
        try await Self.stillServes(channel, p, id: 200)
        await p.stop()
    }

    /// Attack: ranges that are unsorted, overlapping, or at the u64 extremes (2⁶³ and above, which a
    /// signed reading would take for negative versions). Held: only a range that contains 1 gets the
    /// payload; the rest are `versionUnsupported` without the app being asked.
    @Test func extremeAndOverlappingRangesAreReadAsUnsignedInclusiveRanges() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let channel = try await p.channelFromB()
        defer { channel.close() }
        let refused: [[(UInt64, UInt64)]] = [
            [(UInt64.max, UInt64.max)], [(1 << 63, UInt64.max)], [(0, 0)], [(2, UInt64.max)], [(2, 5), (3, 4), (0, 0)],
            Array(repeating: (0, 0), count: 16),
        ]
        for (index, ranges) in refused.enumerated() {
            let reply = try await Self.ask(channel, Frame(type: .fetchActivityOfVersions, requestID: UInt32(300 + index), payload: Self.payload(p, ranges: ranges)))
            #expect(Self.code(reply) == .versionUnsupported, "ranges \(ranges)")
        }
        #expect(p.a.activities.transferRequests == 0, "refused before the app is asked to save")
        #expect(await p.a.transfer.activityPayloadsSent == 0)
        let accepted: [[(UInt64, UInt64)]] = [[(0, UInt64.max)], [(5, 9), (0, 3), (1, 1)], [(1, 1)], Array(repeating: (1, 1), count: 16)]
        for (index, ranges) in accepted.enumerated() {
            let reply = try await Self.ask(channel, Frame(type: .fetchActivityOfVersions, requestID: UInt32(400 + index), payload: Self.payload(p, ranges: ranges)))
            #expect(reply.type == .activityPayload, "ranges \(ranges)")
            #expect(try ActivityRecord(decoding: reply.payload).version == 1)
        }
        #expect(await p.a.transfer.versionsRefused == refused.count)
        await p.stop()
    }

    /// Attack: frames the header rules end (§2.1, §6.1): a 0x0C whose length says 266 (over its
    /// limit of 265), a Hello with frame version 2 (a "v2 Hello" claiming another protocol version).
    /// Held: the source closes the connection without a reply, and nothing is asked of the app.
    @Test(arguments: [
        [UInt8]([1, FrameType.fetchActivityOfVersions.rawValue, 0, 0, 0, 0, 0, 9, 0, 0, 1, 10]),
        [UInt8]([2, FrameType.hello.rawValue, 0, 0, 0, 0, 0, 0, 0, 0, 0, 28]) + [UInt8](repeating: 0, count: 28),
        [UInt8]([2, FrameType.fetchActivityOfVersions.rawValue, 0, 0, 0, 0, 0, 9, 0, 0, 0, 25]) + [UInt8](repeating: 0, count: 25),
    ])
    func headersThatBreakTheRulesEndTheConnectionWithoutAReply(header: [UInt8]) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let channel = try await p.channelFromB()
        defer { channel.close() }
        try await channel.sendEncoded(header)
        await #expect(throws: TransportError.self) { _ = try await channel.receive(timeout: .seconds(10)) }
        #expect(p.a.activities.transferRequests == 0)
        await p.stop()
    }

    /// Attack: a Hello announcing a max frame payload of 0, 1 or 2³²−1 (the field reserved for later
    /// versions, §6.2), then a 0x0C on that connection, then a second Hello after it. Held: a v1 source
    /// refuses no Hello for that field, answers each afresh, and the versioned fetch is served as usual.
    @Test(arguments: [UInt32(0), 1, UInt32.max])
    func helloFieldsOfLaterVersionsChangeNothing(maxFramePayload: UInt32) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let keyOfA = await p.a.ring.keeper.identity.publicKey
        let connector = try TLSConnector(identity: await p.b.ring.keeper.identity, pins: { PinSet([keyOfA]) })
        let channel = try await connector.connect(host: "127.0.0.1", port: p.a.transfer.port, timeout: .seconds(5))
        defer { channel.close() }
        let hello = HelloMessage(deviceID: await p.b.ring.deviceID, rosterDigest: await p.b.ring.rosterDigest, maxFramePayload: maxFramePayload)
        #expect(try await Self.ask(channel, Frame(type: .hello, requestID: 0, payload: hello.payload)).type == .hello)
        let fetch = Frame(type: .fetchActivityOfVersions, requestID: 71, payload: Self.payload(p, ranges: [(1, 1)]))
        #expect(try await Self.ask(channel, fetch).type == .activityPayload)
        #expect(try await Self.ask(channel, Frame(type: .hello, requestID: 0, payload: hello.payload)).type == .hello)
        #expect(Self.code(try await Self.ask(channel, Frame(type: .fetchActivityOfVersions, requestID: 72, payload: Self.payload(p, ranges: [(2, 2)])))) == .versionUnsupported)
        await p.stop()
    }

    /// Attack: 0x0C as the first frame, before any Hello. Held: `Error(malformed)` with its request id,
    /// the connection closes, the app is not asked and nothing is sent (§6.2 "Hello").
    @Test func aVersionedFetchBeforeHelloIsRefusedAndClosesTheConnection() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let keyOfA = await p.a.ring.keeper.identity.publicKey
        let connector = try TLSConnector(identity: await p.b.ring.keeper.identity, pins: { PinSet([keyOfA]) })
        let channel = try await connector.connect(host: "127.0.0.1", port: p.a.transfer.port, timeout: .seconds(5))
        defer { channel.close() }
        let reply = try await Self.ask(channel, Frame(type: .fetchActivityOfVersions, requestID: 41, payload: Self.payload(p, ranges: [(1, 1)])))
        #expect(Self.code(reply) == .malformed)
        await #expect(throws: TransportError.self) { _ = try await channel.receive(timeout: .seconds(10)) }
        #expect(p.a.activities.transferRequests == 0)
        #expect(await p.a.transfer.activityPayloadsSent == 0)
        await p.stop()
    }

    /// Attack: 0x0C after other requests on one connection, then request ids reused: the same refused
    /// 0x0C again, the same id with ranges that would accept, the same id as a FetchActivity. Held:
    /// requests are answered one by one; a repeat gets the stored refusal without the source acting
    /// again; a reused id with another request is `malformed` and releases nothing (§6.2 reply cache).
    @Test func reusedRequestIdsReplayTheRefusalAndNeverReleaseThePayload() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let channel = try await p.channelFromB()
        defer { channel.close() }
        try await Self.stillServes(channel, p, id: 50)
        #expect(p.a.activities.transferRequests == 1)
        let refused = Frame(type: .fetchActivityOfVersions, requestID: 51, payload: Self.payload(p, ranges: [(2, 9)]))
        #expect(Self.code(try await Self.ask(channel, refused)) == .versionUnsupported)
        #expect(Self.code(try await Self.ask(channel, refused)) == .versionUnsupported)
        #expect(await p.a.transfer.versionsRefused == 1, "the repeat came from the reply cache")
        let widened = Frame(type: .fetchActivityOfVersions, requestID: 51, payload: Self.payload(p, ranges: [(0, 9)]))
        #expect(Self.code(try await Self.ask(channel, widened)) == .malformed)
        let plain = Frame(type: .fetchActivity, requestID: 51, payload: ActivityReference(typeHash: p.hash, revision: ActivityReference.anyRevision).payload)
        #expect(Self.code(try await Self.ask(channel, plain)) == .malformed)
        // On a new connection the same id is still the stored refusal (the cache is per device).
        let other = try await p.channelFromB()
        defer { other.close() }
        #expect(Self.code(try await Self.ask(other, refused)) == .versionUnsupported)
        #expect(Self.code(try await Self.ask(other, widened)) == .malformed)
        #expect(p.a.activities.transferRequests == 1, "no save for any of them")
        #expect(await p.a.transfer.activityPayloadsSent == 1)
        #expect(await p.a.transfer.versionsRefused == 1)
        await p.stop()
    }

    /// Attack: a 0x0C whose ranges exclude the version, then ActivityContinued for it (as if it had been
    /// answered), then FetchActivity for the same revision. Held: the refusal records no answered fetch
    /// (the report is `unknownActivity` and the app hears nothing) and asks nothing of the app; the plain
    /// FetchActivity is a new request that any member may send (§9): the app is asked to save then, once,
    /// and that answer entitles exactly one report.
    @Test func aRefusalEntitlesNoReportAndAPlainFetchAfterItIsAnOrdinaryFetch() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let publication = try #require(await p.a.ring.radio.currentPublication())
        let exact = ActivityReference(typeHash: p.hash, revision: publication.revision)
        let channel = try await p.channelFromB()
        defer { channel.close() }
        let refused = Frame(type: .fetchActivityOfVersions, requestID: 61,
                            payload: Self.payload(p, revision: publication.revision, ranges: [(2, 2)]))
        #expect(Self.code(try await Self.ask(channel, refused)) == .versionUnsupported)
        #expect(p.a.activities.transferRequests == 0)
        let report = Frame(type: .activityContinued, requestID: 62, payload: exact.payload)
        #expect(Self.code(try await Self.ask(channel, report)) == .unknownActivity)
        #expect(p.a.activities.continuedDevices.isEmpty, "a refused fetch is not reported to the app")

        let fetch = try await Self.ask(channel, Frame(type: .fetchActivity, requestID: 63, payload: exact.payload))
        #expect(fetch.type == .activityPayload)
        #expect(p.a.activities.transferRequests == 1, "the plain fetch asks the app once")
        #expect(Self.code(try await Self.ask(channel, Frame(type: .activityContinued, requestID: 64, payload: exact.payload))) == nil)
        #expect(Self.code(try await Self.ask(channel, Frame(type: .activityContinued, requestID: 65, payload: exact.payload))) == .unknownActivity)
        #expect(await eventually(timeout: .seconds(5)) { p.a.activities.continuedDevices == ["beta"] })
        await p.stop()
    }
}
