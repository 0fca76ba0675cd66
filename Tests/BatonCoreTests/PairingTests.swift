// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

struct PairingHarness {
    var initiator: PairingSession
    var responder: PairingSession
    var codes: [String] = []
    var results: [PairingSession.Role: PairingResult] = [:]
    var failures: [PairingSession.Role: WireError] = [:]
    /// Every frame sent, by whom, in order.
    var sent: [(role: PairingSession.Role, frame: Frame)] = []

    static func local(_ name: String, seed: UInt8) -> LocalPairingInfo {
        let identity = try! Ed25519PrivateKey(seed: [UInt8](repeating: seed, count: 32))
        let own = try! RosterMember.signed(name: name, identity: identity, secret: chainedSecret(seed))
        return LocalPairingInfo(name: name, identityKey: identity, roster: Roster(version: 1, members: [own]))
    }

    init(random: SeededRandomFake, initiatorInfo: LocalPairingInfo = local("alpha", seed: 1), responderInfo: LocalPairingInfo = local("beta", seed: 2)) {
        let session = random.bytes(8)
        initiator = try! PairingSession(role: .initiator, sessionID: session, ephemeralKey: try! X25519PrivateKey(rawRepresentation: random.bytes(32)),
                                        nonce: random.bytes(16), local: initiatorInfo)
        responder = try! PairingSession(role: .responder, sessionID: session, ephemeralKey: try! X25519PrivateKey(rawRepresentation: random.bytes(32)),
                                        nonce: random.bytes(16), local: responderInfo)
    }

    /// Delivers frames back and forth until both sides are quiet.
    mutating func run(_ actions: [PairingSession.Action], from role: PairingSession.Role, now: Int64 = 0) {
        var queue = actions.map { (role, $0) }
        while !queue.isEmpty {
            let (sender, action) = queue.removeFirst()
            switch action {
            case .send(let frame):
                sent.append((sender, frame))
                // Every frame crosses the wire as bytes.
                let wire = try! Frame.decode(frame.encoded())
                if sender == .initiator { queue += responder.receive(wire, nowSeconds: now).map { (.responder, $0) } }
                else { queue += initiator.receive(wire, nowSeconds: now).map { (.initiator, $0) } }
            case .showCode(let code): codes.append(code)
            case .completed(let result): results[sender] = result
            case .failed(let error): failures[sender] = error
            }
        }
    }

    mutating func confirm(initiator a: Bool, responder b: Bool) {
        run(initiator.userConfirmed(a), from: .initiator)
        run(responder.userConfirmed(b), from: .responder)
    }
}

@Suite struct PairingTests {
    @Test func bothSidesShowTheSameCodeAndExchangeIdentities() throws {
        var h = PairingHarness(random: SeededRandomFake(seed: 11))
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        #expect(h.codes.count == 2)
        #expect(h.codes[0] == h.codes[1])
        #expect(h.codes[0].count == 6 && h.codes[0].allSatisfy(\.isNumber))
        // Both compute the second code (§7.1), from other bits of H than the first.
        let second = try #require(h.initiator.secondCode)
        #expect(second == h.responder.secondCode && second.count == 6 && second.allSatisfy(\.isNumber))
        #expect(second != h.codes[0])
        h.confirm(initiator: true, responder: true)
        let atInitiator = try #require(h.results[.initiator])
        let atResponder = try #require(h.results[.responder])
        #expect(atInitiator.peer.name == "beta")
        #expect(atResponder.peer.name == "alpha")
        #expect(atInitiator.peer.secret == chainedSecret(2))
        #expect(atResponder.peerRoster.members.count == 1)
        #expect(h.failures.isEmpty)
    }

    @Test func refusedCodePairsNothing() {
        var h = PairingHarness(random: SeededRandomFake(seed: 12))
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        h.confirm(initiator: true, responder: false)
        #expect(h.results.isEmpty)
        #expect(h.failures[.responder] == .rejected)
        #expect(h.failures[.initiator] == .rejected)
    }

