// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

/// Red-team attacks on rosters, adverts and clocks, formed from docs/security.md and
/// docs/protocol.md alone and run against the core. Attacks the code withstands are regression
/// tests; the defects found (issue 11) are fixed and their tests assert the fixed behaviour.
@Suite struct RedTeamRingTests {
    let random = SeededRandomFake(seed: 4242)
    let now = epochStart + 10
    var nowEpoch: UInt64 { Protocol.epoch(unixSeconds: now) }

    func pair(_ a: inout RingKeeper, _ b: inout RingKeeper) throws { try KeeperRing(random: random).pair(&a, &b) }
    func ring() throws -> (a: RingKeeper, b: RingKeeper, m: RingKeeper) { try KeeperRing(random: random).ring() }

    /// The first advert a sender with `secret` puts on the air at `seconds`.
    func advert(of secret: AdvertisingSecret, at seconds: Int64, type: String? = nil) throws -> [UInt8] {
        var sender = AdvertSender(secret: secret, restored: nil)
        var actions = sender.start(nowSeconds: seconds)
        if let type { actions += sender.update(AdvertContent(activityType: type), nowSeconds: seconds) }
        let adverts = actions.compactMap { if case .advertise(let bytes) = $0 { bytes } else { nil } }
        return try #require(adverts.last)
    }

    /// A receiver's matcher holding what `keeper` holds for its peers.
    func matcher(of keeper: RingKeeper, epoch: UInt64) -> AdvertMatcher {
        var matcher = AdvertMatcher(epoch: epoch)
        for (id, secret) in keeper.peers { matcher.setMember(id, secret: secret) }
        return matcher
    }

    // MARK: rogue members

    /// Attack: b re-keys; a rogue member m hears b's new generation first and relays it to a with
    /// b's key ratcheted 500 days forward (the key is not covered by b's signature, §7.3). a stores
    /// the later day (§3.1), and when b's own RingSync arrives with the same generation a keeps its
    /// local entry, so a cannot recognise b's adverts for 500 days. Fixed: with equal generations
    /// the earlier day of the same chain wins (§7.3), so b's own sync undoes the relay.
    @Test func aRogueMemberRelayingAForwardRatchetedKeyBlindsAnotherMember() throws {
        var (a, b, m) = try ring()
        _ = b.rekey(random: random)
        _ = try m.receive(b.state.roster, from: b.deviceID, random: random)
        let relayed = try #require(m.state.roster.members[b.deviceID])
        let later = try #require(relayed.secret.ratcheted(toDay: testDay + 500))
        let tampered = try RosterMember(name: relayed.name, identityKey: relayed.identityKey, secret: later,
                                        signature: relayed.signature, introduction: relayed.introduction)
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        _ = try a.receive(Roster(version: m.state.roster.version + 1, members: [mEntry, tampered]), from: m.deviceID, random: random)
        // b's own sync arrives afterwards, with b's key of today.
        _ = try a.receive(b.state.roster, from: b.deviceID, random: random)
        var receiver = matcher(of: a, epoch: nowEpoch)
        let heard = try advert(of: b.ownSecret, at: now)
        #expect(a.peers[b.deviceID]?.day == testDay)
        #expect(throws: Never.self) { try receiver.receive(heard) }
    }

    /// Attack: a removed x, then colluding member m re-introduces x's identity (a fresh
    /// introduction by m, a higher generation signed by x) and leaves the removal mark out.
    @Test func aColludingMemberCannotReintroduceARemovedIdentity() throws {
        var (a, b, m) = try ring()
        var x = try RingKeeper.create(name: "x", today: testDay, random: random)
        try pair(&x, &b)
        _ = try a.receive(b.state.roster, from: b.deviceID, random: random)
        #expect(a.peers[x.deviceID] != nil)
        _ = a.remove(x.deviceID, random: random)
        #expect(a.peers[x.deviceID] == nil)
        let reborn = try RosterMember.signed(name: "x", identity: x.identity,
                                             secret: .generate(generation: 40, day: testDay, using: random),
                                             introduction: Introduction.make(for: x.identity.publicKey, by: m.identity))
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        _ = try a.receive(Roster(version: 9_000, members: [mEntry, reborn]), from: m.deviceID, random: random)
        #expect(a.peers[x.deviceID] == nil)
        #expect(a.state.roster.removed.contains(x.deviceID))
        // Nor by pairing x again through a (refused before the roster), whoever relays it.
        #expect(throws: WireError.peerRemoved) { try a.checkPairingPeer(x.deviceID) }
    }

