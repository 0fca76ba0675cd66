// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing
@testable import BatonCore

/// The daily ratchet of advertising secrets (§3.1): one-way, old days not kept, signatures outlive it.
@Suite struct DayRatchetTests {
    let random = SeededRandomFake(seed: 31)
    /// First epoch of day testDay + 1.
    let boundary = (testDay + 1) * AdvertisingSecret.epochsPerDay

    @Test func theKeyOfDayDPlusOneDerivesFromDayD() throws {
        let secret = chainedSecret(7)
        let next = try #require(secret.ratcheted(toDay: testDay + 1))
        #expect(next.bytes == SHA256.hash("baton/v1 ratchet".utf8Bytes + bytesBE(testDay + 1) + secret.bytes))
        #expect(next.chain?.commitment == secret.chain?.commitment && next.generation == secret.generation)
        // What day d's keys derive for an epoch of day d+1 is what day d+1's keys derive.
        let fromD = DerivedKeys(secret: secret), fromNext = DerivedKeys(secret: next)
        #expect(fromD.epochMaterial(boundary) == fromNext.epochMaterial(boundary))
        #expect(fromD.sealKeyBytes(epoch: boundary) == fromNext.sealKeyBytes(epoch: boundary))
        #expect(fromD.mdnsInstanceName(epoch: boundary) == fromNext.mdnsInstanceName(epoch: boundary))
        // The day's key changes the tag; K_type (from the commitment) does not change.
        #expect(fromD.epochMaterial(boundary - 1).tag != DerivedKeys(secret: try AdvertisingSecret.issue(
            root: next.bytes, generation: 1, day: testDay)).epochMaterial(boundary - 1).tag)
        #expect(fromD.typeHash("a.b") == fromNext.typeHash("a.b"))
        // One way: nothing goes back, and the chain ends where the commitment is.
        #expect(next.ratcheted(toDay: testDay) == nil)
        #expect(!next.covers(epoch: boundary - 1))
        #expect(secret.ratcheted(toDay: testDay + AdvertisingSecret.chainDays) == nil)
        #expect(secret.ratcheted(toDay: testDay + AdvertisingSecret.chainDays - 1) != nil)
    }

    /// §3.1: a received key must reach the commitment in 1 to 1,024 steps. Zero steps do not count:
    /// the commitment given as the key is refused, at any day, as is the last key one day late.
    @Test func theCommitmentItselfIsNoKeyOfItsChain() throws {
        let secret = chainedSecret(7)
        let chain = try #require(secret.chain)
        for day in [testDay, chain.endDay - 1, chain.endDay] {
            #expect(throws: WireError.badSignature) {
                _ = try AdvertisingSecret(bytes: chain.commitment, generation: 1, day: day, commitment: chain.commitment)
            }
        }
        // The last key of the chain, one step before the commitment, is accepted for its own day only.
        let last = try #require(secret.ratcheted(toDay: chain.endDay - 1))
        #expect(try AdvertisingSecret(bytes: last.bytes, generation: 1, day: chain.endDay - 1, commitment: chain.commitment).chain?.endDay == chain.endDay)
        #expect(throws: WireError.badSignature) {
            _ = try AdvertisingSecret(bytes: last.bytes, generation: 1, day: chain.endDay, commitment: chain.commitment)
        }
    }

    @Test func afterTheRatchetDayDsKeyIsNoLongerStored() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        let b = try RingKeeper.create(name: "b", today: testDay, random: random)
        _ = try a.pair(PairingResult(peer: b.state.roster.members[b.deviceID]!, peerRoster: b.state.roster), random: random)
        let oldOwn = a.ownSecret.bytes, oldPeer = try #require(a.peers[b.deviceID]).bytes
        let actions = a.ratchet(toDay: testDay + 1, random: random)
        guard case .persist(let state) = actions.first else { Issue.record("no persist"); return }
        #expect(actions.contains(.ratchetOwnSecret(a.ownSecret)))
        let stored = try state.roster.encoded()
        #expect(!contains(stored, oldOwn) && !contains(stored, oldPeer))
        #expect(a.ownSecret.day == testDay + 1 && a.peers[b.deviceID]?.day == testDay + 1)
        // The ratcheted entries still verify (the signature covers the commitment) at another member.
        let decoded = try Roster(decoding: stored)
        #expect(decoded.members[b.deviceID]?.secret == a.peers[b.deviceID])
        // A roster received later with day d's key is moved to our day on the spot.
        var c = try RingKeeper.create(name: "c", today: testDay + 1, random: random)
        _ = c.ratchet(toDay: testDay + 1, random: random)
        _ = try c.pair(PairingResult(peer: b.state.roster.members[b.deviceID]!, peerRoster: b.state.roster), random: random)
        #expect(c.peers[b.deviceID]?.day == testDay + 1)
        #expect(!contains(try c.state.roster.encoded(), oldPeer))
        // Ratcheting does not change the roster version: members still agree without a RingSync.
        #expect(state.roster.version == decoded.version)
    }

    /// Sender and receiver each store the key of the day of their own epoch e−1 and may be one
    /// epoch apart (§4.3): around midnight every such pair still matches.
    @Test func advertsAroundADayBoundaryStillMatch() throws {
        let root = chainedSecret(9)
        for receiverEpoch in (boundary - 2)...(boundary + 2) {
            for senderEpoch in (receiverEpoch - 1)...(receiverEpoch + 1) {
                let senderKey = try #require(root.ratcheted(toDay: AdvertisingSecret.day(ofEpoch: senderEpoch - 1)))
                var sender = AdvertSender(secret: senderKey, restored: nil)
                guard case .advertise(let advert) = sender.start(nowSeconds: seconds(epoch: senderEpoch)).last else {
                    Issue.record("sender at \(senderEpoch) sealed nothing"); continue
                }
                let receiverKey = try #require(root.ratcheted(toDay: AdvertisingSecret.day(ofEpoch: receiverEpoch - 1)))
                var matcher = AdvertMatcher(epoch: receiverEpoch)
                matcher.setMember(deviceID(1), secret: receiverKey)
                #expect((try? matcher.receive(advert)) != nil, "sender \(senderEpoch), receiver \(receiverEpoch)")
            }
        }
    }

    /// Why the stored day follows e−1 and not e: a receiver that had dropped day d at midnight
    /// could not open an advert of the last epoch of day d, still inside its window.
    @Test func aKeyRatchetedPastAnEpochCannotOpenIt() throws {
        let root = chainedSecret(9)
        var sender = AdvertSender(secret: root, restored: nil)
        guard case .advertise(let advert) = sender.start(nowSeconds: seconds(epoch: boundary - 1)).last else { Issue.record("no advert"); return }
        var early = AdvertMatcher(epoch: boundary)
        early.setMember(deviceID(1), secret: try #require(root.ratcheted(toDay: testDay + 1)))
        #expect(throws: WireError.notRingMember) { try early.receive(advert) }
        // A sender whose key is of a later day than its clock's epoch seals nothing (no key for it).
        var ahead = AdvertSender(secret: try #require(root.ratcheted(toDay: testDay + 1)), restored: nil)
        #expect(ahead.start(nowSeconds: seconds(epoch: boundary - 1)).allSatisfy { if case .advertise = $0 { false } else { true } })
    }

    @Test func aGenerationNearTheEndOfItsChainIsRenewed() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        a.maxKeyAgeDays = 0  // the chain's own renewal alone (the 30-day re-key is tested below)
        let first = a.ownSecret
        let lastQuietDay = testDay + AdvertisingSecret.chainDays - RingKeeper.renewalDays - 1
        #expect(!a.ratchet(toDay: lastQuietDay, random: random).contains(.rotateOwnSecret(a.ownSecret)))
        #expect(a.ownSecret.generation == first.generation)
        let actions = a.ratchet(toDay: lastQuietDay + 1, random: random)
        #expect(a.ownSecret.generation == first.generation + 1 && a.ownSecret.day == lastQuietDay + 1)
        #expect(actions.contains(.rotateOwnSecret(a.ownSecret)))
    }

    /// Issue 23: a shorter forward window. The own secret is replaced once `maxKeyAgeDays` old, at
    /// the day's ratchet (no wakeup of its own), and every member is owed a RingSync.
    @Test func theOwnSecretIsReplacedOnceThirtyDaysOld() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        var b = try RingKeeper.create(name: "b", today: testDay, random: random)
        try KeeperRing(random: random).pair(&a, &b)
        #expect(a.maxKeyAgeDays == 30)
        let first = a.ownSecret
        let quiet = a.ratchet(toDay: testDay + 29, random: random)
        #expect(!quiet.contains(.rotateOwnSecret(a.ownSecret)) && a.ownSecret.generation == first.generation)
        let actions = a.ratchet(toDay: testDay + 30, random: random)
        #expect(a.ownSecret.generation == first.generation + 1 && a.ownSecret.day == testDay + 30)
        #expect(actions.contains(.rotateOwnSecret(a.ownSecret)) && actions.contains(.sync(b.deviceID)))
        // The new generation counts from its own issue day.
        #expect(!a.ratchet(toDay: testDay + 59, random: random).contains(.rotateOwnSecret(a.ownSecret)))
        #expect(a.ratchet(toDay: testDay + 60, random: random).contains(.rotateOwnSecret(a.ownSecret)))
        // Configurable: a week.
        var c = try RingKeeper.create(name: "c", today: testDay, random: random)
        c.maxKeyAgeDays = 7
        #expect(c.ratchet(toDay: testDay + 7, random: random).contains(.rotateOwnSecret(c.ownSecret)))
    }

    /// §4.2: a clock more than a day behind re-keys; the new generation is issued on the clock's
    /// day, so the sender has a key for the epochs it now seals in.
    @Test func aReKeyAfterTheClockWentBackIssuesOnTheClocksDay() throws {
        var a = try RingKeeper.create(name: "a", today: testDay, random: random)
        _ = a.ratchet(toDay: testDay + 3, random: random)
        var stale = AdvertSender(secret: a.ownSecret, restored: nil)
        #expect(stale.start(nowSeconds: seconds(epoch: boundary)).allSatisfy { if case .advertise = $0 { false } else { true } })
        _ = a.rekey(random: random, today: testDay + 1)
        #expect(a.ownSecret.day == testDay + 1)
        var sender = AdvertSender(secret: a.ownSecret, restored: nil)
        guard case .advertise = sender.start(nowSeconds: seconds(epoch: boundary)).last else { Issue.record("no advert"); return }
    }

    private func bytesBE(_ value: UInt64) -> [UInt8] { var out: [UInt8] = []; out.appendBigEndian(value); return out }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