    @Test func manInTheMiddleYieldsDifferentCodes() throws {
        // Mallory runs a responder towards the initiator and an initiator towards the responder.
        let random = SeededRandomFake(seed: 13)
        var h = PairingHarness(random: random)
        let mallory = PairingHarness.local("mallory", seed: 9)
        var towardsInitiator = try PairingSession(role: .responder, sessionID: h.initiator.sessionID,
                                                  ephemeralKey: try X25519PrivateKey(rawRepresentation: random.bytes(32)), nonce: random.bytes(16), local: mallory)
        var towardsResponder = try PairingSession(role: .initiator, sessionID: h.initiator.sessionID,
                                                  ephemeralKey: try X25519PrivateKey(rawRepresentation: random.bytes(32)), nonce: random.bytes(16), local: mallory)
        var codes: [String] = []
        func frames(_ actions: [PairingSession.Action]) -> [Frame] {
            actions.compactMap { if case .send(let f) = $0 { return f }; if case .showCode(let c) = $0 { codes.append(c) }; return nil }
        }
        // initiator ↔ mallory
        var toMallory = frames(h.initiator.start(nowSeconds: 0))
        while !toMallory.isEmpty {
            let back = frames(towardsInitiator.receive(toMallory.removeFirst(), nowSeconds: 0))
            for frame in back { toMallory += frames(h.initiator.receive(frame, nowSeconds: 0)) }
        }
        // mallory ↔ responder
        var toResponder = frames(towardsResponder.start(nowSeconds: 0))
        while !toResponder.isEmpty {
            let back = frames(h.responder.receive(toResponder.removeFirst(), nowSeconds: 0))
            for frame in back { toResponder += frames(towardsResponder.receive(frame, nowSeconds: 0)) }
        }
        #expect(h.initiator.code != nil && h.responder.code != nil)
        #expect(h.initiator.code != h.responder.code)
    }

    @Test func wrongRevealIsACommitMismatch() throws {
        var h = PairingHarness(random: SeededRandomFake(seed: 14))
        let commit = h.initiator.start(nowSeconds: 0)
        guard case .send(let commitFrame) = commit[0] else { Issue.record("no commit"); return }
        _ = h.responder.receive(commitFrame, nowSeconds: 0)
        let fakeReveal = Frame(type: .pairReveal, requestID: 0, payload: [UInt8](repeating: 9, count: 48))
        let actions = h.responder.receive(fakeReveal, nowSeconds: 0)
        #expect(actions.last == .failed(.commitMismatch))
        guard case .send(let errorFrame) = actions.first else { Issue.record("peer not told"); return }
        #expect(errorFrame.type == .error)
        // §7.2 Failures: code malformed, the failure's name as the message.
        #expect(try ErrorFrame(payload: errorFrame.payload) == ErrorFrame(code: .malformed, message: "commitMismatch"))
        #expect(h.responder.isFinished)
    }

    @Test func failuresTellThePeerTheirCodeAndName() {
        let expected: [(WireError, ErrorFrame.Code, String)] = [
            (.timedOut, .timedOut, "timedOut"), (.rejected, .notPermitted, "rejected"),
            (.unsupportedVersion(2), .unsupportedVersion, "unsupportedVersion"),
            (.payloadTooLarge(limit: 1, actual: 2), .payloadTooLarge, "payloadTooLarge"),
            (.commitMismatch, .malformed, "commitMismatch"), (.weakKey, .malformed, "weakKey"),
            (.badSignature, .malformed, "badSignature"), (.authenticationFailed, .malformed, "authenticationFailed"),
            (.replayedSequence, .malformed, "replayedSequence"), (.unexpectedMessage("x"), .malformed, "unexpectedMessage"),
            (.truncated, .malformed, "malformed"),
        ]
        for (error, code, message) in expected {
            #expect(PairingSession.errorFrame(for: error) == ErrorFrame(code: code, message: message), "\(error)")
        }
    }

    @Test func aPeersRefusalIsAnsweredWithNotPermitted() throws {
        var h = PairingHarness(random: SeededRandomFake(seed: 20))
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        let refusal = h.initiator.userConfirmed(false)
        #expect(refusal.count == 2 && refusal.last == .failed(.rejected))
        guard case .send(let confirm) = refusal.first else { Issue.record("no confirm"); return }
        let answer = h.responder.receive(confirm, nowSeconds: 0)
        guard case .send(let errorFrame) = answer.first else { Issue.record("peer not told"); return }
        #expect(try ErrorFrame(payload: errorFrame.payload) == ErrorFrame(code: .notPermitted, message: "rejected"))
        #expect(answer.last == .failed(.rejected))
    }

    @Test func timeoutFailsBothWays() {
        var h = PairingHarness(random: SeededRandomFake(seed: 15))
        _ = h.initiator.start(nowSeconds: 100)
        #expect(h.initiator.tick(nowSeconds: 219).isEmpty)
        #expect(h.initiator.tick(nowSeconds: 220).last == .failed(.timedOut))
    }

    @Test func tamperedSealedMessageFails() throws {
        var h = PairingHarness(random: SeededRandomFake(seed: 16))
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        let confirm = h.initiator.userConfirmed(true)
        guard case .send(var frame) = confirm.first else { Issue.record("no confirm"); return }
        frame.payload[frame.payload.count - 1] ^= 1
        #expect(h.responder.receive(frame, nowSeconds: 0).last == .failed(.authenticationFailed))
    }

