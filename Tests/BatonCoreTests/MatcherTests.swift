// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

@Suite struct AdvertMatcherTests {
    let epoch: UInt64 = 2_000_000
    let alice = deviceID(1)
    let aliceSecret = secret(1)

    func sealed(_ s: AdvertisingSecret, epoch: UInt64, sequence: UInt8 = 0, revision: UInt32 = 1, type: UInt32 = 7) -> [UInt8] {
        let keys = DerivedKeys(secret: s)
        return RingAdvert.seal(body: AdvertBody(typeHash: TypeHash(value: type), revision: revision, flags: [.hasActivity]),
                               keys: keys, epoch: keys.epochMaterial(epoch), sequence: sequence)
    }

    func matcher() -> AdvertMatcher {
        var m = AdvertMatcher(epoch: epoch)
        m.setMember(alice, secret: aliceSecret)
        m.setMember(deviceID(2), secret: secret(2))
        return m
    }

    @Test func recognisesMemberAndRejectsForeign() throws {
        var m = matcher()
        let sighting = try m.receive(sealed(aliceSecret, epoch: epoch))
        #expect(sighting.member == alice)
        #expect(sighting.outcome == .newRevision)
        #expect(sighting.body.typeHash.value == 7)
        #expect(throws: WireError.notRingMember) { try m.receive(sealed(secret(99), epoch: epoch)) }
    }

    @Test func toleratesOneEpochOfSkewButNotTwo() throws {
        var m = matcher()
        _ = try m.receive(sealed(aliceSecret, epoch: epoch - 1))
        _ = try m.receive(sealed(aliceSecret, epoch: epoch + 1))
        #expect(throws: WireError.notRingMember) { try m.receive(sealed(aliceSecret, epoch: epoch + 2)) }
        #expect(throws: WireError.notRingMember) { try m.receive(sealed(aliceSecret, epoch: epoch - 2)) }
    }

    @Test func replayRules() throws {
        var m = matcher()
        let first = sealed(aliceSecret, epoch: epoch, sequence: 3, revision: 10)
        #expect(try m.receive(first).outcome == .newRevision)
        #expect(try m.receive(first).outcome == .sameRevision)  // re-sighting
        #expect(throws: WireError.replayedSequence) { try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 2, revision: 11)) }
        #expect(throws: WireError.conflictingSequence) { try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 3, revision: 11)) }
        #expect(throws: WireError.staleRevision) { try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 4, revision: 9)) }
        #expect(try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 4, revision: 11)).outcome == .newRevision)
        #expect(try m.receive(sealed(aliceSecret, epoch: epoch + 1, sequence: 0, revision: 11)).outcome == .sameRevision)
        #expect(throws: WireError.staleEpoch) { try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 5, revision: 12)) }
    }

