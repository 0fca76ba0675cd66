// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Testing

@Suite("BatonCore: edit sessions, revision checks and claim journals (§6.6)")
struct EditSessionTests {
    let a = deviceID(0xA), b = deviceID(0xB), c = deviceID(0xC)
    func digest(_ n: UInt8) -> [UInt8] { SHA256.hash([n]) }
    func claim(_ id: String = "doc", base: UInt64) throws -> EditSessionClaim { try EditSessionClaim(documentID: id, baseRevision: base) }
    func request(_ claim: EditSessionClaim, id: UInt32) -> Frame { Frame(type: .claimEditSession, requestID: id, payload: claim.payload) }
    func grant(of frame: Frame) throws -> DocumentRevision {
        #expect(frame.type == .editSessionGrant)
        return try EditSessionGrant(payload: frame.payload).granted
    }
    func errorCode(of frame: Frame) throws -> ErrorFrame.Code? {
        frame.type == .error ? try ErrorFrame(payload: frame.payload).code : nil
    }

    // MARK: Frames

    @Test func framesRoundTripAndRefuseBadPayloads() throws {
        let sample = try claim("note-1", base: 3)
        #expect(try EditSessionClaim(payload: sample.payload) == sample)
        #expect(sample.payload.count == 1 + 6 + 8)
        let longest = try claim(String(repeating: "d", count: 255), base: .max)
        #expect(longest.payload.count == FrameType.claimEditSession.maxPayload)
        #expect(throws: WireError.malformed("document id length")) { try EditSessionClaim(payload: [0] + [UInt8](repeating: 0, count: 8)) }
        #expect(throws: WireError.truncated) { try EditSessionClaim(payload: [3, 0x61, 0x62, 0x63, 0, 0]) }
        #expect(throws: WireError.trailingBytes) { try EditSessionClaim(payload: sample.payload + [0]) }
        #expect(throws: WireError.malformed("text not UTF-8")) { try EditSessionClaim(payload: [1, 0xFF] + [UInt8](repeating: 0, count: 8)) }
        let granted = EditSessionGrant(granted: try DocumentRevision(revision: 2, digest: digest(1)))
        #expect(try EditSessionGrant(payload: granted.payload) == granted)
        #expect(granted.payload.count == FrameType.editSessionGrant.maxPayload)
        #expect(throws: WireError.malformed("revision 0")) { try EditSessionGrant(payload: [UInt8](repeating: 0, count: 8) + digest(1)) }
        #expect(throws: WireError.truncated) { try EditSessionGrant(payload: Array(granted.payload.dropLast())) }
        #expect(ErrorFrame.Code(rawValue: 8) == .sessionBusy && ErrorFrame.Code(rawValue: 9) == .documentConflict)
    }

    // MARK: The book

    @Test func onlyTheOwnerCommitsAndEachNewDigestIsTheNextRevision() throws {
        var book = EditSessionBook()
        #expect(try book.commitLocal("doc", digest: digest(1)).revision == 1)
        #expect(try book.commitLocal("doc", digest: digest(1)).revision == 1)
        #expect(try book.commitLocal("doc", digest: digest(2)).revision == 2)
        #expect(try book.release(claim(base: 0), to: b).revision == 2)
        #expect(book.owner(of: "doc") == .peer(b))
        #expect(throws: EditSessionError.notOwner(.peer(b))) { try book.commitLocal("doc", digest: digest(3)) }
        #expect(throws: EditSessionError.invalidDigest) { try book.commitLocal("other", digest: [1]) }
    }

    @Test func releaseRefusesUnknownDocumentsOtherHoldersAndClaimersAhead() throws {
        var book = EditSessionBook()
        #expect(throws: EditSessionError.unknownDocument) { try book.release(claim(base: 0), to: b) }
        try book.commitLocal("doc", digest: digest(1))
        #expect(throws: EditSessionError.conflict(local: 1, expected: 2)) { try book.release(claim(base: 2), to: b) }
        #expect(book.owner(of: "doc") == .thisMachine)
        _ = try book.release(claim(base: 1), to: b)
        // Released to b: c is told it is held elsewhere; b asking again gets the same revision.
        #expect(throws: EditSessionError.notOwner(.peer(b))) { try book.release(claim(base: 0), to: c) }
        #expect(try book.release(claim(base: 1), to: b).revision == 1)
    }

