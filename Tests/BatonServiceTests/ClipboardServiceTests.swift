// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonService
import BatonServiceFakes
import BatonSystem
import Synchronization
import Testing

/// ClipboardService on two machines joined by a fake transfer (no network, no bus): what is offered,
/// to whom, and that bytes cross only at a paste (docs/clipboard.md, protocol §9 "Clipboard").
@Suite struct ClipboardServiceTests {
    let alphaID = try! DeviceID(bytes: Array(repeating: 0xA1, count: 16))
    let betaID = try! DeviceID(bytes: Array(repeating: 0xB2, count: 16))

    struct Machine {
        let service: ClipboardService
        let advert: FakeClipboardAdvert
        let agents: FakeClipboardAgentCalls
        let fetcher: FakeClipboardFetcher
        let clock: FakeMonotonicClock
    }

    func machine(clock: FakeMonotonicClock = FakeMonotonicClock(), name: String = "beta") -> Machine {
        let advert = FakeClipboardAdvert(), agents = FakeClipboardAgentCalls(), fetcher = FakeClipboardFetcher(asker: name)
        let counter = Mutex<UInt64>(0x5EED)
        let service = ClipboardService(advert: advert, fetcher: fetcher, agentCalls: agents, clock: clock,
                                       randomToken: { counter.withLock { $0 = $0 &* 6364136223846793005 &+ 1442695040888963407; return $0 } },
                                       log: { _ in })
        return Machine(service: service, advert: advert, agents: agents, fetcher: fetcher, clock: clock)
    }

    func agent(_ uid: UInt32, _ account: String) -> ClipboardAgentEndpoint {
        ClipboardAgentEndpoint(uid: uid, account: account, busName: ":1.\(uid)", path: "/org/baton/ClipboardAgent")
    }

    func contents(_ parts: [[UInt8]]) throws -> ClipboardContents {
        ClipboardContents(try SealedMemoryFile.make(name: "test", bytes: parts.flatMap { $0 }))
    }

    func bytes(of contents: ClipboardContents) throws -> [UInt8] {
        try contents.file.readAll()
    }

    /// alpha (ada, 1000) copies text in two types; beta has agents for ada (2000) and bob (2001).
    func copiedOnAlpha() async throws -> (alpha: Machine, beta: Machine, text: [UInt8], html: [UInt8]) {
        let alpha = machine(name: "alpha"), beta = machine()
        beta.fetcher.connect(alphaID, to: alpha.service)
        await alpha.service.register(agent(1000, "ada"))
        await beta.service.register(agent(2000, "ada"))
        await beta.service.register(agent(2001, "bob"))
        let text = Array("hello, beta".utf8), html = Array("<b>hello</b>".utf8)
        try await alpha.service.offer(uid: 1000, kind: .text, items: [ClipboardItem(mediaType: "text/plain;charset=utf-8", size: UInt64(text.count)),
                                                                     ClipboardItem(mediaType: "text/html", size: UInt64(html.count))],
                                      expiresIn: 120, contents: contents([text, html]))
        return (alpha, beta, text, html)
    }

    @Test func aCopyIsHandedToTheSameAccountOnlyAndItsBytesCrossOnlyAtThePaste() async throws {
        let (alpha, beta, text, html) = try await copiedOnAlpha()
        #expect(alpha.advert.current == .text)
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 7)
        let offers = beta.agents.offers(to: 2000)
        try #require(offers.count == 1)
        #expect(offers[0].memberName == "alpha" && offers[0].kind == .text && offers[0].items.map(\.mediaType) == ["text/plain;charset=utf-8", "text/html"])
        #expect(beta.agents.offers(to: 2001).isEmpty, "bob was handed ada's copy")
        #expect(beta.fetcher.offerRequests == 1)
        #expect(beta.fetcher.dataRequests == 0 && beta.fetcher.bytesMoved == 0, "bytes crossed before the paste")
        // What each account's status says (Clipboard1.GetStatus): on alpha ada's copy was asked for
        // by beta and pasted nowhere; on beta ada holds it from alpha, bob holds nothing.
        var status = await alpha.service.status(uid: 1000)
        #expect(status.registered && status.offer?.askedBy == ["beta"] && status.offer?.pastedOn == [] && status.offer?.expiresIn == 120)
        #expect(status.offersAnswered == 1 && status.pastesAnswered == 0)
        let held = await beta.service.status(uid: 2000)
        #expect(held.taken?.device == "alpha" && held.taken?.kind == .text && held.offer == nil)
        #expect(await beta.service.status(uid: 2001) == ClipboardAccountStatus(registered: true))
        #expect(await alpha.service.status(uid: 4242) == ClipboardAccountStatus(registered: false))

