// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore

/// The clipboard's advert bits, frames and the two pure books (§4.1, §6.7, §9 "Clipboard").
@Suite struct ClipboardTests {
    let epoch: UInt64 = 2_000_000
    let memberSecret = secret(1)
    var keys: DerivedKeys { DerivedKeys(secret: memberSecret) }
    let member = deviceID(1)
    let other = deviceID(2)

    func advert(_ body: AdvertBody, sequence: UInt8 = 0) -> [UInt8] {
        RingAdvert.seal(body: body, keys: keys, epoch: keys.epochMaterial(epoch), sequence: sequence)
    }

    @Test func everyKindCrossesTheAdvertWithAndWithoutAnActivity() throws {
        for kind in [nil] + ClipboardKind.allCases.map(Optional.some) {
            for body in [AdvertBody(typeHash: TypeHash(value: 9), revision: 4, flags: [.hasActivity, .hasDocument], clipboard: kind),
                         AdvertBody.presence(revision: 5, clipboard: kind)] {
                let opened = try RingAdvert.open(advert(body), keys: keys, epoch: epoch, mask: keys.epochMaterial(epoch).mask)
                #expect(opened.body == body)
                #expect(opened.body.clipboard == kind)
            }
        }
    }

    @Test func reservedBitsSixAndSevenAreIgnoredButTheClipboardBitsAreNot() throws {
        let body = AdvertBody(typeHash: .none, revision: 1, flags: AdvertFlags(rawValue: 0xC0), clipboard: .image)
        let opened = try RingAdvert.open(advert(body), keys: keys, epoch: epoch, mask: keys.epochMaterial(epoch).mask)
        #expect(opened.body.flags == [])
        #expect(opened.body.clipboard == .image)
        #expect(ClipboardKind(flagsByte: 0x30) == .files)
        #expect(ClipboardKind(flagsByte: 0xCF) == nil)
    }

