// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonServiceFakes
import BatonSystem
@testable import BatonTransport
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// A rogue ring member's listener for the clipboard (protocol §6.7): Hello answered honestly, then
/// FetchClipboardOffer and FetchClipboardData answered with whatever bytes the test sets, encoded
/// by hand (so that headers and fields can break every rule).
final class RogueClipboardSource: Sendable {
    /// One answer: raw frames, each (type, payload), or raw encoded bytes; the request's id is put in.
    enum Piece: Sendable {
        case frame(FrameType, [UInt8])
        /// A frame under another request's id.
        case foreign(FrameType, [UInt8])
        /// A header announcing `length` bytes, and `sent` bytes of payload after it.
        case header(FrameType, length: UInt32, sent: Int)
    }

    private let listener: TLSListener
    private let answers = Mutex<(offer: [Piece], data: [Piece], dataRequests: Int)>(([], [], 0))
    var dataRequests: Int { answers.withLock { $0.dataRequests } }
    func answerOffer(_ pieces: [Piece]) { answers.withLock { $0.offer = pieces } }
    func answerData(_ pieces: [Piece]) { answers.withLock { $0.data = pieces } }

    init(identity: Ed25519PrivateKey, pinned: [UInt8], port: UInt16, hello: HelloMessage) throws {
        listener = try TLSListener(identity: identity, pins: { PinSet([pinned]) }, host: "127.0.0.1", port: port)
        Task { [listener] in
            while let channel = try? await listener.accept() {
                Task { await self.serve(channel, hello: hello) }
            }
        }
    }

    private func serve(_ channel: SecureChannel, hello: HelloMessage) async {
        defer { channel.close() }
        while let frame = try? await channel.receive(timeout: .seconds(120)) {
            let pieces: [Piece]
            switch frame.type {
            case .hello: pieces = [.frame(.hello, hello.payload)]
            case .fetchClipboardOffer: pieces = answers.withLock { $0.offer }
            case .fetchClipboardData: pieces = answers.withLock { $0.dataRequests += 1; return $0.data }
            default: return
            }
            for piece in pieces {
                var bytes: [UInt8]
                switch piece {
                case .frame(let type, let payload):
                    bytes = Self.header(type, id: frame.requestID, length: UInt32(payload.count)) + payload
                case .foreign(let type, let payload):
                    bytes = Self.header(type, id: frame.requestID &+ 1_000, length: UInt32(payload.count)) + payload
                case .header(let type, let length, let sent):
                    bytes = Self.header(type, id: frame.requestID, length: length) + [UInt8](repeating: 0x41, count: sent)
                }
                guard (try? await channel.sendEncoded(bytes)) != nil else { return }
            }
        }
    }

    static func header(_ type: FrameType, id: UInt32, length: UInt32) -> [UInt8] {
        var out: [UInt8] = [1, type.rawValue, 0, 0]
        out.appendBigEndian(id)
        out.appendBigEndian(length)
        return out
    }

    func close() { listener.close() }
}

