// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
import BatonCore
import BatonCrypto

@Suite("On-air planner")
struct OnAirPlannerTests {
    let now = epochStart
    let nextEpoch = epochStart + Protocol.epochSeconds

    func planner(radio: Bool = true, others: Bool = false) -> OnAirPlanner {
        OnAirPlanner(sender: AdvertSender(secret: secret(1), restored: nil), hasRadio: radio, ringHasOtherMembers: others)
    }

    func pairingAdvert(_ byte: UInt8, psm: UInt16? = 0x81) -> PairingAdvert {
        try! PairingAdvert(sessionID: [UInt8](repeating: byte, count: 8), tcpPublished: true, psm: psm, name: "alpha")
    }

    /// Persist actions come before the advert they cover; returns the ring bytes advertised.
    func ringBytes(_ actions: [OnAirPlanner.Action], connectable: Bool = false) -> [UInt8]? {
        guard actions.count == 2, case .persist = actions[0], case .advertiseRing(let bytes, let flag) = actions[1], flag == connectable else { return nil }
        return bytes
    }

    /// What the radio does with the publications book's answer (RadioService's `air`).
    func carry(_ air: PublicationBook.Air, on p: inout OnAirPlanner) -> [OnAirPlanner.Action] {
        switch air {
        case .activity(let content): p.publish(content, nowSeconds: now)
        case .presence: p.withdraw(nowSeconds: now)
        case .unchanged: []
        }
    }

    func record(_ activityType: String) throws -> ActivityRecord {
        try ActivityRecord(activityType: activityType, title: "", userInfo: [:], webpageURL: nil, version: 1, revision: 1)
    }

    func onlyPersist(_ actions: [OnAirPlanner.Action]) -> Bool {
        !actions.isEmpty && actions.allSatisfy { if case .persist = $0 { true } else { false } }
    }

    @Test("A ring of one advertises nothing, not even what it publishes (§4.2); a member joining puts it on the air")
    func aloneIsSilent() throws {
        var p = planner()
        #expect(p.radioStarted(nowSeconds: now) == [])
        #expect(p.onAir == .nothing)
        // Publishing while alone (through the book, as the radio does): a new revision, persisted,
        // nothing sealed or sent.
        var book = PublicationBook()
        let actions = carry(book.publish(try record("org.example.edit"), uid: 1000), on: &p)
        #expect(actions == [.persist(p.sender.counters, p.sender.bootMark)] && p.sender.counters.revision == 1)
        #expect(p.sender.counters.nextSequence == 0 && p.onAir == .nothing)
        #expect(book.current?.uid == 1000 && p.sender.content == AdvertContent(activityType: "org.example.edit"))
        #expect(p.tick(nowSeconds: nextEpoch) == [])
        // A member joins: the current content goes out at once, without a new revision.
        let bytes = try #require(ringBytes(p.ringMembersChanged(hasOthers: true, nowSeconds: nextEpoch)))
        #expect(p.onAir == .ring(bytes, connectable: false))
        #expect(p.sender.content == AdvertContent(activityType: "org.example.edit") && p.sender.counters.revision == 1)
    }

    @Test("With other members the radio carries presence from the start, and again after a withdraw")
    func presenceWithMembers() throws {
        var p = planner(others: true)
        #expect(ringBytes(p.radioStarted(nowSeconds: now)) != nil)
        #expect(p.sender.content == .presence)
        var book = PublicationBook()
        #expect(ringBytes(carry(book.publish(try record("org.example.t"), uid: 1000), on: &p)) != nil)
        let revision = p.sender.counters.revision
        #expect(ringBytes(carry(book.withdraw(uid: 1000), on: &p)) != nil)
        #expect(p.sender.content == .presence && p.sender.counters.revision == Revision.next(revision))
        #expect(book.current == nil)
        // Publishing the same content again still makes a new revision (the activity changed).
        #expect(ringBytes(p.publish(AdvertContent(activityType: "t"), nowSeconds: now)) != nil)
        #expect(ringBytes(p.publish(AdvertContent(activityType: "t"), nowSeconds: now)) != nil)
        #expect(p.publish(AdvertContent(activityType: "t"), changed: false, nowSeconds: now) == [])
    }

    @Test("Gaining a member starts presence; losing the last one stops the ring advert (§4.2)")
    func membersChange() {
        var p = planner()
        #expect(ringBytes(p.ringMembersChanged(hasOthers: true, nowSeconds: now)) != nil)
        #expect(p.ringMembersChanged(hasOthers: true, nowSeconds: now) == [])
        #expect(p.ringMembersChanged(hasOthers: false, nowSeconds: now) == [.stop])
        #expect(p.onAir == .nothing && p.sender.currentAdvert == nil)
        #expect(p.ringMembersChanged(hasOthers: false, nowSeconds: now) == [])
        // Silent again: a publish only persists, a tick does nothing.
        #expect(onlyPersist(p.publish(AdvertContent(activityType: "t"), nowSeconds: now)))
        #expect(p.tick(nowSeconds: nextEpoch) == [])
        // With an activity published, joining puts the activity (not presence) on the air.
        var q = planner()
        _ = q.publish(AdvertContent(activityType: "t"), nowSeconds: now)
        #expect(ringBytes(q.ringMembersChanged(hasOthers: true, nowSeconds: now)) != nil)
        #expect(q.sender.content == AdvertContent(activityType: "t"))
    }