    @Test func revisionWrapsAround() throws {
        var m = matcher()
        _ = try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 0, revision: 0xFF_FFFF))
        #expect(try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 1, revision: 0)).outcome == .newRevision)
        #expect(Revision.isOlder(0xFF_FFFF, than: 0))
        #expect(!Revision.isOlder(0, than: 0xFF_FFFF))
        #expect(!Revision.isOlder(5, than: 5))
        #expect(Revision.next(0xFF_FFFF) == 0)
    }

    @Test func newGenerationRestartsSequenceButKeepsRevision() throws {
        var m = matcher()
        _ = try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 9, revision: 20))
        let rotated = secret(0x55, generation: 2)
        m.setMember(alice, secret: rotated)
        #expect(throws: WireError.notRingMember) { try m.receive(sealed(aliceSecret, epoch: epoch, sequence: 10, revision: 21)) }
        #expect(try m.receive(sealed(rotated, epoch: epoch, sequence: 0, revision: 21)).outcome == .newRevision)
        #expect(throws: WireError.staleRevision) { try m.receive(sealed(rotated, epoch: epoch, sequence: 1, revision: 19)) }
    }

    @Test func advancingTheEpochMovesTheWindow() throws {
        var m = matcher()
        #expect(m.tableCount == 6)
        m.advance(toEpoch: epoch + 5)
        #expect(m.tableCount == 6)
        #expect(throws: WireError.notRingMember) { try m.receive(sealed(aliceSecret, epoch: epoch)) }
        _ = try m.receive(sealed(aliceSecret, epoch: epoch + 6))
    }

    @Test func removedMemberIsForgotten() throws {
        var m = matcher()
        m.removeMember(alice)
        #expect(m.tableCount == 3)
        #expect(throws: WireError.notRingMember) { try m.receive(sealed(aliceSecret, epoch: epoch)) }
    }

    @Test func sharedTagBucketsSurviveRemoval() throws {
        // Two members with one secret share every tag: the bucket holds both.
        var m = AdvertMatcher(epoch: epoch)
        m.setMember(deviceID(1), secret: secret(4))
        m.setMember(deviceID(2), secret: secret(4))
        #expect(m.tableCount == 3)
        #expect(try m.receive(sealed(secret(4), epoch: epoch)).member == deviceID(1))
        m.removeMember(deviceID(1))
        #expect(try m.receive(sealed(secret(4), epoch: epoch, sequence: 1)).member == deviceID(2))
    }

    @Test func forgedAdvertWithKnownTagFailsAuthentication() {
        var m = matcher()
        var forged = sealed(aliceSecret, epoch: epoch)
        forged[20] ^= 0x01
        #expect(throws: WireError.authenticationFailed) { try m.receive(forged) }
    }

    @Test func randomBytesNeverCrash() {
        var m = matcher()
        let random = SeededRandomFake(seed: 1)
        for _ in 0..<20_000 {
            let length = random.int(0...40)
            var bytes = random.bytes(length)
            if length == 24 && random.next() % 2 == 0 { bytes[0] = 0x11 }
            #expect(throws: WireError.self) { try m.receive(bytes) }
        }
    }

    @Test func tenThousandMembersStillOneLookup() throws {
        var m = AdvertMatcher(epoch: epoch)
        for i in 0..<10_000 {
            var key = [UInt8](repeating: 0, count: 32)
            key[0] = UInt8(i & 0xFF); key[1] = UInt8(i >> 8)
            m.setMember(DeviceID(identityKey: key), secret: try AdvertisingSecret(bytes: key, generation: 1))
        }
        #expect(m.memberCount == 10_000)
        #expect(m.tableCount >= 29_990)  // 3 epochs each; 48-bit collisions are astronomically rare
        var key = [UInt8](repeating: 0, count: 32)
        key[0] = UInt8(9_999 & 0xFF); key[1] = UInt8(9_999 >> 8)
        let sighting = try m.receive(sealed(try AdvertisingSecret(bytes: key, generation: 1), epoch: epoch))
        #expect(sighting.member == DeviceID(identityKey: key))
    }
}

@Suite struct AdvertSenderTests {
    let now = seconds(epoch: 2_000_000) + 10