/// Red team, the receiving side of the clipboard: a rogue member answers beta's FetchClipboardOffer
/// and FetchClipboardData against protocol §6.7 (docs/clipboard.md: "never older bytes", limits
/// before memory is spent).
@Suite("BatonServiceTests: red team, a rogue member's clipboard answers", .serialized)
struct ClipboardAttackSourceTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-clipboard-source-\(UUID().uuidString)")
    static let text = "text/plain;charset=utf-8"

    static func offer(id: UInt64 = 0x0123_4567_89AB_CDEF, kind: UInt8 = 1, expires: UInt16 = 120, account: [UInt8] = Array("ada".utf8),
                      items: [(String, UInt64)] = [(text, 10)], count: Int? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(id)
        out.append(kind)
        out.appendBigEndian(expires)
        out.append(UInt8(truncatingIfNeeded: account.count))
        out += account
        out.append(UInt8(truncatingIfNeeded: count ?? items.count))
        for (type, size) in items {
            out.append(UInt8(truncatingIfNeeded: type.utf8.count))
            out += Array(type.utf8)
            out.appendBigEndian(size)
        }
        return out
    }

    static func data(offset: UInt64, total: UInt64, _ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(offset)
        out.appendBigEndian(total)
        return out + bytes
    }

    /// Attack: offers that break §6.7 (an item over 64 MiB, 17 items, a repeated type, an account
    /// with a slash, a kind of 4, an expiry of 0 and of 3,601 s, a header announcing 16 MiB), then,
    /// for a valid offer of 10 bytes, data answers that break it: a total other than offered, bytes
    /// past the total, a total over 64 MiB, frames out of order, the first bytes twice, an empty frame
    /// before the end, a header announcing 16 MiB, a frame of another request inside the answer, an
    /// error after the first data. Held: no bad offer is
    /// handed to the agent; every bad answer fails the paste (no bytes handed over, the 10 bytes
    /// never exceeded in memory); the honest answer pastes exactly the 10 bytes.
    @Test func answersThatBreakTheRulesHandOverNothing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let port = p.a.transfer.port
        await p.a.transfer.stop()
        let hello = HelloMessage(deviceID: p.idA, rosterDigest: await p.a.ring.rosterDigest, maxFramePayload: 1_048_576)
        let identity = await p.a.ring.keeper.identity, pinned = await p.b.ring.keeper.identity.publicKey
        var started: RogueClipboardSource?
        for _ in 0..<50 where started == nil {
            started = try? RogueClipboardSource(identity: identity, pinned: pinned, port: port, hello: hello)
            if started == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let rogue = try #require(started)
        defer { rogue.close() }
        let agents = FakeClipboardAgentCalls()
        let beta = ClipboardService(advert: FakeClipboardAdvert(), fetcher: p.b.transfer, agentCalls: agents, clock: FakeMonotonicClock(),
                                    randomToken: { UInt64.random(in: 1...UInt64.max) }, log: { _ in })
        await beta.register(ClipboardAgentEndpoint(uid: 2000, account: "ada", busName: ":1.2", path: "/a"))

        let badOffers: [[RogueClipboardSource.Piece]] = [
            [.frame(.clipboardOffer, Self.offer(items: [(Self.text, ClipboardItem.maxSize + 1)]))],
            [.frame(.clipboardOffer, Self.offer(items: (0..<17).map { ("image/x-\($0)", 1) }))],
            [.frame(.clipboardOffer, Self.offer(items: [(Self.text, 1), (Self.text, 2)]))],
            [.frame(.clipboardOffer, Self.offer(account: Array("../root".utf8)))],
            [.frame(.clipboardOffer, Self.offer(kind: 4))],
            [.frame(.clipboardOffer, Self.offer(expires: 0))],
            [.frame(.clipboardOffer, Self.offer(expires: 3_601))],
            [.frame(.clipboardOffer, Self.offer(items: [(Self.text, 10)], count: 2))],
            [.header(.clipboardOffer, length: 16 << 20, sent: 4_096)],
        ]
        var revision: UInt32 = 1
        for (index, answer) in badOffers.enumerated() {
            rogue.answerOffer(answer)
            revision += 1
            await beta.heard(p.idA, name: "alpha", kind: .text, revision: revision)
            #expect(agents.all.isEmpty, "bad offer \(index) was handed over")
        }

        rogue.answerOffer([.frame(.clipboardOffer, Self.offer())])
        revision += 1
        await beta.heard(p.idA, name: "alpha", kind: .text, revision: revision)
        let token = try #require(agents.offers(to: 2000).first).token
        let ten = Array("0123456789".utf8)
        let badData: [[RogueClipboardSource.Piece]] = [
            [.frame(.clipboardData, Self.data(offset: 0, total: 11, ten + [0x41]))],
            [.frame(.clipboardData, Self.data(offset: 0, total: 10, ten + [0x41]))],
            [.frame(.clipboardData, Self.data(offset: 0, total: ClipboardItem.maxSize + 1, ten))],
            [.frame(.clipboardData, Self.data(offset: 5, total: 10, Array(ten[5...]))), .frame(.clipboardData, Self.data(offset: 0, total: 10, Array(ten[..<5])))],
            [.frame(.clipboardData, Self.data(offset: 0, total: 10, Array(ten[..<5]))), .frame(.clipboardData, Self.data(offset: 0, total: 10, Array(ten[..<5])))],
            [.frame(.clipboardData, Self.data(offset: 0, total: 10, []))],
            [.header(.clipboardData, length: 16 << 20, sent: 4_096)],
            // (Before the first answer, a frame of another request is skipped as a late reply: security.md, "left open".)
            [.frame(.clipboardData, Self.data(offset: 0, total: 10, Array(ten[..<5]))), .foreign(.clipboardData, Self.data(offset: 5, total: 10, Array(ten[5...]))),
             .frame(.clipboardData, Self.data(offset: 5, total: 10, Array(ten[5...])))],
            [.frame(.clipboardData, Self.data(offset: 0, total: 10, Array(ten[..<5]))),
             .frame(.error, ErrorFrame(code: .unknownActivity, message: "clipboard changed").payload)],
        ]
        for (index, answer) in badData.enumerated() {
            rogue.answerData(answer)
            do {
                let pasted = try await beta.paste(uid: 2000, token: token, mediaType: Self.text)
                Issue.record("bad data \(index) was pasted: \(try pasted.file.readAll())")
            } catch {}
        }
        // The error after data may be taken for a changed copy (its token withdrawn): a new offer then.
        if agents.withdrawals(of: 2000).contains(token) {
            rogue.answerOffer([.frame(.clipboardOffer, Self.offer(id: 42))])
            revision += 1
            await beta.heard(p.idA, name: "alpha", kind: .text, revision: revision)
        }
        let current = try #require(agents.offers(to: 2000).last).token
        rogue.answerData([.frame(.clipboardData, Self.data(offset: 0, total: 10, ten))])
        #expect(try await beta.paste(uid: 2000, token: current, mediaType: Self.text).file.readAll() == ten)
        #expect(rogue.dataRequests == badData.count + 1)
        await p.stop()
    }
}