    @Test func replayedSealedMessageFails() throws {
        var h = PairingHarness(random: SeededRandomFake(seed: 17))
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        let confirm = h.initiator.userConfirmed(true)
        guard case .send(let frame) = confirm.first else { Issue.record("no confirm"); return }
        _ = h.responder.receive(frame, nowSeconds: 0)
        #expect(h.responder.receive(frame, nowSeconds: 0).last == .failed(.replayedSequence))
    }

    @Test func outOfOrderFramesFail() {
        var h = PairingHarness(random: SeededRandomFake(seed: 18))
        let early = Frame(type: .pairReveal, requestID: 0, payload: [UInt8](repeating: 1, count: 48))
        #expect(h.responder.receive(early, nowSeconds: 0).last == .failed(.unexpectedMessage("pairReveal now")))
        var i = PairingHarness(random: SeededRandomFake(seed: 19))
        _ = i.initiator.start(nowSeconds: 0)
        #expect(i.initiator.receive(Frame(type: .pairHello, requestID: 0, payload: [1]), nowSeconds: 0).last == .failed(.truncated))
    }

    @Test func sasFormula() {
        #expect(PairingSession.shortAuthenticationString(transcriptHash: [0, 0, 0, 7] + [UInt8](repeating: 0, count: 28)) == "000007")
        #expect(PairingSession.shortAuthenticationString(transcriptHash: [0xFF, 0xFF, 0xFF, 0xFF]) == "967295")
    }
}

@Suite struct RosterTests {
    func key(_ seed: UInt8) -> Ed25519PrivateKey { try! Ed25519PrivateKey(seed: [UInt8](repeating: seed, count: 32)) }

    /// A signed entry; `introducer` vouches for it (§7.3).
    func member(_ seed: UInt8, generation: UInt32 = 1, introducer: UInt8? = nil) -> RosterMember {
        let introduction = introducer.map { try! Introduction.make(for: key(seed).publicKey, by: key($0)) }
        return try! RosterMember.signed(name: "m\(seed)", identity: key(seed), secret: chainedSecret(seed, generation: generation),
                                        introduction: introduction)
    }

    @Test func mergeUnionsAndPrefersNewerGenerations() throws {
        var a = Roster(version: 3, members: [member(1), member(2)])
        let b = Roster(version: 5, members: [member(2, generation: 4), member(3, introducer: 2)])
        let result = try a.merge(b, me: member(1).deviceID)
        #expect(result.changed)
        #expect(a.members.count == 3)
        #expect(a.members[member(2).deviceID]?.secret.generation == 4)
        // The version is a local counter (§7.3): one change, one step, whatever b's version.
        #expect(a.version == 4)
        #expect(try !a.merge(b, me: member(1).deviceID).changed)
    }

    @Test func removalWinsAndStays() throws {
        var a = Roster(version: 1, members: [member(1), member(2)])
        var b = a
        b.remove(member(2).deviceID, by: key(1))
        let result = try a.merge(b, me: member(3).deviceID)
        #expect(result.newlyRemoved == [member(2).deviceID])
        #expect(a.members[member(2).deviceID] == nil)
        // An old roster still listing the member cannot resurrect it.
        try a.merge(Roster(version: 1, members: [member(1), member(2, generation: 9)]), me: member(3).deviceID)
        #expect(a.members[member(2).deviceID] == nil)
        let resurrected = a.upsert(member(2, generation: 10))
        #expect(!resurrected)
    }

    @Test func encodingRoundTripAndValidation() throws {
        var roster = Roster(version: 7, members: [member(1), member(2, introducer: 1)])
        roster.remove(member(3).deviceID, by: key(1))
        let decoded = try Roster(decoding: roster.encoded())
        #expect(decoded == roster)
        guard case .dictionary(var entries) = roster.propertyValue, case .array(var members) = entries["members"],
              case .dictionary(var first) = members[0] else { Issue.record("shape"); return }
        first["deviceId"] = .bytes([UInt8](repeating: 0, count: 16))
        members[0] = .dictionary(first)
        entries["members"] = .array(members)
        #expect(throws: WireError.malformed("roster member id")) { try Roster(value: .dictionary(entries)) }
    }
}

@Suite struct ProximityTests {
    @Test func unknownRSSIIsCountedButNeverHidesAMember() {
        var stats = RSSIStatistics()
        stats.record(127)
        stats.record(127)
        #expect(stats.unknownSamples == 2)
        #expect(stats.smoothed == nil)
        var detector = ProximityDetector()
        #expect(detector.update(stats) == .unknown)
        #expect(detector.allowsSuggestion)
    }