    @Test func persistsBeforeAdvertisingAndCountsSequence() throws {
        var sender = AdvertSender(secret: secret(1), restored: nil)
        let start = sender.start(nowSeconds: now)
        #expect(start.count == 2)
        guard case .persist(let counters, _) = start[0], case .advertise(let bytes) = start[1] else {
            Issue.record("expected persist then advertise"); return
        }
        #expect(counters.nextSequence == 1)
        #expect(counters.epoch == 2_000_000)
        var matcher = AdvertMatcher(epoch: 2_000_000)
        matcher.setMember(deviceID(1), secret: secret(1))
        let first = try matcher.receive(bytes)
        #expect(!first.body.isActivity)
        let update = sender.update(AdvertContent(activityType: "org.example.Reader.reading", hasWebpageURL: true), nowSeconds: now + 1)
        guard case .advertise(let second) = update.last else { Issue.record("no advert"); return }
        let sighting = try matcher.receive(second)
        #expect(sighting.sequence == 1)
        #expect(sighting.outcome == .newRevision)
        #expect(sighting.body.flags == [.hasActivity, .hasWebpageURL])
        #expect(sighting.body.typeHash == DerivedKeys(secret: secret(1)).typeHash("org.example.Reader.reading"))
        #expect(sender.update(AdvertContent(activityType: "org.example.Reader.reading", hasWebpageURL: true), nowSeconds: now + 2).isEmpty)
        // A new version of the same activity (same type and flags) still gets a new revision.
        guard case .advertise(let third) = sender.update(AdvertContent(activityType: "org.example.Reader.reading", hasWebpageURL: true),
                                                         nowSeconds: now + 3, changed: true).last else { Issue.record("no advert"); return }
        #expect(try matcher.receive(third).outcome == .newRevision)
    }

    @Test func rotatesAtEpochBoundaryWithNewTag() throws {
        var sender = AdvertSender(secret: secret(1), restored: nil)
        guard case .advertise(let before) = sender.start(nowSeconds: now).last else { Issue.record("no advert"); return }
        #expect(sender.tick(nowSeconds: now + 100).isEmpty)
        let rotation = sender.tick(nowSeconds: now + 900)
        guard case .advertise(let after) = rotation.last else { Issue.record("no rotation"); return }
        #expect(before[1..<7] != after[1..<7])
        #expect(sender.counters.nextSequence == 1)
        #expect(sender.counters.revision == 0)  // rotation does not change the revision
    }

    @Test func restoredCountersNeverReuseASequence() {
        var first = AdvertSender(secret: secret(1), restored: nil)
        _ = first.start(nowSeconds: now)
        _ = first.update(AdvertContent(activityType: "a.b"), nowSeconds: now)
        var second = AdvertSender(secret: secret(1), restored: first.counters)
        _ = second.start(nowSeconds: now)
        #expect(second.counters.nextSequence == 3)
        #expect(second.counters.revision == first.counters.revision)
    }

    @Test func exhaustedEpochDefersUntilTheNext() {
        var sender = AdvertSender(secret: secret(1), restored: nil)
        _ = sender.start(nowSeconds: now)
        for i in 0..<255 { _ = sender.update(AdvertContent(activityType: "a.b\(i % 2 == 0 ? "x" : "y")"), nowSeconds: now) }
        #expect(sender.counters.nextSequence == 256)
        #expect(sender.update(AdvertContent(activityType: "c.d"), nowSeconds: now).isEmpty)
        #expect(sender.deferred)
        #expect(sender.tick(nowSeconds: now + 1).isEmpty)
        guard case .advertise = sender.tick(nowSeconds: now + 900).last else { Issue.record("not released"); return }
        #expect(!sender.deferred)
    }

    @Test func radioResetRepeatsTheSameBytes() {
        var sender = AdvertSender(secret: secret(1), restored: nil)
        let start = sender.start(nowSeconds: now)
        #expect(sender.radioReset() == [start[1]])
        #expect(sender.stop() == [.stop])
        #expect(sender.radioReset().isEmpty)
    }

    @Test func secretRotationRestartsSequence() throws {
        var sender = AdvertSender(secret: secret(1), restored: nil)
        _ = sender.start(nowSeconds: now)
        _ = sender.update(AdvertContent(activityType: "a.b"), nowSeconds: now)
        let actions = sender.rotateSecret(secret(2, generation: 2), nowSeconds: now)
        guard case .advertise(let bytes) = actions.last else { Issue.record("no advert"); return }
        var matcher = AdvertMatcher(epoch: 2_000_000)
        matcher.setMember(deviceID(1), secret: secret(2, generation: 2))
        #expect(try matcher.receive(bytes).sequence == 0)
        #expect(sender.counters.generation == 2)
    }
}