    @Test("The last member leaving while a pairing advert holds the air: the pairing advert stays, no ring advert after it")
    func lastMemberLeavesWhilePairing() {
        var p = planner(others: true)
        _ = p.radioStarted(nowSeconds: now)
        let advert = pairingAdvert(1)
        _ = p.pairingStartedWaiting(advert)
        #expect(p.ringMembersChanged(hasOthers: false, nowSeconds: now) == [])
        #expect(p.onAir == .pairing(advert))
        #expect(p.pairingStoppedWaiting(sessionID: advert.sessionID, nowSeconds: now) == [.stop])
        #expect(p.onAir == .nothing)
    }

    @Test("Without a radio only counters are kept")
    func noRadio() {
        var p = planner(radio: false, others: true)
        #expect(p.radioStarted(nowSeconds: now) == [])
        let actions = p.publish(AdvertContent(activityType: "t"), nowSeconds: now)
        #expect(actions == [.persist(p.sender.counters, p.sender.bootMark)] && p.sender.counters.revision == 1)
        #expect(p.sender.counters.nextSequence == 0)  // nothing was sealed
        #expect(p.tick(nowSeconds: nextEpoch) == [])
        #expect(p.pairingStartedWaiting(pairingAdvert(1)) == [])
        #expect(p.setRingAdvertConnectable(true, nowSeconds: now) == [])
        #expect(p.stop() == [])
    }

    @Test("Epoch ticks reseal; a tick inside the epoch does nothing")
    func ticks() {
        var p = planner(others: true)
        let first = ringBytes(p.radioStarted(nowSeconds: now))
        #expect(p.tick(nowSeconds: now + 1) == [])
        let second = ringBytes(p.tick(nowSeconds: nextEpoch))
        #expect(second != nil && second != first)
    }

    @Test("While a pairing advert is on the air the ring advert waits; counters are still persisted")
    func pairingHoldsTheAir() throws {
        var p = planner(others: true)
        let before = try #require(ringBytes(p.radioStarted(nowSeconds: now)))
        let advert = pairingAdvert(1)
        #expect(p.pairingStartedWaiting(advert) == [.advertisePairing(advert, connectable: true)])
        #expect(p.onAir == .pairing(advert) && p.ringAdvertWaits && p.waitingSessionIDs == [advert.sessionID])
        #expect(onlyPersist(p.tick(nowSeconds: nextEpoch)))
        #expect(onlyPersist(p.publish(AdvertContent(activityType: "t"), nowSeconds: nextEpoch)))
        #expect(onlyPersist(p.rotateSecret(secret(1, generation: 2), nowSeconds: nextEpoch)))
        #expect(p.onAir == .pairing(advert))
        // Back: the newest sealed bytes, without sealing again (no new nonce, no persist).
        let sealed = try #require(p.sender.currentAdvert)
        #expect(sealed != before)
        #expect(p.pairingStoppedWaiting(sessionID: advert.sessionID, nowSeconds: nextEpoch) == [.advertiseRing(sealed, connectable: false)])
        #expect(!p.ringAdvertWaits && p.onAir == .ring(sealed, connectable: false))
    }

    @Test("A pairing advert without a PSM is not connectable")
    func pairingWithoutPSM() {
        var p = planner()
        let advert = pairingAdvert(1, psm: nil)
        #expect(p.pairingStartedWaiting(advert) == [.advertisePairing(advert, connectable: false)])
    }

    @Test("With nothing to restore the radio stops, and presence follows when the ring has members")
    func restoreWithoutRingAdvert() {
        var p = planner()
        let advert = pairingAdvert(1)
        _ = p.pairingStartedWaiting(advert)
        #expect(p.pairingStoppedWaiting(sessionID: advert.sessionID, nowSeconds: now) == [.stop])
        #expect(p.onAir == .nothing)
        // Paired: the ring now has a member.
        #expect(ringBytes(p.ringMembersChanged(hasOthers: true, nowSeconds: now)) != nil)

        var q = planner(others: true)
        _ = q.pairingStartedWaiting(advert)
        let actions = q.pairingStoppedWaiting(sessionID: advert.sessionID, nowSeconds: now)
        #expect(actions.first == .stop && ringBytes(Array(actions.dropFirst())) != nil)
    }