    @Test func matcherTellsBodiesThatDifferInTheClipboardApart() throws {
        var matcher = AdvertMatcher(epoch: epoch)
        matcher.setMember(member, secret: memberSecret)
        let first = try matcher.receive(advert(AdvertBody.presence(revision: 1, clipboard: .text)))
        #expect(first.body.clipboard == .text)
        #expect(throws: WireError.conflictingSequence) {
            _ = try matcher.receive(advert(AdvertBody.presence(revision: 1, clipboard: .image)))
        }
        // Reserved bits 6–7 alone do not make another body.
        #expect(try matcher.receive(advert(AdvertBody(typeHash: .none, revision: 1, flags: AdvertFlags(rawValue: 0x80), clipboard: .text))).outcome == .sameRevision)
    }

    @Test func framesRoundTrip() throws {
        let offer = try ClipboardOffer(offerID: 42, kind: .files, expiresIn: 3_600, account: "ädа",
                                       items: [ClipboardItem(mediaType: "text/uri-list", size: ClipboardItem.maxSize),
                                               ClipboardItem(mediaType: "x-special/gnome-copied-files", size: 0)])
        #expect(try ClipboardOffer(payload: offer.payload) == offer)
        let maximal = try ClipboardOffer(offerID: .max, kind: .image, expiresIn: 1, account: String(repeating: "a", count: 64),
                                         items: (0..<16).map { try ClipboardItem(mediaType: String(repeating: "x", count: 252) + String(format3: $0), size: 1) })
        #expect(maximal.payload.count == ClipboardOffer.maxByteCount)
        #expect(try Frame.decode(Frame(type: .clipboardOffer, requestID: 1, payload: maximal.payload).encoded()).payload == maximal.payload)
        let request = try ClipboardDataRequest(offerID: 7, mediaType: String(repeating: "y", count: 255), offset: 3)
        #expect(request.payload.count == ClipboardDataRequest.maxByteCount)
        #expect(try ClipboardDataRequest(payload: request.payload) == request)
        let data = try ClipboardData(offset: 0, total: 65_536, data: Array(repeating: 1, count: 65_536))
        #expect(try ClipboardData(payload: data.payload) == data)
        #expect(data.isLast)
    }

    @Test func textRules() {
        #expect(throws: WireError.malformed("media type characters")) { try ClipboardItem(mediaType: "text/plain; charset=utf-8", size: 1) }
        #expect(throws: WireError.malformed("media type length")) { try ClipboardItem(mediaType: String(repeating: "a", count: 256), size: 1) }
        #expect(throws: WireError.malformed("account characters")) {
            try ClipboardOffer(offerID: 1, kind: .text, expiresIn: 1, account: "a\u{7F}", items: [ClipboardItem(mediaType: "a", size: 1)])
        }
        #expect(throws: WireError.malformed("account length")) {
            try ClipboardOffer(offerID: 1, kind: .text, expiresIn: 1, account: String(repeating: "é", count: 33), items: [ClipboardItem(mediaType: "a", size: 1)])
        }
        #expect(throws: WireError.malformed("expiry")) {
            try ClipboardOffer(offerID: 1, kind: .text, expiresIn: 3_601, account: "a", items: [ClipboardItem(mediaType: "a", size: 1)])
        }
    }

    @Test func dataCheckFollowsTheOfferedSizeInOrder() throws {
        let item = try ClipboardItem(mediaType: "image/png", size: 100_000)
        var check = ClipboardDataCheck(request: try ClipboardDataRequest(offerID: 1, mediaType: "image/png", offset: 0), offered: item)
        #expect(throws: WireError.malformed("data out of order")) { try check.accept(ClipboardData(offset: 10, total: 100_000, data: [1])) }
        #expect(throws: WireError.malformed("total is not the offered size")) { try check.accept(ClipboardData(offset: 0, total: 99_999, data: [1])) }
        try check.accept(ClipboardData(offset: 0, total: 100_000, data: Array(repeating: 0, count: 65_536)))
        #expect(!check.isComplete)
        try check.accept(ClipboardData(offset: 65_536, total: 100_000, data: Array(repeating: 0, count: 100_000 - 65_536)))
        #expect(check.isComplete)
        #expect(throws: WireError.unexpectedMessage("ClipboardData after the last")) { try check.accept(ClipboardData(offset: 100_000, total: 100_000, data: [])) }
        var empty = ClipboardDataCheck(request: try ClipboardDataRequest(offerID: 1, mediaType: "a", offset: 0), offered: try ClipboardItem(mediaType: "a", size: 0))
        try empty.accept(ClipboardData(offset: 0, total: 0, data: []))
        #expect(empty.isComplete)
    }

    @Test func shelfOffersExpiresAndAnswers() throws {
        var shelf = ClipboardShelf()
        #expect(shelf.kind == nil)
        guard case .failure(let none) = shelf.answerOffer(nowSeconds: 0) else { Issue.record("offer without a copy"); return }
        #expect(none.code == .unknownActivity)
        let items = [try ClipboardItem(mediaType: "text/plain;charset=utf-8", size: 5)]
        try shelf.offer(uid: 1000, account: "ada", kind: .text, items: items, offerID: 11, nowSeconds: 1_000)
        #expect(shelf.kind == .text)
        #expect(shelf.nextDeadline == 1_120)
        guard case .success(let offer) = shelf.answerOffer(nowSeconds: 1_030) else { Issue.record("no offer"); return }
        #expect(offer.expiresIn == 90 && offer.offerID == 11 && offer.account == "ada" && offer.items == items)
        guard case .success(let served) = shelf.answerData(try ClipboardDataRequest(offerID: 11, mediaType: "text/plain;charset=utf-8", offset: 5), nowSeconds: 1_030)
        else { Issue.record("not served"); return }
        #expect(served.copy.uid == 1000 && served.item.size == 5)
        for (request, message) in [(try ClipboardDataRequest(offerID: 12, mediaType: "text/plain;charset=utf-8", offset: 0), "clipboard changed"),
                                   (try ClipboardDataRequest(offerID: 11, mediaType: "image/png", offset: 0), "type not offered"),
                                   (try ClipboardDataRequest(offerID: 11, mediaType: "text/plain;charset=utf-8", offset: 6), "offset beyond the item")] {
            guard case .failure(let error) = shelf.answerData(request, nowSeconds: 1_030) else { Issue.record("served \(request)"); continue }
            #expect(error.message == message)
        }
        // A new copy replaces the old: its id is no longer answered.
        try shelf.offer(uid: 1000, account: "ada", kind: .image, items: [try ClipboardItem(mediaType: "image/png", size: 9)], expiresIn: 10,
                        offerID: 12, nowSeconds: 1_040)
        guard case .failure = shelf.answerData(try ClipboardDataRequest(offerID: 11, mediaType: "text/plain;charset=utf-8", offset: 0), nowSeconds: 1_040)
        else { Issue.record("old copy served"); return }
        let result1 = shelf.expire(nowSeconds: 1_049)
        #expect(!result1)
        guard case .failure = shelf.answerOffer(nowSeconds: 1_050) else { Issue.record("expired offer answered"); return }
        let result2 = shelf.expire(nowSeconds: 1_050)
        #expect(result2)
        #expect(shelf.kind == nil && shelf.nextDeadline == nil)
    }

    @Test func shelfRecordsWhoAskedAndWherePastesWentPerCopyAndCountsPerAccount() throws {
        var shelf = ClipboardShelf()
        // Nothing on the shelf: nothing recorded, nothing counted.
        shelf.recordOfferAnswered(to: "beta")
        #expect(shelf.answered.isEmpty)
        let text = try ClipboardItem(mediaType: "text/plain;charset=utf-8", size: 5)
        try shelf.offer(uid: 1000, account: "ada", kind: .text, items: [text], offerID: 1, nowSeconds: 0)
        shelf.recordOfferAnswered(to: "beta")
        shelf.recordOfferAnswered(to: "gamma")
        shelf.recordOfferAnswered(to: "beta")
        #expect(shelf.copy?.askedBy == ["beta", "gamma"])
        #expect(shelf.copy?.pastes == [])
        shelf.recordPaste(of: text, to: "gamma")
        #expect(shelf.copy?.pastes == [ClipboardPaste(device: "gamma", mediaType: "text/plain;charset=utf-8", size: 5)])
        #expect(shelf.answered[1000]?.offers == 3 && shelf.answered[1000]?.pastes == 1)
        // Only so many are kept by name; the rest are counted.
        for index in 0..<(ClipboardShelf.maxRecorded + 3) {
            shelf.recordOfferAnswered(to: "m\(index)")
            shelf.recordPaste(of: text, to: "m\(index)")
        }
        #expect(shelf.copy?.askedBy.count == ClipboardShelf.maxRecorded)
        #expect(shelf.copy?.pastes.count == ClipboardShelf.maxRecorded && shelf.copy?.morePastes == 4)
        #expect(shelf.answered[1000]?.pastes == UInt64(1 + ClipboardShelf.maxRecorded + 3))
        // A new copy starts with nobody; the account's counts stay, another account has its own.
        try shelf.offer(uid: 1001, account: "bob", kind: .text, items: [text], offerID: 2, nowSeconds: 10)
        #expect(shelf.copy?.askedBy == [] && shelf.copy?.pastes == [] && shelf.copy?.morePastes == 0)
        shelf.recordOfferAnswered(to: "beta")
        #expect(shelf.answered[1001]?.offers == 1 && shelf.answered[1001]?.pastes == 0)
        #expect(shelf.answered[1000]?.offers == UInt64(3 + ClipboardShelf.maxRecorded + 3))
    }

    @Test func shelfClampsExpiryAndWithdrawsOnlyItsOwnersCopy() throws {
        var shelf = ClipboardShelf()
        try shelf.offer(uid: 1000, account: "ada", kind: .text, items: [try ClipboardItem(mediaType: "a", size: 1)], expiresIn: 0, offerID: 1, nowSeconds: 0)
        #expect(shelf.nextDeadline == 1)
        try shelf.offer(uid: 1000, account: "ada", kind: .text, items: [try ClipboardItem(mediaType: "a", size: 1)], expiresIn: 9_999, offerID: 2, nowSeconds: 0)
        #expect(shelf.nextDeadline == 3_600)
        let result3 = shelf.withdraw(uid: 1001)
        #expect(!result3)
        #expect(shelf.kind == .text)
        let result4 = shelf.withdraw(uid: 1000)
        #expect(result4)
        #expect(shelf.kind == nil)
        // Nothing that could not be answered goes on the shelf.
        #expect(throws: WireError.self) { try shelf.offer(uid: 1000, account: "a/b", kind: .text, items: [try ClipboardItem(mediaType: "a", size: 1)], offerID: 3, nowSeconds: 0) }
        #expect(shelf.kind == nil)
    }

    @Test func watchAsksOncePerRevisionAndTakesEachOfferOnce() throws {
        var watch = ClipboardWatch()
        let result5 = watch.hear(member, kind: nil, revision: 1)
        #expect(result5 == nil)
        let result6 = watch.hear(member, kind: .text, revision: 2)
        #expect(result6 == .ask(member))
        let resighting = watch.hear(member, kind: .text, revision: 2)  // a re-sighting
        #expect(resighting == nil)
        let offer = try ClipboardOffer(offerID: 5, kind: .text, expiresIn: 120, account: "ada", items: [ClipboardItem(mediaType: "a", size: 1)])
        let result7 = watch.answered(member, offer: offer)
        #expect(result7)
        // The activity changed (a new revision), the copy did not: asked again, not taken again.
        let result8 = watch.hear(member, kind: .text, revision: 3)
        #expect(result8 == .ask(member))
        let result9 = watch.answered(member, offer: offer)
        #expect(!result9)
        // The same kind copied again: a new revision and a new id.
        let result10 = watch.hear(member, kind: .text, revision: 4)
        #expect(result10 == .ask(member))
        let result11 = watch.answered(member, offer: try ClipboardOffer(offerID: 6, kind: .text, expiresIn: 120, account: "ada", items: offer.items))
        #expect(result11)
        let result12 = watch.hear(other, kind: .image, revision: 4)
        #expect(result12 == .ask(other))
        let result13 = watch.hear(member, kind: nil, revision: 5)
        #expect(result13 == .withdrawn(member))
        let result14 = watch.hear(member, kind: nil, revision: 6)
        #expect(result14 == nil)
        let result15 = watch.forget(other)
        #expect(result15 == .withdrawn(other))
        let result16 = watch.forget(other)
        #expect(result16 == nil)
    }

    @Test func watchForgetsAnOfferTheMemberNoLongerHas() throws {
        var watch = ClipboardWatch()
        let result17 = watch.hear(member, kind: .text, revision: 2)
        #expect(result17 == .ask(member))
        let offer = try ClipboardOffer(offerID: 5, kind: .text, expiresIn: 120, account: "ada", items: [ClipboardItem(mediaType: "a", size: 1)])
        let result18 = watch.answered(member, offer: offer)
        #expect(result18)
        let result19 = watch.answeredNothing(member)
        #expect(result19 == .withdrawn(member))
        let result20 = watch.answeredNothing(member)
        #expect(result20 == nil)
        // Its re-sightings do not ask again; its next revision does.
        let result21 = watch.hear(member, kind: .text, revision: 2)
        #expect(result21 == nil)
        let result22 = watch.hear(member, kind: .text, revision: 3)
        #expect(result22 == .ask(member))
    }
}

