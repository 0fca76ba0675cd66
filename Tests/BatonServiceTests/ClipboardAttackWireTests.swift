// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonServiceFakes
import BatonSystem
@testable import BatonTransport
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// Red team, the clipboard's wire (protocol §6.7) as a rogue ring member sends it: raw frames over
/// the pinned TLS channel against alpha's real transfer and ClipboardService (its clock a fake, so
/// expiry is the test's to decide), and a member removed while it pulls.
@Suite("BatonServiceTests: red team, the clipboard's frames from a rogue member", .serialized)
struct ClipboardAttackWireTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-clipboard-\(UUID().uuidString)")
    static let text = "text/plain;charset=utf-8"

    struct Scene {
        let pair: PublishedPair
        let clipboard: ClipboardService
        let clock: FakeMonotonicClock
        let channel: SecureChannel
    }

    func scene() async throws -> Scene {
        let pair = try await PublishedPair.start(in: directory)
        let clock = FakeMonotonicClock()
        let counter = Mutex<UInt64>(UInt64.random(in: 1...UInt64.max))
        let clipboard = ClipboardService(advert: FakeClipboardAdvert(), fetcher: pair.a.transfer, agentCalls: FakeClipboardAgentCalls(), clock: clock,
                                         randomToken: { counter.withLock { $0 = $0 &* 6364136223846793005 &+ 1442695040888963407; return $0 } },
                                         log: { _ in })
        pair.a.transfer.clipboardSource.use(clipboard)
        await clipboard.register(ClipboardAgentEndpoint(uid: 1000, account: "ada", busName: ":1.1", path: "/a"))
        return Scene(pair: pair, clipboard: clipboard, clock: clock, channel: try await pair.channelFromB())
    }

    func copy(_ scene: Scene, _ bytes: [UInt8], type: String = text, expiresIn: UInt16 = 0) async throws {
        try await scene.clipboard.offer(uid: 1000, kind: .text, items: [ClipboardItem(mediaType: type, size: UInt64(bytes.count))], expiresIn: expiresIn,
                                        contents: ClipboardContents(try SealedMemoryFile.make(name: "copy", bytes: bytes)))
    }

    static func ask(_ channel: SecureChannel, _ frame: Frame) async throws -> Frame {
        try await channel.send(frame)
        let reply = try await channel.receive(timeout: .seconds(120))
        #expect(reply.requestID == frame.requestID)
        return reply
    }

    static func refusal(_ frame: Frame) -> ErrorFrame? { frame.type == .error ? try? ErrorFrame(payload: frame.payload) : nil }

    static func offer(_ channel: SecureChannel, id: UInt32) async throws -> ClipboardOffer? {
        let reply = try await ask(channel, Frame(type: .fetchClipboardOffer, requestID: id, payload: []))
        return reply.type == .clipboardOffer ? try ClipboardOffer(payload: reply.payload) : nil
    }

    static func dataPayload(offerID: UInt64, type: String, offset: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(offerID)
        out.append(UInt8(truncatingIfNeeded: type.utf8.count))
        out.append(contentsOf: type.utf8)
        out.appendBigEndian(offset)
        return out
    }

    /// All the bytes of one FetchClipboardData's answer, or the refusal that came instead.
    static func pull(_ channel: SecureChannel, id: UInt32, offerID: UInt64, type: String, offset: UInt64 = 0) async throws -> Result<[UInt8], ErrorFrame> {
        try await channel.send(Frame(type: .fetchClipboardData, requestID: id, payload: dataPayload(offerID: offerID, type: type, offset: offset)))
        var bytes: [UInt8] = []
        while true {
            let frame = try await channel.receive(timeout: .seconds(120))
            #expect(frame.requestID == id)
            if let refusal = refusal(frame) { return .failure(refusal) }
            let data = try ClipboardData(payload: frame.payload)
            bytes += data.data
            if data.offset + UInt64(data.data.count) == data.total { return .success(bytes) }
        }
    }

    /// Attack, as a member: FetchClipboardData for a type never offered, a guessed offer id, an
    /// offset past the item and past 64 MiB, an empty and a spaced media type, a short payload; the
    /// first copy's request (its offer id, the same request id) again after a new copy; the new
    /// copy's after its app restricted it to this machine, after it expired, after it was taken
    /// back. Held: `unknownActivity` ("type not offered", "clipboard changed") or `malformed`, no
    /// byte of any copy in the refusals, nothing ever answered from the reply cache, and the
    /// connection keeps serving; a FetchClipboardOffer after each change says no offer.
    @Test func requestsForWhatIsNotOfferedNowGetNoBytes() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let scene = try await scene()
        let channel = scene.channel
        defer { channel.close() }
        let first = Array("first secret copy".utf8)
        try await copy(scene, first)
        let offered = try #require(try await Self.offer(channel, id: 10))
        #expect(offered.account == "ada" && offered.items.map(\.mediaType) == [Self.text])

        let notOffered = try await Self.pull(channel, id: 11, offerID: offered.offerID, type: "image/png")
        #expect((try? notOffered.get()) == nil)
        if case .failure(let refusal) = notOffered { #expect(refusal.code == .unknownActivity && refusal.message == "type not offered") }
        for guess in [offered.offerID &+ 1, offered.offerID ^ 1, 0, UInt64.max] {
            let guessed = try await Self.pull(channel, id: 12, offerID: guess, type: Self.text)
            if case .failure(let refusal) = guessed { #expect(refusal.code == .unknownActivity && refusal.message == "clipboard changed") }
            else { Issue.record("a guessed offer id was answered") }
        }
        let malformed: [[UInt8]] = [
            Self.dataPayload(offerID: offered.offerID, type: Self.text, offset: UInt64(first.count) + 1),
            Self.dataPayload(offerID: offered.offerID, type: Self.text, offset: ClipboardItem.maxSize + 1),
            Self.dataPayload(offerID: offered.offerID, type: Self.text, offset: .max),
            Self.dataPayload(offerID: offered.offerID, type: "", offset: 0),
            Self.dataPayload(offerID: offered.offerID, type: "text/plain; charset=utf-8", offset: 0),
            Array(Self.dataPayload(offerID: offered.offerID, type: Self.text, offset: 0).dropLast(1)),
            Self.dataPayload(offerID: offered.offerID, type: Self.text, offset: 0) + [0],
            [0, 1, 2],
        ]
        for (index, payload) in malformed.enumerated() {
            let reply = try await Self.ask(channel, Frame(type: .fetchClipboardData, requestID: UInt32(20 + index), payload: payload))
            #expect(Self.refusal(reply)?.code == .malformed, "payload \(index): \(reply.type)")
        }
        #expect(try await Self.pull(channel, id: 30, offerID: offered.offerID, type: Self.text).get() == first)

        // A new copy: the first one's request, even under the same request id, gets no byte.
        try await copy(scene, Array("second".utf8))
        let replay = try await Self.pull(channel, id: 30, offerID: offered.offerID, type: Self.text)
        if case .failure(let refusal) = replay { #expect(refusal.code == .unknownActivity) } else { Issue.record("the first copy was served after a new one") }
        let second = try #require(try await Self.offer(channel, id: 31))
        #expect(second.offerID != offered.offerID)

        // Its app restricts it to this machine: gone from the wire at once.
        await scene.clipboard.restrict(uid: 1000, localOnly: true, expiresIn: 0)
        #expect(try await Self.offer(channel, id: 32) == nil)
        if case .success = try await Self.pull(channel, id: 33, offerID: second.offerID, type: Self.text) { Issue.record("a local-only copy was served") }

        // A copy that expires: nothing after its time, although nobody called expire() yet.
        scene.clock.advance(ClipboardService.restrictWindow + 1)
        try await copy(scene, Array("short-lived".utf8), expiresIn: 5)
        let third = try #require(try await Self.offer(channel, id: 34))
        scene.clock.advance(5)
        #expect(try await Self.offer(channel, id: 35) == nil)
        if case .success = try await Self.pull(channel, id: 36, offerID: third.offerID, type: Self.text) { Issue.record("an expired copy was served") }

        // One taken back.
        try await copy(scene, Array("taken back".utf8))
        let fourth = try #require(try await Self.offer(channel, id: 37))
        await scene.clipboard.withdraw(uid: 1000)
        #expect(try await Self.offer(channel, id: 38) == nil)
        if case .success = try await Self.pull(channel, id: 39, offerID: fourth.offerID, type: Self.text) { Issue.record("a withdrawn copy was served") }
        await scene.pair.stop()
    }

    /// Attack: clipboard requests whose header announces more than their type allows
    /// (FetchClipboardOffer: 0 bytes; FetchClipboardData: 272), up to 16 MiB. Held: the source
    /// closes the connection without reading the payload or answering (limits before memory).
    @Test(arguments: [(FrameType.fetchClipboardOffer, UInt32(1)), (.fetchClipboardData, 273), (.fetchClipboardData, 16 << 20)])
    func oversizedClipboardRequestsEndTheConnection(type: FrameType, length: UInt32) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let scene = try await scene()
        let channel = scene.channel
        defer { channel.close() }
        try await copy(scene, Array("copy".utf8))
        var header: [UInt8] = [1, type.rawValue, 0, 0, 0, 0, 0, 40]
        header.appendBigEndian(length)
        try await channel.sendEncoded(header + [UInt8](repeating: 0, count: Int(min(length, 300))))
        var answered = false
        do {
            let reply = try await channel.receive(timeout: .seconds(120))
            answered = reply.requestID == 40
        } catch {}
        #expect(!answered, "an oversized \(type) was answered")
        #expect(await scene.clipboard.dataRequestsAnswered == 0)
        await scene.pair.stop()
    }

    /// Attack: a member pulls a 64 MiB copy and is removed from the ring after the first frame; then
    /// asks again on the same connection. Held: the source sends no further frame once the removal
    /// is saved (protocol §6.7: the item whole, or the connection closed), far fewer bytes than the
    /// item cross, and the removed member gets nothing more (notPermitted, or a closed connection).
    @Test func aMemberRemovedWhilePullingGetsNoMore() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let scene = try await scene()
        let channel = scene.channel
        defer { channel.close() }
        let size = Int(ClipboardItem.maxSize)
        try await copy(scene, [UInt8](repeating: 0x5A, count: size), type: "image/png")
        let offered = try #require(try await Self.offer(channel, id: 50))
        try await channel.send(Frame(type: .fetchClipboardData, requestID: 51,
                                     payload: Self.dataPayload(offerID: offered.offerID, type: "image/png", offset: 0)))
        let firstFrame = try await channel.receive(timeout: .seconds(120))
        #expect(firstFrame.type == .clipboardData)
        try await scene.pair.a.ring.remove(await scene.pair.b.ring.deviceID.description)
        var received = try ClipboardData(payload: firstFrame.payload).data.count
        do {
            while true {
                let frame = try await channel.receive(timeout: .seconds(120))
                guard frame.type == .clipboardData else { break }
                received += try ClipboardData(payload: frame.payload).data.count
                if received >= size { break }
            }
        } catch {}
        #expect(received < size / 2, "the removed member pulled \(received) of \(size) bytes")
        var refusedAfter = true
        do {
            let reply = try await Self.ask(channel, Frame(type: .fetchClipboardOffer, requestID: 52, payload: []))
            refusedAfter = Self.refusal(reply)?.code == .notPermitted
        } catch {}
        #expect(refusedAfter, "the removed member was answered again")
        await scene.pair.stop()
    }
}