        let pasted = try await beta.service.paste(uid: 2000, token: offers[0].token, mediaType: "text/html")
        #expect(try bytes(of: pasted) == html)
        #expect(SealedMemoryFile.immutableSize(of: pasted.file) == UInt64(html.count))
        #expect(try bytes(of: try await beta.service.paste(uid: 2000, token: offers[0].token, mediaType: "text/plain;charset=utf-8")) == text)
        #expect(beta.fetcher.dataRequests == 2 && beta.fetcher.bytesMoved == UInt64(text.count + html.count))
        status = await alpha.service.status(uid: 1000)
        #expect(status.offer?.pastedOn == [ClipboardPaste(device: "beta", mediaType: "text/html", size: UInt64(html.count)),
                                           ClipboardPaste(device: "beta", mediaType: "text/plain;charset=utf-8", size: UInt64(text.count))])
        #expect(status.pastesAnswered == 2)

        // Another account cannot paste ada's copy by its token, nor a type that is not offered.
        await #expect(throws: ClipboardService.Refusal.unknownOffer) { _ = try await beta.service.paste(uid: 2001, token: offers[0].token, mediaType: "text/html") }
        await #expect(throws: ClipboardService.Refusal.typeNotOffered("image/png")) {
            _ = try await beta.service.paste(uid: 2000, token: offers[0].token, mediaType: "image/png")
        }
    }

    @Test func reSightingsAskNothingAndTheSameCopyIsHandedOnce() async throws {
        let (_, beta, _, _) = try await copiedOnAlpha()
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 7)
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 7)
        #expect(beta.fetcher.offerRequests == 1)
        // The activity changed at alpha (a new revision), not the copy: asked again, not handed again.
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 8)
        #expect(beta.fetcher.offerRequests == 2)
        #expect(beta.agents.offers(to: 2000).count == 1)
    }

    @Test func aPasteAfterTheCopyChangedFailsClearlyAndNeverGetsOlderBytes() async throws {
        let (alpha, beta, _, _) = try await copiedOnAlpha()
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 7)
        let old = try #require(beta.agents.offers(to: 2000).first)
        let newer = Array("newer".utf8)
        try await alpha.service.offer(uid: 1000, kind: .text, items: [ClipboardItem(mediaType: "text/plain;charset=utf-8", size: 5)],
                                      expiresIn: 120, contents: contents([newer]))
        // beta has not heard the new advert yet: the paste of the old copy is refused at alpha.
        await #expect(throws: ClipboardService.Refusal.changed) {
            _ = try await beta.service.paste(uid: 2000, token: old.token, mediaType: "text/plain;charset=utf-8")
        }
        #expect(beta.agents.withdrawals(of: 2000) == [old.token])
        // Its advert heard, the new copy is handed on and pastes the newest bytes.
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 8)
        let new = try #require(beta.agents.offers(to: 2000).last)
        #expect(new.token != old.token)
        #expect(try bytes(of: try await beta.service.paste(uid: 2000, token: new.token, mediaType: "text/plain;charset=utf-8")) == newer)
    }

    @Test func anExpiredOfferIsNeitherAdvertisedNorServedNorPasted() async throws {
        let clock = FakeMonotonicClock()
        let alpha = machine(clock: clock), beta = machine(clock: clock)
        beta.fetcher.connect(alphaID, to: alpha.service)
        await alpha.service.register(agent(1000, "ada"))
        await beta.service.register(agent(2000, "ada"))
        try await alpha.service.offer(uid: 1000, kind: .image, items: [ClipboardItem(mediaType: "image/png", size: 3)], expiresIn: 30,
                                      contents: contents([[1, 2, 3]]))
        await beta.service.heard(alphaID, name: "alpha", kind: .image, revision: 1)
        let offer = try #require(beta.agents.offers(to: 2000).first)
        #expect(offer.expiresIn == 30)
        clock.advance(30)
        await alpha.service.expire()
        await beta.service.expire()
        #expect(alpha.advert.current == nil)
        #expect(await alpha.service.offeredKind == nil)
        guard case .failure(let refusal) = await alpha.service.answerOffer(member: "beta") else { Issue.record("an expired offer was answered"); return }
        #expect(refusal.code == .unknownActivity)
        #expect(beta.agents.withdrawals(of: 2000) == [offer.token])
        await #expect(throws: ClipboardService.Refusal.unknownOffer) { _ = try await beta.service.paste(uid: 2000, token: offer.token, mediaType: "image/png") }
        #expect(beta.fetcher.dataRequests == 0)
    }

    @Test func theAdvertLosingItsKindWithdrawsWhatWasTaken() async throws {
        let (alpha, beta, _, _) = try await copiedOnAlpha()
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 7)
        let offer = try #require(beta.agents.offers(to: 2000).first)
        // ada copied a secret at alpha: her agent takes the copy back.
        await alpha.service.withdraw(uid: 1000)
        #expect(alpha.advert.history == [.text, nil])
        await beta.service.heard(alphaID, name: "alpha", kind: nil, revision: 8)
        #expect(beta.agents.withdrawals(of: 2000) == [offer.token])
        await beta.service.memberLeft(alphaID)
        #expect(beta.agents.withdrawals(of: 2000) == [offer.token])
    }

    @Test func aMemberLeavingTheRingWithdrawsItsCopy() async throws {
        let (_, beta, _, _) = try await copiedOnAlpha()
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 7)
        let offer = try #require(beta.agents.offers(to: 2000).first)
        await beta.service.memberLeft(alphaID)
        #expect(beta.agents.withdrawals(of: 2000) == [offer.token])
        await #expect(throws: ClipboardService.Refusal.unknownOffer) { _ = try await beta.service.paste(uid: 2000, token: offer.token, mediaType: "text/html") }
    }

    @Test func offersAreRefusedWithoutAnAgentOrWithContentsThatCouldChange() async throws {
        let alpha = machine()
        let items = [try ClipboardItem(mediaType: "text/plain;charset=utf-8", size: 3)]
        await #expect(throws: ClipboardService.Refusal.notEnabled) {
            try await alpha.service.offer(uid: 1000, kind: .text, items: items, expiresIn: 120, contents: try contents([[1, 2, 3]]))
        }
        await alpha.service.register(agent(1000, "ada"))
        let unsealed = try SealedMemoryFile.makeUnsealed(name: "open")
        try unsealed.writeAll([1, 2, 3])
        let unsealedContents = ClipboardContents(unsealed)
        await #expect(throws: ClipboardService.Refusal.self) {
            try await alpha.service.offer(uid: 1000, kind: .text, items: items, expiresIn: 120, contents: unsealedContents)
        }
        await #expect(throws: ClipboardService.Refusal.invalidContents("the contents hold 4 bytes, the items 3")) {
            try await alpha.service.offer(uid: 1000, kind: .text, items: items, expiresIn: 120, contents: try contents([[1, 2, 3, 4]]))
        }
        #expect(alpha.advert.history.isEmpty)
        // Turning the clipboard off (the agent leaves) takes the copy back.
        try await alpha.service.offer(uid: 1000, kind: .text, items: items, expiresIn: 120, contents: try contents([[1, 2, 3]]))
        await alpha.service.agentLeft(busName: ":1.1000")
        #expect(alpha.advert.history == [.text, nil])
    }

    @Test func anItemOverThePastingMachinesLimitIsRefusedBeforeAnyByteMoves() async throws {
        let (_, beta, _, _) = try await copiedOnAlpha()
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 7)
        let offer = try #require(beta.agents.offers(to: 2000).first)
        await #expect(throws: ClipboardService.Refusal.tooLarge(size: 12, limit: 10)) {
            _ = try await beta.service.paste(uid: 2000, token: offer.token, mediaType: "text/html", limit: 10)
        }
        #expect(beta.fetcher.dataRequests == 0)
    }

    @Test func aCopyOfAnAccountWithoutAnAgentHereGoesNowhere() async throws {
        let alpha = machine(), beta = machine()
        beta.fetcher.connect(alphaID, to: alpha.service)
        await alpha.service.register(agent(1000, "carol"))
        await beta.service.register(agent(2000, "ada"))
        try await alpha.service.offer(uid: 1000, kind: .text, items: [ClipboardItem(mediaType: "a", size: 1)], expiresIn: 120, contents: contents([[9]]))
        await beta.service.heard(alphaID, name: "alpha", kind: .text, revision: 1)
        #expect(beta.agents.all.isEmpty)
    }

    @Test func anAppsRestrictionMarksTheCopyMadeJustBeforeOrAfterIt() async throws {
        let clock = FakeMonotonicClock()
        let alpha = machine(clock: clock)
        await alpha.service.register(agent(1000, "ada"))
        await alpha.service.register(agent(1001, "bob"))
        let items = [try ClipboardItem(mediaType: "text/plain;charset=utf-8", size: 3)]
        // Local only, asked before the copy: nothing is offered.
        await alpha.service.restrict(uid: 1000, localOnly: true, expiresIn: 0)
        try await alpha.service.offer(uid: 1000, kind: .text, items: items, expiresIn: 0, contents: contents([[1, 2, 3]]))
        #expect(await alpha.service.offeredKind == nil)
        // The restriction was used up: the next copy is offered, with the default life.
        try await alpha.service.offer(uid: 1000, kind: .text, items: items, expiresIn: 0, contents: contents([[1, 2, 3]]))
        guard case .success(let offer) = await alpha.service.answerOffer(member: "beta") else { Issue.record("not offered"); return }
        #expect(offer.expiresIn == ClipboardShelf.defaultExpirySeconds)
        // Another account's restriction does not touch ada's copy; ada's own, right after, takes it back.
        await alpha.service.restrict(uid: 1001, localOnly: true, expiresIn: 0)
        #expect(await alpha.service.offeredKind == .text)
        await alpha.service.restrict(uid: 1000, localOnly: true, expiresIn: 0)
        #expect(await alpha.service.offeredKind == nil)
        // A shorter life, asked just after the copy (made once the window of the restriction above
        // is over: it marks ada's next copy within the window too).
        clock.advance(ClipboardService.restrictWindow + 1)
        try await alpha.service.offer(uid: 1000, kind: .text, items: items, expiresIn: 600, contents: contents([[1, 2, 3]]))
        clock.advance(1)
        await alpha.service.restrict(uid: 1000, localOnly: false, expiresIn: 10)
        guard case .success(let shortened) = await alpha.service.answerOffer(member: "beta") else { Issue.record("not offered"); return }
        #expect(shortened.expiresIn == 10)
        // Too late: a restriction long after the copy waits for the next copy instead.
        clock.advance(5)
        await alpha.service.restrict(uid: 1000, localOnly: true, expiresIn: 0)
        #expect(await alpha.service.offeredKind == .text)
        clock.advance(ClipboardService.restrictWindow + 1)
        try await alpha.service.offer(uid: 1000, kind: .image, items: [try ClipboardItem(mediaType: "image/png", size: 1)], expiresIn: 0,
                                      contents: contents([[7]]))
        #expect(await alpha.service.offeredKind == .image, "a stale restriction applied")
    }
}