extension ClipboardTests {
    @Test func aQuestionWithoutAnswerIsAskedAgainAtMostThreeTimesPerRevision() {
        var watch = ClipboardWatch()
        var asked = 0
        for _ in 0..<10 {
            if watch.hear(member, kind: .image, revision: 9) == .ask(member) {
                asked += 1
                watch.askFailed(member)
            }
        }
        #expect(asked == ClipboardWatch.askAttempts)
        // A re-sighting while a question is out (no failure reported yet) asks nothing more.
        var other = ClipboardWatch()
        let first = other.hear(member, kind: .text, revision: 1)
        let again = other.hear(member, kind: .text, revision: 1)
        #expect(first == .ask(member) && again == nil)
        // An answer ends the retries.
        other.askFailed(member)
        let retried = other.hear(member, kind: .text, revision: 1)
        #expect(retried == .ask(member))
        _ = other.answeredNothing(member)
        let settled = other.hear(member, kind: .text, revision: 1)
        #expect(settled == nil)
    }

    @Test func offerFieldsAreCheckedInWireOrder() throws {
        // Bad expiry and a bad account: the expiry is read first.
        let payload: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0] + [1, 0x61, 0x00]
        #expect(throws: WireError.malformed("expiry")) { try ClipboardOffer(payload: payload) }
        // An account length over 64 is refused before its bytes are read.
        #expect(throws: WireError.malformed("account length")) { try ClipboardOffer(payload: [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 65]) }
        // A byte outside printable ASCII in a media type, UTF-8 or not.
        for byte: UInt8 in [0x80, 0xC3, 0x20] {
            let item: [UInt8] = [1, byte] + [0, 0, 0, 0, 0, 0, 0, 1]
            #expect(throws: WireError.malformed("media type characters")) {
                try ClipboardOffer(payload: [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0x61, 1] + item)
            }
        }
        #expect(throws: WireError.malformed("account not UTF-8")) { try ClipboardOffer(payload: [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0xFF]) }
        // A zero-size item is an item.
        let empty = try ClipboardOffer(offerID: 1, kind: .text, expiresIn: 5, account: "a", items: [ClipboardItem(mediaType: "text/plain", size: 0)])
        #expect(try ClipboardOffer(payload: empty.payload) == empty)
    }
}

private extension String {
    init(format3 value: Int) {
        let digits = String(value)
        self = String(repeating: "0", count: 3 - digits.count) + digits
    }
}
