// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonService
import BatonServiceFakes
import BatonSystem
import Foundation
import Synchronization
import Testing

/// The clipboard between two paired daemons over pinned TLS on loopback (§6.7): the offer is asked
/// when the advert is heard, the bytes of one type cross at the paste, in 64 KiB frames.
@Suite struct ClipboardTransferTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("clipboard-transfer-\(UUID().uuidString)")

    func service(transfer: TransferService, advert: any ClipboardAdvert, agents: FakeClipboardAgentCalls) -> ClipboardService {
        let counter = Mutex<UInt64>(UInt64.random(in: 1...UInt64.max))
        return ClipboardService(advert: advert, fetcher: transfer, agentCalls: agents, clock: SystemMonotonicClock(),
                                randomToken: { counter.withLock { $0 = $0 &* 6364136223846793005 &+ 1442695040888963407; return $0 } }, log: { _ in })
    }

    @Test func aCopyCrossesOnlyAtThePasteAndWhole() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        let agentsA = FakeClipboardAgentCalls(), agentsB = FakeClipboardAgentCalls()
        let alpha = service(transfer: p.a.transfer, advert: p.a.ring.radio, agents: agentsA)
        let beta = service(transfer: p.b.transfer, advert: FakeClipboardAdvert(), agents: agentsB)
        p.a.transfer.clipboardSource.use(alpha)
        await alpha.register(ClipboardAgentEndpoint(uid: 1000, account: "ada", busName: ":1.1", path: "/a"))
        await beta.register(ClipboardAgentEndpoint(uid: 2000, account: "ada", busName: ":1.2", path: "/a"))
        // An image over several frames (and not a multiple of 64 KiB), and an empty text.
        let image = (0..<200_001).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        try await alpha.offer(uid: 1000, kind: .image, items: [ClipboardItem(mediaType: "image/png", size: UInt64(image.count)),
                                                              ClipboardItem(mediaType: "text/plain;charset=utf-8", size: 0)],
                              expiresIn: 0, contents: ClipboardContents(try SealedMemoryFile.make(name: "copy", bytes: image)))
        #expect(await alpha.offeredKind == .image)
        // beta hears alpha's advert (its revision as the radio sealed it) and asks for the offer.
        let revision = await p.a.ring.radio.currentPublication()?.revision ?? 1
        await beta.heard(p.idA, name: "alpha", kind: .image, revision: revision)
        let offer = try #require(agentsB.offers(to: 2000).first)
        #expect(offer.items.map(\.mediaType) == ["image/png", "text/plain;charset=utf-8"] && offer.items[0].size == 200_001)
        let pasted = try await beta.paste(uid: 2000, token: offer.token, mediaType: "image/png")
        #expect(try pasted.file.readAll() == image)
        let empty = try await beta.paste(uid: 2000, token: offer.token, mediaType: "text/plain;charset=utf-8")
        #expect(try empty.file.readAll().isEmpty)
        // A new copy at alpha: the old token's paste is refused by alpha as changed, never served old bytes.
        try await alpha.offer(uid: 1000, kind: .text, items: [ClipboardItem(mediaType: "text/plain;charset=utf-8", size: 3)], expiresIn: 0,
                              contents: ClipboardContents(try SealedMemoryFile.make(name: "copy", bytes: Array("new".utf8))))
        await #expect(throws: ClipboardService.Refusal.changed) { _ = try await beta.paste(uid: 2000, token: offer.token, mediaType: "image/png") }
        #expect(agentsB.withdrawals(of: 2000) == [offer.token])
        await p.stop()
    }

    @Test func aMachineWithoutAClipboardOffersNothingAndAMemberOnlyIsAnswered() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let p = try await PublishedPair.start(in: directory)
        // No clipboard wired in at alpha: no offer, and nothing breaks.
        #expect(try await p.b.transfer.clipboardOffer(of: p.idA) == nil)
        // A FetchClipboardOffer on a channel gets an answer, and the channel serves the next request.
        let channel = try await p.channelFromB()
        defer { channel.close() }
        try await channel.send(Frame(type: .fetchClipboardOffer, requestID: 11, payload: []))
        let refusal = try await channel.receive(timeout: .seconds(120))
        #expect(refusal.type == .error && refusal.requestID == 11)
        #expect(try ErrorFrame(payload: refusal.payload).code == .unknownActivity)
        try await channel.send(Frame(type: .fetchClipboardOffer, requestID: 11, payload: []))
        let again = try await channel.receive(timeout: .seconds(120))
        #expect(again.type == .error && again.requestID == 11, "a repeated id is answered afresh, never from the reply cache")
        await p.stop()
    }
}