    @Test func smoothingAndExtremes() {
        var stats = RSSIStatistics()
        for value in [-60, -80, -70] { stats.record(value) }
        #expect(stats.minimum == -80 && stats.maximum == -60 && stats.last == -70)
        // EWMA with α = 0.25: -60 → -65 → -66.25
        #expect(abs((stats.smoothed ?? 0) - -66.25) < 1e-9)
    }

    @Test func hysteresisKeepsTheStateAtTheEdge() {
        var detector = ProximityDetector(enterNear: -70, leaveNear: -80)
        var stats = RSSIStatistics()
        stats.record(-65)
        #expect(detector.update(stats) == .near)
        for _ in 0..<20 { stats.record(-75) }  // between the thresholds: stays near
        #expect(detector.update(stats) == .near)
        for _ in 0..<20 { stats.record(-90) }
        #expect(detector.update(stats) == .far)
        #expect(!detector.allowsSuggestion)
        for _ in 0..<20 { stats.record(-75) }  // between again: stays far
        #expect(detector.update(stats) == .far)
        for _ in 0..<20 { stats.record(-60) }
        #expect(detector.update(stats) == .near)
    }

    @Test func classifierKnowsTheFamilies() {
        #expect(AdvertiserKind.classify(companyID: 0x004C, batonCompanyID: 0xFFFF, manufacturerData: [0x0C], serviceUUIDs: []) == .appleContinuity)
        #expect(AdvertiserKind.classify(companyID: 0x0006, batonCompanyID: 0xFFFF, manufacturerData: nil, serviceUUIDs: []) == .microsoftCDP)
        #expect(AdvertiserKind.classify(companyID: nil, batonCompanyID: 0xFFFF, manufacturerData: nil, serviceUUIDs: ["0000fe2c-0000-1000-8000-00805f9b34fb"]) == .googleFastPair)
        #expect(AdvertiserKind.classify(companyID: 0xFFFF, batonCompanyID: 0xFFFF, manufacturerData: [0x11] + [UInt8](repeating: 0, count: 23), serviceUUIDs: []) == .foreignBaton)
        #expect(AdvertiserKind.classify(companyID: 0xFFFF, batonCompanyID: 0xFFFF, manufacturerData: [1, 2], serviceUUIDs: []) == .other(companyID: 0xFFFF))
    }
}

@Suite struct PairingEndpointTests {
    @Test func endpointsTravelInTheIdentityMessage() throws {
        var initiatorInfo = PairingHarness.local("alpha", seed: 1)
        initiatorInfo.endpoints = ["192.0.2.7:4100", "[2001:db8::1]:4100"]
        var h = PairingHarness(random: SeededRandomFake(seed: 21), initiatorInfo: initiatorInfo)
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        h.confirm(initiator: true, responder: true)
        #expect(try #require(h.results[.responder]).peerEndpoints == ["192.0.2.7:4100", "[2001:db8::1]:4100"])
        // The responder announced none: the list is simply absent.
        #expect(try #require(h.results[.initiator]).peerEndpoints == [])
    }

    @Test func invalidEndpointListsAreRejected() {
        for bad in [["no-port"], [":80"], ["host:0"], ["host:99999"], ["a b:1"], Array(repeating: "h:1", count: 9),
                    [String(repeating: "h", count: 64) + ":1"]] {
            #expect(throws: WireError.self) { try PairingEndpoints.validate(bad) }
        }
        #expect(throws: Never.self) { try PairingEndpoints.validate(["10.0.0.1:1", "[::1]:65535", "host.lan:8"]) }
    }
}

@Suite struct FetchReferenceTests {
    @Test func anyRevisionIsTheOnlyValueAbove24Bits() throws {
        let any = ActivityReference(typeHash: TypeHash(value: 1), revision: ActivityReference.anyRevision)
        #expect(try ActivityReference(payload: any.payload) == any)
        #expect(throws: WireError.malformed("revision")) { try ActivityReference(payload: [0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFE]) }
    }

    @Test func sameContentWithAHigherVersionChangesNothing() throws {
        let random = SeededRandomFake(seed: 5)
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        var copy = a.state.roster
        copy.version += 10
        // The version is local (§7.3, issue 23): a received one is never adopted; same digest, nothing to do.
        let actions = a.received(copy, from: a.deviceID, random: random)
        #expect(actions.isEmpty)
        #expect(a.state.roster.version == 1)
        #expect(a.state.roster.digest == copy.digest)
    }
}