    @Test func importIsOnceAndRefusesACopyThatChangedMeanwhile() throws {
        var book = EditSessionBook()
        let r1 = try DocumentRevision(revision: 1, digest: digest(1))
        let r2 = try DocumentRevision(revision: 2, digest: digest(2))
        #expect(throws: EditSessionError.conflict(local: 0, expected: 4)) { try book.importGranted("doc", base: 4, granted: r1, from: a) }
        #expect(try book.importGranted("doc", base: 0, granted: r1, from: a) == .imported)
        #expect(try book.importGranted("doc", base: 0, granted: r1, from: a) == .alreadyApplied)
        #expect(book.owner(of: "doc") == .thisMachine)
        // Owned and possibly edited here: a newer grant from elsewhere never overwrites it.
        #expect(throws: EditSessionError.conflict(local: 1, expected: 1)) { try book.importGranted("doc", base: 1, granted: r2, from: a) }
        _ = try book.release(claim(base: 0), to: a)
        // The copy here is at 1; a grant for a claim made at 0, or one going backwards, is refused.
        #expect(throws: EditSessionError.conflict(local: 1, expected: 0)) { try book.importGranted("doc", base: 0, granted: r2, from: a) }
        #expect(throws: EditSessionError.conflict(local: 1, expected: 1)) {
            try book.importGranted("doc", base: 1, granted: try DocumentRevision(revision: 1, digest: digest(9)), from: a)
        }
        #expect(try book.importGranted("doc", base: 1, granted: r2, from: a) == .updated)
        #expect(book.ledger("doc")?.current == r2)
    }

    @Test func theBookIsBoundedAndForgetsOnlyWhatItOwns() throws {
        var book = EditSessionBook(documentLimit: 2)
        try book.commitLocal("one", digest: digest(1))
        try book.commitLocal("two", digest: digest(2))
        #expect(throws: EditSessionError.tooManyDocuments(limit: 2)) { try book.commitLocal("three", digest: digest(3)) }
        #expect(throws: EditSessionError.tooManyDocuments(limit: 2)) {
            try book.importGranted("three", base: 0, granted: try DocumentRevision(revision: 1, digest: digest(3)), from: a)
        }
        _ = try book.release(claim("two", base: 0), to: b)
        #expect(throws: EditSessionError.notOwner(.peer(b))) { try book.forget("two") }
        try book.forget("one")
        try book.commitLocal("three", digest: digest(3))
        #expect(book.ledgers.keys.sorted() == ["three", "two"])
    }

    // MARK: Journals

    @Test func appliedClaimsReplayTheGrantRefuseAReusedIdAndStayBounded() throws {
        var applied = AppliedClaims(capacity: 2)
        let first = request(try claim(base: 0), id: 5)
        let grant = EditSessionGrant(granted: try DocumentRevision(revision: 1, digest: digest(1)))
        #expect(applied.lookup(first, from: b) == .fresh)
        applied.record(first, from: b, grant: grant)
        #expect(applied.lookup(first, from: b) == .replay(grant))
        #expect(applied.lookup(first, from: c) == .fresh)
        #expect(applied.lookup(request(try claim(base: 1), id: 5), from: b) == .mismatch)
        applied.record(request(try claim(base: 0), id: 6), from: b, grant: grant)
        applied.record(request(try claim(base: 0), id: 7), from: b, grant: grant)
        #expect(applied.entries.count == 2)
        #expect(applied.lookup(first, from: b) == .fresh)
    }

    @Test func aPendingClaimIsReplayedUnchangedBeforeAnyOther() throws {
        var queue = ClaimQueue(capacity: 2)
        let started = try queue.start(try claim(base: 0), from: a, requestID: 40)
        guard case .send(let pending) = started else { Issue.record("expected a new claim"); return }
        #expect(pending.frame == request(try claim(base: 0), id: 40))
        // A later claim of the same document (another id, another base) sends the first one again.
        #expect(try queue.start(try claim(base: 3), from: a, requestID: 41) == .replay(pending))
        #expect(throws: ClaimQueue.Refusal.pendingElsewhere(pending)) { try queue.start(try claim(base: 0), from: c, requestID: 42) }
        #expect(queue.replays(for: a) == [pending])
        #expect(queue.replays(for: c).isEmpty)
        #expect(queue.mayImport("doc", answering: 40, from: a))
        #expect(!queue.mayImport("doc", answering: 41, from: a))
        #expect(!queue.mayImport("doc", answering: 40, from: c))
        _ = try queue.start(try claim("other", base: 0), from: a, requestID: 43)
        #expect(throws: ClaimQueue.Refusal.full(limit: 2)) { try queue.start(try claim("third", base: 0), from: a, requestID: 44) }
        queue.settle("doc")
        #expect(!queue.mayImport("doc", answering: 40, from: a))
        guard case .send = try queue.start(try claim(base: 3), from: a, requestID: 45) else { Issue.record("expected a new claim"); return }
    }

    // MARK: Both sides together

    @Test func aDocumentGoesToBAndBackAndOwnershipFollows() throws {
        var ownerA = EditSessionKeeper(), ownerB = EditSessionKeeper()
        try ownerA.book.commitLocal("doc", digest: digest(1))
        // B claims with no copy; A saves (digest 2) and releases at revision 2.
        let toA = request(try claim(base: 0), id: 1)
        guard case .save(let asked) = ownerA.screen(toA, from: b) else { Issue.record("expected a save"); return }
        let granted = try grant(of: ownerA.grant(toA, claim: asked, from: b, savedDigest: digest(2)))
        #expect(granted.revision == 2)
        #expect(try ownerB.book.importGranted("doc", base: 0, granted: granted, from: a) == .imported)
        #expect(ownerA.book.owner(of: "doc") == .peer(b) && ownerB.book.owner(of: "doc") == .thisMachine)
        // A's app cannot save while B owns it.
        #expect(throws: EditSessionError.notOwner(.peer(b))) { try ownerA.book.commitLocal("doc", digest: digest(7)) }
        // B edits twice, then A claims it back from revision 2.
        try ownerB.book.commitLocal("doc", digest: digest(3))
        let toB = request(try claim(base: 2), id: 9)
        guard case .save(let askedB) = ownerB.screen(toB, from: a) else { Issue.record("expected a save"); return }
        let back = try grant(of: ownerB.grant(toB, claim: askedB, from: a, savedDigest: digest(4)))
        #expect(back.revision == 4)
        #expect(try ownerA.book.importGranted("doc", base: 2, granted: back, from: b) == .updated)
        #expect(ownerA.book.owner(of: "doc") == .thisMachine && ownerB.book.owner(of: "doc") == .peer(a))
    }

    @Test func aLostGrantIsReplayedAndAppliedOnce() throws {
        var owner = EditSessionKeeper()
        try owner.book.commitLocal("doc", digest: digest(1))
        let frame = request(try claim(base: 0), id: 77)
        guard case .save(let asked) = owner.screen(frame, from: b) else { Issue.record("expected a save"); return }
        let sent = owner.grant(frame, claim: asked, from: b, savedDigest: digest(2))
        // The answer was lost; the same request comes again: the same grant, no second save.
        #expect(owner.screen(frame, from: b) == .answer(sent))
        #expect(owner.book.ledger("doc")?.current.revision == 2)
        var claimer = EditSessionBook()
        #expect(try claimer.importGranted("doc", base: 0, granted: try grant(of: sent), from: a) == .imported)
        #expect(try claimer.importGranted("doc", base: 0, granted: try grant(of: sent), from: a) == .alreadyApplied)
        // The same id with another payload is malformed and changes nothing.
        #expect(try errorCode(of: screenAnswer(owner, request(try claim(base: 1), id: 77), from: b)) == .malformed)
    }

    @Test func noSaveMeansNoReleaseAndRefusalsChangeNothing() throws {
        var owner = EditSessionKeeper()
        try owner.book.commitLocal("doc", digest: digest(1))
        let frame = request(try claim(base: 0), id: 3)
        let before = owner
        #expect(try errorCode(of: owner.grant(frame, claim: try claim(base: 0), from: b, savedDigest: nil)) == .sessionBusy)
        #expect(owner == before)
        #expect(try errorCode(of: screenAnswer(owner, request(try claim(base: 5), id: 4), from: b)) == .documentConflict)
        #expect(try errorCode(of: screenAnswer(owner, request(try claim("nothing", base: 0), id: 5), from: b)) == .unknownActivity)
        #expect(try errorCode(of: screenAnswer(owner, Frame(type: .claimEditSession, requestID: 6, payload: [9]), from: b)) == .malformed)
        guard case .save(let asked) = owner.screen(frame, from: b) else { Issue.record("expected a save"); return }
        _ = owner.grant(frame, claim: asked, from: b, savedDigest: digest(1))
        #expect(try errorCode(of: screenAnswer(owner, request(try claim(base: 0), id: 8), from: c)) == .sessionBusy)
        // The grant of an unchanged snapshot keeps its revision.
        #expect(owner.book.ledger("doc")?.current.revision == 1)
    }

    func screenAnswer(_ keeper: EditSessionKeeper, _ frame: Frame, from peer: DeviceID) -> Frame {
        guard case .answer(let answer) = keeper.screen(frame, from: peer) else { return frame }
        return answer
    }
}

extension EditSessionTests {
    @Test func aClaimerThatLostItsJournalIsGrantedTheSameRevisionWithoutASave() throws {
        var owner = EditSessionKeeper()
        try owner.book.commitLocal("doc", digest: digest(1))
        let first = request(try claim(base: 0), id: 1)
        guard case .save(let asked) = owner.screen(first, from: b) else { Issue.record("expected a save"); return }
        let granted = try grant(of: owner.grant(first, claim: asked, from: b, savedDigest: digest(2)))
        // b imported revision 2, then crashed before it could forget its claim... and lost that too:
        // it claims afresh from revision 2. No save is needed, and none would be accepted.
        let again = request(try claim(base: 2), id: 2)
        guard case .save(let second) = owner.screen(again, from: b) else { Issue.record("expected the claim to pass"); return }
        #expect(!owner.needsSave(second, from: b))
        #expect(try grant(of: owner.grant(again, claim: second, from: b, savedDigest: nil)) == granted)
        #expect(owner.book.ledger("doc")?.current.revision == 2)
    }
}