    /// Attack: a member replays an old roster (captured before a removal and a re-key): it must
    /// neither resurrect the removed member nor roll a member back to its older generation.
    @Test func anOldRosterReplayedAfterARemovalChangesNothing() throws {
        var (a, b, m) = try ring()
        let old = b.state.roster
        _ = a.remove(m.deviceID, random: random)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        let aAfter = a.ownSecret, bAfter = b.state
        #expect(old.members[a.deviceID]!.secret.generation < aAfter.generation)
        let actions = try b.receive(old, from: a.deviceID, random: random)
        #expect(b.state.roster.members.keys.sorted() == bAfter.roster.members.keys.sorted())
        #expect(b.peers[m.deviceID] == nil)
        #expect(b.peers[a.deviceID] == aAfter)
        #expect(!actions.contains { if case .rotateOwnSecret = $0 { true } else { false } })
    }

    /// Attack: a removed member keeps the keys it held. After the re-key it opens none of the
    /// remaining members' adverts, today or on later days (the new generation has a new root).
    @Test func aRemovedMembersKeptKeysOpenNoAdvertAfterTheReKey() throws {
        var (a, b, m) = try ring()
        let kept = m.peers
        _ = a.remove(m.deviceID, random: random)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        var thief = AdvertMatcher(epoch: nowEpoch)
        for (id, secret) in kept { thief.setMember(id, secret: secret) }
        for member in [a, b] {
            #expect(throws: WireError.notRingMember) { try thief.receive(advert(of: member.ownSecret, at: now, type: "org.example.a")) }
        }
        // Tomorrow, with its keys ratcheted forward, still nothing.
        let tomorrow = now + AdvertisingSecret.secondsPerDay
        var later = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: tomorrow))
        for (id, secret) in kept { later.setMember(id, secret: secret.ratcheted(toDay: testDay + 1)!) }
        let bTomorrow = try #require(b.ownSecret.ratcheted(toDay: testDay + 1))
        #expect(throws: WireError.notRingMember) { try later.receive(advert(of: bTomorrow, at: tomorrow)) }
        // Before the re-key reached b, b's adverts were readable by m: the window the docs admit.
        #expect(kept[b.deviceID] != nil)
    }

    /// Attack: a removes x while b is away; x (which has not heard either) pairs with b before b
    /// learns of the removal. x must learn no key it did not hold already, and once b and a talk,
    /// x is out everywhere (removal wins over b's fresh introduction).
    @Test func aRemovedMachineRePairingWithAMemberThatWasAwayLearnsNothingNewAndIsDroppedAgain() throws {
        var (a, b, _) = try ring()
        var x = try RingKeeper.create(name: "x", today: testDay, random: random)
        try pair(&x, &a)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        let heldByX = Set(x.peers.values)
        _ = a.remove(x.deviceID, random: random)
        // x pairs with b (b has not heard of the removal).
        var h = PairingHarness(random: random, initiatorInfo: x.pairingInfo(), responderInfo: b.pairingInfo())
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        h.confirm(initiator: true, responder: true)
        let toX = try #require(h.results[.initiator])
        let learned = Set(toX.peerRoster.members.values.filter { $0.deviceID != x.deviceID }.map(\.secret))
        #expect(learned.isSubset(of: heldByX), "x learned a key it did not hold")
        #expect(toX.peerRoster.members[a.deviceID]?.secret.generation != a.ownSecret.generation)
        _ = try b.pair(try #require(h.results[.responder]), random: random)
        #expect(b.peers[x.deviceID] != nil)
        // a and b talk (either direction): x is removed at b, and a does not take it back.
        _ = try a.receive(b.state.roster, from: b.deviceID, random: random)
        #expect(a.peers[x.deviceID] == nil)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        #expect(b.peers[x.deviceID] == nil)
        #expect(b.state.roster.removed.contains(x.deviceID))
        #expect(b.peers[a.deviceID] == a.ownSecret)
    }

    // MARK: replays and clocks

    /// Attack: a captured advert re-broadcast later, in the same epoch after a newer one, in the next
    /// epoch, and after the receiver's window moved on.
    @Test func aCapturedAdvertReBroadcastLaterIsNeverAcceptedAsNew() throws {
        let (a, b, _) = try ring()
        var sender = AdvertSender(secret: b.ownSecret, restored: nil)
        func aired(_ actions: [AdvertSender.Action]) -> [[UInt8]] {
            actions.compactMap { if case .advertise(let bytes) = $0 { bytes } else { nil } }
        }
        let first = try #require(aired(sender.start(nowSeconds: now) + sender.update(AdvertContent(activityType: "org.example.a"), nowSeconds: now)).last)
        let second = try #require(aired(sender.update(AdvertContent(activityType: "org.example.b"), nowSeconds: now + 1)).last)
        var receiver = matcher(of: a, epoch: nowEpoch)
        #expect(try receiver.receive(first).outcome == .newRevision)
        #expect(try receiver.receive(second).outcome == .newRevision)
        #expect(throws: WireError.replayedSequence) { try receiver.receive(first) }
        // The next epoch: the sender rotates; the captured bytes of the last epoch are stale.
        let next = now + Protocol.epochSeconds
        let third = try #require(aired(sender.tick(nowSeconds: next)).last)
        receiver.advance(toEpoch: nowEpoch + 1)
        #expect(try receiver.receive(third).outcome == .sameRevision)
        #expect(throws: WireError.staleEpoch) { try receiver.receive(second) }
        // Two epochs on, the captured epoch is out of the window: not even looked at.
        receiver.advance(toEpoch: nowEpoch + 2)
        #expect(throws: WireError.notRingMember) { try receiver.receive(second) }
        // A fresh receiver (a restart) accepts it once: the documented exception (security.md).
        var restarted = matcher(of: a, epoch: nowEpoch + 1)
        #expect(try restarted.receive(second).outcome == .newRevision)
        #expect(throws: WireError.replayedSequence) { try restarted.receive(first) }
    }

    /// Attack (or accident): a member's clock is set far forward (a day ratchet runs: every stored
    /// key moves 3 days on, the earlier ones are erased) and then corrected. The sender side
    /// re-keys (security.md), but the members' keys stay 3 days ahead: the members resend their
    /// rosters with the same generation; the forward local entries were kept, so this machine
    /// recognised none of its members' adverts. Fixed: their earlier-day keys replace them (§3.1).
    @Test func aClockSetFarForwardAndCorrectedLeavesAMemberDeafToTheRing() throws {
        var (a, b, m) = try ring()
        _ = a.ratchet(toDay: testDay + 3, random: random)
        #expect(a.peers[b.deviceID]?.day == testDay + 3)
        // The clock is corrected: the sender is far behind its mark and re-keys on today.
        _ = a.rekey(random: random, today: testDay)
        #expect(a.ownSecret.covers(day: testDay))
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        _ = try m.receive(a.state.roster, from: a.deviceID, random: random)
        // Everybody resends its roster, as after any re-key.
        _ = try a.receive(b.state.roster, from: b.deviceID, random: random)
        _ = try a.receive(m.state.roster, from: m.deviceID, random: random)
        // The others hear a again at once...
        var atB = matcher(of: b, epoch: nowEpoch)
        #expect(throws: Never.self) { try atB.receive(advert(of: a.ownSecret, at: now)) }
        // ...but a hears nobody.
        var atA = matcher(of: a, epoch: nowEpoch)
        let heard = try advert(of: b.ownSecret, at: now)
        #expect(throws: Never.self) { try atA.receive(heard) }
    }

    /// The earlier key of the same chain is taken without a new roster version or any RingSync (a
    /// key's day is local, §7.3), and never before the receiver's own day (§3.1); a key of the same
    /// generation under another commitment is not taken.
    @Test func anEarlierKeyOfTheSameChainMovesBackSilentlyButNeverBeforeTheReceiversDay() throws {
        var (a, b, _) = try ring()
        // Converged first (introductions are a set every member ends up holding, §7.3).
        _ = try a.receive(b.state.roster, from: b.deviceID, random: random)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        _ = a.ratchet(toDay: testDay + 3, random: random)
        _ = a.rekey(random: random, today: testDay + 1)
        _ = try b.receive(a.state.roster, from: a.deviceID, random: random)
        let version = a.state.roster.version
        let actions = try a.receive(b.state.roster, from: b.deviceID, random: random)
        #expect(a.peers[b.deviceID]?.day == testDay + 1, "moved back to the receiver's day, not to the sender's earlier one")
        #expect(a.peers[b.deviceID] == b.ownSecret.ratcheted(toDay: testDay + 1))
        #expect(a.state.roster.version == version)
        #expect(!actions.contains { if case .sync = $0 { true } else { false } })
        #expect(actions.contains { if case .membersChanged(let peers) = $0 { peers[b.deviceID]?.day == testDay + 1 } else { false } })
        // Same generation, another chain (a forged or mistaken entry): the stored key stays.
        let stored = try #require(a.state.roster.members[b.deviceID])
        let other = try RosterMember.signed(name: stored.name, identity: b.identity,
                                            secret: .generate(generation: stored.secret.generation, day: testDay, using: random),
                                            introduction: stored.introduction)
        _ = try a.receive(Roster(version: b.state.roster.version, members: [other]), from: b.deviceID, random: random)
        // Same generation, two chains (only b can sign both): the lower signature wins on every side (§7.3).
        let kept = try #require(a.state.roster.members[b.deviceID])
        let lower = stored.signature.lexicographicallyPrecedes(other.signature) ? stored : other
        #expect(kept.signature == lower.signature && kept.secret.chain?.commitment == lower.secret.chain?.commitment)
    }

    /// Attack: a member with a skewed clock (two epochs ahead) seals adverts a receiver must not
    /// accept (it would pin the replay state ahead); one epoch of skew is tolerated (§4.3).
    @Test func aMemberTwoEpochsAheadIsNotHeard() throws {
        let (a, b, _) = try ring()
        var receiver = matcher(of: a, epoch: nowEpoch)
        let ahead = try advert(of: b.ownSecret, at: now + 2 * Protocol.epochSeconds, type: "org.example.a")
        #expect(throws: WireError.notRingMember) { try receiver.receive(ahead) }
        let oneAhead = try advert(of: b.ownSecret, at: now + Protocol.epochSeconds, type: "org.example.a")
        #expect(try receiver.receive(oneAhead).outcome == .newRevision)
    }

    // MARK: old pairing messages

    /// Attack: a PairCommit recorded from one session (a pairing advert is in clear, the frames go
    /// over plain TCP) replayed into the next session, and a recorded initiator's whole transcript
    /// replayed to an acceptor that draws fresh values: neither shows a code or completes.
    @Test func recordedPairingFramesReplayedIntoANewSessionGoNowhere() throws {
        var first = PairingHarness(random: random)
        first.run(first.initiator.start(nowSeconds: 0), from: .initiator)
        first.confirm(initiator: true, responder: true)
        #expect(first.results[.responder] != nil)
        let recorded = first.sent.filter { $0.role == .initiator }.map(\.frame)
        #expect(recorded.first?.type == .pairCommit)

        // Another session id: the commit is refused at once.
        var second = PairingHarness(random: random)
        let refused = second.responder.receive(recorded[0], nowSeconds: 0)
        #expect(refused.contains(.failed(.malformed("session id"))))
        #expect(!refused.contains { if case .showCode = $0 { true } else { false } })

        // Even a responder that (wrongly) reused the session id draws a fresh key and nonce, so the
        // replayed frames fail: the reveal still matches the commit, but the sealed messages were
        // sealed under keys derived from the old responder's values.
        let sessionID = Array(recorded[0].payload[1..<9])
        var replayTarget = try PairingSession(role: .responder, sessionID: sessionID,
                                              ephemeralKey: X25519PrivateKey(rawRepresentation: random.bytes(32)),
                                              nonce: random.bytes(16), local: PairingHarness.local("victim", seed: 9))
        var outcomes: [PairingSession.Action] = []
        for frame in recorded { outcomes += replayTarget.receive(frame, nowSeconds: 1) }
        #expect(!outcomes.contains { if case .completed = $0 { true } else { false } })
        #expect(outcomes.contains { if case .failed = $0 { true } else { false } })
    }

    // MARK: what a stranger sees

    /// Attack (passive radio observer): link one device's adverts across an epoch boundary by any
    /// clear byte, or tell two devices apart within an epoch by anything but the tag.
    @Test func noClearByteOfAnAdvertSurvivesAnEpochRotation() throws {
        let (a, b, _) = try ring()
        let next = now + Protocol.epochSeconds
        for member in [a, b] {
            let before = try advert(of: member.ownSecret, at: now, type: "org.example.a")
            let after = try advert(of: member.ownSecret, at: next, type: "org.example.a")
            #expect(before[0] == 0x11 && after[0] == 0x11)
            #expect(before[1..<7] != after[1..<7], "the tag rotates")
            #expect(before[8..<24] != after[8..<24], "the sealed part changes with the epoch's key and nonce")
            // Nor does the DNS-SD instance name.
            let keys = DerivedKeys(secret: member.ownSecret)
            #expect(keys.mdnsInstanceName(epoch: nowEpoch) != keys.mdnsInstanceName(epoch: nowEpoch + 1))
        }
        let fromA = try advert(of: a.ownSecret, at: now), fromB = try advert(of: b.ownSecret, at: now)
        #expect(fromA[1..<7] != fromB[1..<7])
        // A stranger's matcher (another ring) recognises neither.
        let (x, _, _) = try ring()
        var stranger = matcher(of: x, epoch: nowEpoch)
        for heard in [fromA, fromB] { #expect(throws: WireError.notRingMember) { try stranger.receive(heard) } }
    }
}