    @Test("Several waiting sessions: the newest holds the air; when it ends the other takes it back")
    func severalSessions() throws {
        var p = planner(others: true)
        let ring = try #require(ringBytes(p.radioStarted(nowSeconds: now)))
        let a = pairingAdvert(1), b = pairingAdvert(2)
        _ = p.pairingStartedWaiting(a)
        _ = p.pairingStartedWaiting(b)
        #expect(p.pairingStoppedWaiting(sessionID: b.sessionID, nowSeconds: now) == [.advertisePairing(a, connectable: true)])
        let c = pairingAdvert(3)
        _ = p.pairingStartedWaiting(c)
        // The older one ending leaves the newest on the air.
        #expect(p.pairingStoppedWaiting(sessionID: a.sessionID, nowSeconds: now) == [])
        #expect(p.pairingStoppedWaiting(sessionID: [9], nowSeconds: now) == [])
        #expect(p.pairingStoppedWaiting(sessionID: c.sessionID, nowSeconds: now) == [.advertiseRing(ring, connectable: false)])
        #expect(p.pairingStoppedWaiting(sessionID: c.sessionID, nowSeconds: now) == [])
    }

    @Test("Connectability re-advertises the same bytes, and waits for a pairing advert to end")
    func connectable() throws {
        var p = planner(others: true)
        let ring = try #require(ringBytes(p.radioStarted(nowSeconds: now)))
        #expect(p.setRingAdvertConnectable(true, nowSeconds: now) == [.advertiseRing(ring, connectable: true)])
        #expect(p.setRingAdvertConnectable(true, nowSeconds: now) == [])
        #expect(ringBytes(p.tick(nowSeconds: nextEpoch), connectable: true) != nil)
        let advert = pairingAdvert(1)
        _ = p.pairingStartedWaiting(advert)
        #expect(p.setRingAdvertConnectable(false, nowSeconds: nextEpoch) == [])
        let current = try #require(p.sender.currentAdvert)
        #expect(p.pairingStoppedWaiting(sessionID: advert.sessionID, nowSeconds: nextEpoch) == [.advertiseRing(current, connectable: false)])
    }

    @Test("Stopping takes everything off the air")
    func stopping() {
        var p = planner(others: true)
        _ = p.radioStarted(nowSeconds: now)
        _ = p.pairingStartedWaiting(pairingAdvert(1))
        #expect(p.stop() == [.stop])
        #expect(p.onAir == .nothing && !p.ringAdvertWaits && p.sender.currentAdvert == nil)
        #expect(p.tick(nowSeconds: nextEpoch) == [])
    }
}

extension OnAirPlannerTests {
    /// What the ring advert on the air says, opened with the sender's keys.
    func opened(_ bytes: [UInt8], _ p: OnAirPlanner) throws -> AdvertBody {
        var matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: now))
        matcher.setMember(deviceID(1), secret: secret(1))
        return try matcher.receive(bytes).body
    }

    @Test("The clipboard's kind rides in every ring advert, a new copy is a new revision, and activities keep it")
    func clipboardKindInTheAdvert() throws {
        var p = planner(others: true)
        _ = p.radioStarted(nowSeconds: now)
        #expect(p.setClipboard(nil, nowSeconds: now) == [], "no copy before, none now: nothing changes")
        let first = try #require(ringBytes(p.setClipboard(.text, nowSeconds: now)))
        #expect(try opened(first, p).clipboard == .text)
        let revision = p.sender.counters.revision
        // The same kind copied again: a new revision, so receivers ask for the new offer.
        let again = try #require(ringBytes(p.setClipboard(.text, nowSeconds: now)))
        #expect(p.sender.counters.revision == revision &+ 1)
        #expect(try opened(again, p).clipboard == .text)
        // An activity published and withdrawn keeps the clipboard in the advert.
        let published = try #require(ringBytes(p.publish(AdvertContent(activityType: "org.example.edit"), nowSeconds: now)))
        let body = try opened(published, p)
        #expect(body.isActivity && body.clipboard == .text)
        let presence = try #require(ringBytes(p.withdraw(nowSeconds: now)))
        #expect(try opened(presence, p).clipboard == .text && !(try opened(presence, p).isActivity))
        // The copy taken back or expired: the kind goes, with a new revision.
        let gone = try #require(ringBytes(p.setClipboard(nil, nowSeconds: now)))
        #expect(try opened(gone, p).clipboard == nil)
        #expect(p.clipboard == nil)
    }

    @Test("A ring of one puts no clipboard on the air either, but keeps the kind for when a member joins")
    func clipboardAloneIsSilent() throws {
        var p = planner()
        _ = p.radioStarted(nowSeconds: now)
        #expect(onlyPersist(p.setClipboard(.image, nowSeconds: now)))
        #expect(p.onAir == .nothing)
        let bytes = try #require(ringBytes(p.ringMembersChanged(hasOthers: true, nowSeconds: now)))
        #expect(try opened(bytes, p).clipboard == .image)
    }
}
