// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

/// The attacks of issue 11 against the roster, the sender and removal, each as the core sees it.
@Suite struct RingSecurityTests {
    let random = SeededRandomFake(seed: 1111)

    func pair(_ a: inout RingKeeper, _ b: inout RingKeeper) throws { try KeeperRing(random: random).pair(&a, &b) }
    func ring() throws -> (a: RingKeeper, b: RingKeeper, m: RingKeeper) { try KeeperRing(random: random).ring() }

    /// A roster whose one member entry is built from these fields (what a malicious member can send).
    func roster(_ entries: [[String: PropertyValue]], removed: [PropertyValue] = [], version: Int64 = 99) -> Roster? {
        try? Roster(value: .dictionary(["version": .integer(version), "members": .array(entries.map { .dictionary($0) }),
                                        "removed": .array(removed)]))
    }

    func entry(name: String, key: [UInt8], secret: AdvertisingSecret, signer: Ed25519PrivateKey) -> [String: PropertyValue] {
        let signature = try! signer.signature(for: RosterMember.signingInput(name: name, identityKey: key, secret: secret))
        return ["deviceId": .bytes(DeviceID(identityKey: key).bytes), "name": .string(name), "identityKey": .bytes(key),
                "secret": .bytes(secret.bytes), "generation": .integer(Int64(secret.generation)), "signature": .bytes(signature),
                "day": .integer(Int64(secret.day)), "commitment": .bytes(secret.chain?.commitment ?? secret.bytes)]
    }

    @Test func aMemberCannotTakeOverAnotherMembersOwnSecret() throws {
        var (a, _, m) = try ring()
        let mine = a.ownSecret
        let planted = AdvertisingSecret.generate(generation: RosterMember.maxGeneration, day: testDay, using: random)
        // Signed by m, not by a: the roster is refused as a whole.
        let forged = entry(name: "a", key: a.identity.publicKey, secret: planted, signer: m.identity)
        #expect(roster([forged]) == nil)
        #expect(throws: WireError.badSignature) { try Roster(value: .dictionary(["version": .integer(9), "removed": .array([]),
                                                                                  "members": .array([.dictionary(forged)])])) }
        // Even a correctly signed entry for a itself (a stolen old one, say) is never merged into a.
        let selfSigned = try RosterMember.signed(name: "a", identity: a.identity, secret: planted)
        let result = try a.receive(Roster(version: 50, members: [selfSigned, m.state.roster.members[m.deviceID]!]), from: m.deviceID, random: random)
        #expect(a.ownSecret == mine)
        #expect(!result.contains(.rotateOwnSecret(planted)))
    }

    @Test func generationTwoToThe32MinusOneIsRefusedAndNeverWraps() throws {
        var (a, _, m) = try ring()
        let top = try AdvertisingSecret(bytes: random.bytes(32), generation: UInt32.max)
        #expect(throws: WireError.malformed("generation")) { try RosterMember.signed(name: "m", identity: m.identity, secret: top) }
        var fields = entry(name: "m", key: m.identity.publicKey, secret: top, signer: m.identity)
        #expect(roster([fields]) == nil)
        fields["generation"] = .integer(Int64(UInt32.max) - 1)
        // The highest allowed generation: a re-key from there issues nothing rather than wrap to 0.
        var highest = a
        let last = try RosterMember.signed(name: "a", identity: a.identity,
                                           secret: AdvertisingSecret.issue(root: random.bytes(32), generation: RosterMember.maxGeneration, day: testDay))
        var state = highest.state
        var rebuilt = Roster(version: state.roster.version, members: Array(state.roster.members.values.filter { $0.deviceID != a.deviceID }) + [last])
        rebuilt.version = state.roster.version
        state.roster = rebuilt
        highest = try RingKeeper(state: state)
        let actions = highest.remove(m.deviceID, random: random)
        for case .rotateOwnSecret(let fresh) in actions { #expect(fresh.generation > RosterMember.maxGeneration - 1) }
        #expect(highest.ownSecret.generation == RosterMember.maxGeneration)
        // The ordinary path still counts up by one.
        let before = a.ownSecret.generation
        _ = a.remove(m.deviceID, random: random)
        #expect(a.ownSecret.generation == before + 1)
    }

    @Test func aHugeRosterVersionStaysEncodable() throws {
        var (a, _, m) = try ring()
        let top = Roster(version: UInt64(Int64.max), members: Array(m.state.roster.members.values))
        _ = try a.receive(top, from: m.deviceID, random: random)
        // Issue 23 finding 6: the received version is not adopted; a's counter stays its own.
        #expect(a.state.roster.version < 100)
        let beforeRemoval = a.state.roster.version
        _ = a.remove(m.deviceID, random: random)
        #expect(a.state.roster.version > beforeRemoval && a.state.roster.version < 100)
        #expect(try Roster(decoding: a.state.roster.encoded()) == a.state.roster)
    }

    @Test func aMemberCannotPlantAnIdentityNobodyVouchesFor() throws {
        var (a, b, m) = try ring()
        let x = try Ed25519PrivateKey(seed: random.bytes(32))
        let stranger = try Ed25519PrivateKey(seed: random.bytes(32))
        let xSecret = AdvertisingSecret.generate(generation: 1, day: testDay, using: random)
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        // Not signed by its own key: refused.
        #expect(roster([entry(name: "b", key: x.publicKey, secret: xSecret, signer: m.identity)]) == nil)
        // Self-signed, but no introducer, or one that is not a member: left out.
        let bare = try RosterMember.signed(name: "b", identity: x, secret: xSecret)
        let byStranger = bare.introduced(by: try Introduction.make(for: x.publicKey, by: stranger))
        for planted in [bare, byStranger] {
            var roster = m.state.roster
            roster.version += 10
            var copy = a
            let actions = try copy.receive(Roster(version: roster.version, members: Array(roster.members.values) + [planted]), from: m.deviceID, random: random)
            #expect(copy.state.roster.members[DeviceID(identityKey: x.publicKey)] == nil)
            #expect(!actions.contains { if case .membersChanged(let members) = $0 { members[DeviceID(identityKey: x.publicKey)] != nil } else { false } })
        }
        // An introduction claiming b as introducer but signed by m: dropped, not stored (issue 23),
        // so x is vouched by nobody and left out.
        let fakeIntroduction = try Introduction(introducer: b.deviceID,
                                                signature: m.identity.signature(for: Introduction.signingInput(member: x.publicKey)))
        _ = try a.receive(Roster(version: 200, members: [mEntry, bare.introduced(by: fakeIntroduction)]), from: m.deviceID, random: random)
        #expect(a.state.roster.members[DeviceID(identityKey: x.publicKey)] == nil)
        // m can still introduce, but then a knows who did, and removing m offers to remove x.
        let byM = bare.introduced(by: try Introduction.make(for: x.publicKey, by: m.identity))
        _ = try a.receive(Roster(version: 300, members: [mEntry, byM]), from: m.deviceID, random: random)
        #expect(a.state.roster.members[DeviceID(identityKey: x.publicKey)]?.introduction?.introducer == m.deviceID)
        #expect(a.introduced(by: m.deviceID) == [DeviceID(identityKey: x.publicKey)])
    }

    @Test func introductionsChainFromACurrentMemberButNotInACircle() throws {
        var (a, _, m) = try ring()
        let x = try Ed25519PrivateKey(seed: random.bytes(32)), y = try Ed25519PrivateKey(seed: random.bytes(32))
        let z = try Ed25519PrivateKey(seed: random.bytes(32)), w = try Ed25519PrivateKey(seed: random.bytes(32))
        func signed(_ key: Ed25519PrivateKey, by introducer: Ed25519PrivateKey) throws -> RosterMember {
            try RosterMember.signed(name: "n", identity: key, secret: .generate(generation: 1, day: testDay, using: random),
                                    introduction: Introduction.make(for: key.publicKey, by: introducer))
        }
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        // m introduced x, x introduced y: both join. z and w only vouch for each other: neither does.
        let received = Roster(version: 400, members: [mEntry, try signed(y, by: x), try signed(x, by: m.identity),
                                                      try signed(z, by: w), try signed(w, by: z)])
        var roster = a.state.roster
        let result = try roster.merge(received, me: a.deviceID)
        for key in [x, y] { #expect(roster.members[DeviceID(identityKey: key.publicKey)] != nil) }
        for key in [z, w] { #expect(roster.members[DeviceID(identityKey: key.publicKey)] == nil) }
        #expect(result.ignored == [DeviceID(identityKey: z.publicKey), DeviceID(identityKey: w.publicKey)])
        _ = try a.receive(received, from: m.deviceID, random: random)
        #expect(a.peers[DeviceID(identityKey: y.publicKey)] != nil)
    }

    @Test func oneRosterCannotDissolveTheRing() throws {
        var (a, b, m) = try ring()
        let members = Array(m.state.roster.members.values)
        let before = a.state
        // A mark for a claiming b as remover and one for b claiming a, both signed by m: refused as a whole.
        for (target, claimed) in [(a.deviceID, b.deviceID), (b.deviceID, a.deviceID)] {
            let bad = try RemovalMark(remover: claimed, signature: m.identity.signature(for: RemovalMark.signingInput(removed: target)))
            #expect(throws: WireError.badSignature) {
                try a.receive(Roster(version: 99, members: members, removalMarks: [target: bad]), from: m.deviceID, random: random)
            }
        }
        // A mark signed over another device id.
        let wrongTarget = try RemovalMark(remover: m.deviceID, signature: m.identity.signature(for: RemovalMark.signingInput(removed: deviceID(5))))
        #expect(throws: WireError.badSignature) {
            try a.receive(Roster(version: 99, members: members, removalMarks: [b.deviceID: wrongTarget]), from: m.deviceID, random: random)
        }
        // Marks by a device that is not a member are left out.
        let outsider = try Ed25519PrivateKey(seed: random.bytes(32))
        let outsiderMarks = [a.deviceID: try RemovalMark.make(removing: a.deviceID, by: outsider),
                             b.deviceID: try RemovalMark.make(removing: b.deviceID, by: outsider)]
        _ = try a.receive(Roster(version: 99, members: members, removalMarks: outsiderMarks), from: m.deviceID, random: random)
        #expect(a.state.roster.members.keys.sorted() == before.roster.members.keys.sorted())
        #expect(a.state.roster.removed.isEmpty)
        // Unsigned marks (the old format) do not even decode.
        let unsigned: PropertyValue = .bytes(b.deviceID.bytes)
        #expect(roster([], removed: [unsigned]) == nil)
    }

    @Test func aRemovedMachinePairingAgainIsRefusedBeforeTheRosterIsSent() throws {
        var (a, _, m) = try ring()
        _ = a.remove(m.deviceID, random: random)
        #expect(throws: WireError.peerRemoved) { try a.checkPairingPeer(m.deviceID) }
        // m starts over alone and pairs with a again; a is the responder.
        var h = PairingHarness(random: random, initiatorInfo: m.pairingInfo(), responderInfo: a.pairingInfo())
        h.run(h.initiator.start(nowSeconds: 0), from: .initiator)
        h.confirm(initiator: true, responder: true)
        let sentByA = h.sent.filter { $0.role == .responder }.map(\.frame)
        #expect(h.failures[.responder] == .peerRemoved)
        #expect(h.results[.responder] == nil && h.results[.initiator] == nil)
        // a sent its confirm (counter 0) and identity (counter 1), never its roster (counter 2).
        let counters = sentByA.filter { $0.type == .pairSealed }.map { Array($0.payload.prefix(8)) }
        #expect(counters.count == 2)
        #expect(!counters.contains([0, 0, 0, 0, 0, 0, 0, 2]))
        let refusal = try ErrorFrame(payload: try #require(sentByA.last { $0.type == .error }).payload)
        #expect(refusal.code == .notPermitted && refusal.message == "peerRemoved")
        // Should a result reach the keeper anyway, it is refused there too.
        var result = PairingResult(peer: try #require(m.state.roster.members[m.deviceID]), peerRoster: m.state.roster)
        #expect(throws: WireError.peerRemoved) { try a.pair(result, random: random) }
        result.peer = try #require(a.state.roster.members[a.deviceID])
        #expect(throws: WireError.badSignature) { try a.pair(result, random: random) }
    }

    @Test func aReKeyThatFailedToReachAMemberIsRetriedAtItsNextSighting() throws {
        var (a, b, m) = try ring()
        let actions = a.remove(m.deviceID, random: random)
        #expect(actions.contains(.sync(b.deviceID)))
        let needed = a.state.roster.version
        #expect(a.state.pendingSyncs == [b.deviceID: needed])
        // The sync failed (b was away). The pending sync is part of the persisted state...
        guard case .persist(let persisted) = actions.first else { Issue.record("persist first"); return }
        #expect(persisted.pendingSyncs[b.deviceID] == needed)
        var restarted = try RingKeeper(state: persisted)
        // ...so after a restart, b's next sighting retries it.
        #expect(restarted.sighted(b.deviceID) == [.sync(b.deviceID)])
        #expect(restarted.sighted(m.deviceID).isEmpty)
        // An answer with an older roster does not clear it; the current one does.
        #expect(restarted.syncDelivered(to: b.deviceID, version: needed - 1).isEmpty)
        #expect(restarted.sighted(b.deviceID) == [.sync(b.deviceID)])
        let cleared = restarted.syncDelivered(to: b.deviceID, version: needed)
        #expect(cleared == [.persist(restarted.state)])
        #expect(restarted.sighted(b.deviceID).isEmpty)
        // b learns the new secret from the retried sync.
        _ = try b.receive(restarted.state.roster, from: a.deviceID, random: random)
        #expect(b.peers[a.deviceID] == restarted.ownSecret)
        #expect(b.peers[m.deviceID] == nil)
    }
}

/// What the sender seals, as (generation, epoch, seq) → body, across clock steps (§4.2).
@Suite struct SenderClockTests {
    struct Seal: Hashable { var generation: UInt32; var epoch: UInt64; var sequence: UInt8 }

    /// Opens every advertised byte string and records which body it sealed under which nonce.
    func record(_ actions: [AdvertSender.Action], secret: AdvertisingSecret, into seals: inout [Seal: [[UInt8]]]) {
        let keys = DerivedKeys(secret: secret)
        for case .advertise(let advert) in actions {
            for epoch in UInt64(1_999_900)...2_000_010 {
                let material = keys.epochMaterial(epoch)
                guard Array(advert[1..<7]) == material.tag,
                      let opened = try? RingAdvert.open(advert, keys: keys, epoch: epoch, mask: material.mask) else { continue }
                let seal = Seal(generation: secret.generation, epoch: epoch, sequence: opened.sequence)
                let body = Array(advert[8..<16])
                if !(seals[seal, default: []].contains(body)) { seals[seal, default: []].append(body) }
            }
        }
    }

    @Test func aClockSteppingBackAcrossAnEpochNeverSealsANonceTwice() {
        let s = secret(0x42)
        var sender = AdvertSender(secret: s, restored: nil)
        var seals: [Seal: [[UInt8]]] = [:]
        let late = seconds(epoch: 2_000_001) + 10, early = seconds(epoch: 2_000_000) + 890
        record(sender.start(nowSeconds: late), secret: s, into: &seals)
        // NTP steps the clock back across the boundary; content changes while it is behind.
        let behind = sender.update(AdvertContent(activityType: "org.example.a"), nowSeconds: early)
        #expect(!behind.contains { if case .advertise = $0 { true } else { false } })
        #expect(sender.deferred)
        record(behind, secret: s, into: &seals)
        record(sender.tick(nowSeconds: early + 5), secret: s, into: &seals)
        record(sender.update(AdvertContent(activityType: "org.example.b"), nowSeconds: early + 6), secret: s, into: &seals)
        // The clock passes the high-water epoch again: the deferred change goes out, after seq 0.
        record(sender.tick(nowSeconds: late + 20), secret: s, into: &seals)
        record(sender.update(AdvertContent(activityType: "org.example.c"), nowSeconds: late + 30), secret: s, into: &seals)
        // A restart while the clock is still behind continues from the persisted counters.
        var restarted = AdvertSender(secret: s, restored: sender.counters)
        record(restarted.start(nowSeconds: early), secret: s, into: &seals)
        record(restarted.update(AdvertContent(activityType: "org.example.d"), nowSeconds: late), secret: s, into: &seals)
        #expect(seals.values.allSatisfy { $0.count == 1 }, "\(seals.filter { $0.value.count > 1 }.keys)")
        #expect(seals.keys.map(\.epoch).allSatisfy { $0 == 2_000_001 })
        #expect(seals.count == 4)
    }

    @Test func aClockFarBehindReKeysInsteadOfGoingSilent() {
        let old = secret(0x42), fresh = secret(0x43, generation: 2)
        var sender = AdvertSender(secret: old, restored: nil)
        var seals: [Seal: [[UInt8]]] = [:]
        record(sender.start(nowSeconds: seconds(epoch: 2_000_010)), secret: old, into: &seals)
        // Less than a day behind: wait. More: a new secret, since waiting would silence the device.
        #expect(sender.update(AdvertContent(activityType: "org.example.a"), nowSeconds: seconds(epoch: 2_000_001)) == [.persist(sender.counters, sender.bootMark)])
        #expect(!sender.needsRekey)
        let farBehind = seconds(epoch: 2_000_010 - AdvertSender.maxEpochsBehind - 1)
        #expect(sender.tick(nowSeconds: farBehind).isEmpty)
        #expect(sender.needsRekey)
        let after = sender.rotateSecret(fresh, nowSeconds: farBehind)
        record(after, secret: fresh, into: &seals)
        #expect(seals.keys.contains(Seal(generation: 2, epoch: UInt64(farBehind / 900), sequence: 0)))
        #expect(seals.values.allSatisfy { $0.count == 1 })
    }

    /// Issue 23 finding 7: a state directory restored from a copy (backup, btrfs or VM snapshot
    /// rollback) on the same machine, started again within the epoch it last sealed in. Without the
    /// start floor the restored counters (older) let it seal (e, 0) again with another body.
    @Test func aRestoredCopyStartedWithinTheLastSealedEpochNeverSealsANonceTwice() throws {
        let random = SeededRandomFake(seed: 78)
        let keeper = try RingKeeper.create(name: "a", today: testDay, random: random)
        let machine = [UInt8](repeating: 0xA, count: 32)
        var seals: [Seal: [[UInt8]]] = [:]
        let t0 = seconds(epoch: 2_000_000) + 10
        var first = AdvertSender(secret: keeper.ownSecret, restored: nil, machine: machine)
        record(first.start(nowSeconds: t0), secret: keeper.ownSecret, into: &seals)
        let copy = first.counters
        // The run goes on into the next epoch and seals there, then the copy is restored.
        let t1 = seconds(epoch: 2_000_001) + 10
        record(first.tick(nowSeconds: t1), secret: keeper.ownSecret, into: &seals)
        record(first.update(AdvertContent(activityType: "org.example.a"), nowSeconds: t1 + 1), secret: keeper.ownSecret, into: &seals)
        // Started from the copy within epoch 2_000_001, forgotten seals possible until now: nothing
        // is sealed in this epoch...
        var restored = AdvertSender(secret: keeper.ownSecret, restored: copy, machine: machine, forgottenSealsUntil: t1 + 2, countersExpected: true)
        #expect(restored.startFloor == 2_000_002)
        let started = restored.start(nowSeconds: t1 + 3)
        let changed = restored.update(AdvertContent(activityType: "org.example.b"), nowSeconds: t1 + 4)
        #expect(!(started + changed).contains { if case .advertise = $0 { true } else { false } })
        #expect(restored.deferred && !restored.needsRekey)
        record(started + changed, secret: keeper.ownSecret, into: &seals)
        // ...and the waiting change goes out at the next epoch.
        let next = restored.tick(nowSeconds: seconds(epoch: 2_000_002) + 1)
        #expect(next.contains { if case .advertise = $0 { true } else { false } })
        record(next, secret: keeper.ownSecret, into: &seals)
        #expect(seals.values.allSatisfy { $0.count == 1 }, "a nonce sealed two bodies: \(seals.filter { $0.value.count > 1 }.keys)")
        // The first start of a boot (a rollback means a reboot): forgotten seals are older than the
        // boot, so a start in a later epoch seals at once.
        var booted = AdvertSender(secret: keeper.ownSecret, restored: copy, machine: machine,
                                  forgottenSealsUntil: seconds(epoch: 2_000_002) - 30, countersExpected: true)
        #expect(booted.start(nowSeconds: seconds(epoch: 2_000_003) + 1).contains { if case .advertise = $0 { true } else { false } })
        // A new own secret lifts the floor: nothing was sealed under it.
        var rekeyed = AdvertSender(secret: keeper.ownSecret, restored: copy, machine: machine, forgottenSealsUntil: t1 + 2, countersExpected: true)
        #expect(rekeyed.rotateSecret(secret(0x51), nowSeconds: t1 + 3).isEmpty == false)
        #expect(rekeyed.startFloor == 0)
    }

    /// §4.2 "Restarts": a restart within the boot finds the boot mark (written before every seal,
    /// beside the counters, where a disk restore cannot reach): it seals at once, in the same epoch,
    /// after every seal the mark records, even from an older copy of the counters. A mark of another
    /// secret does not count: the start floor applies.
    @Test func aRestartWithTheBootMarkSealsAtOnceAndNeverReusesANonce() throws {
        let random = SeededRandomFake(seed: 79)
        let keeper = try RingKeeper.create(name: "a", today: testDay, random: random)
        let machine = [UInt8](repeating: 0xB, count: 32)
        var seals: [Seal: [[UInt8]]] = [:]
        var mark: SenderBootMark?
        func carry(_ actions: [AdvertSender.Action]) {
            for case .persist(_, let written) in actions { mark = written }
            record(actions, secret: keeper.ownSecret, into: &seals)
        }
        let t0 = seconds(epoch: 2_000_000) + 10
        var first = AdvertSender(secret: keeper.ownSecret, restored: nil, machine: machine)
        carry(first.start(nowSeconds: t0))
        let copy = first.counters
        carry(first.update(AdvertContent(activityType: "org.example.a"), nowSeconds: t0 + 1))
        carry(first.update(AdvertContent(activityType: "org.example.b"), nowSeconds: t0 + 2))
        #expect(mark == first.bootMark && mark?.counters.nextSequence == 3)
        // A plain restart (the counters are current) and a restart from the older copy: both seal
        // at once in the same epoch, after sequence 2, although the start bound is now.
        for restored in [first.counters, copy] {
            var again = AdvertSender(secret: keeper.ownSecret, restored: restored, machine: machine, forgottenSealsUntil: t0 + 3,
                                     bootMark: mark, countersExpected: true)
            #expect(again.resumedFromBootMark && again.startFloor == 0)
            let started = again.start(nowSeconds: t0 + 4)
            #expect(started.contains { if case .advertise = $0 { true } else { false } })
            #expect(again.counters.epoch == 2_000_000 && again.counters.nextSequence == mark!.counters.nextSequence + 1)
            carry(started)
        }
        #expect(seals.values.allSatisfy { $0.count == 1 }, "a nonce sealed two bodies: \(seals.filter { $0.value.count > 1 }.keys)")
        // The mark follows a day ratchet (same generation), not a new secret.
        var ratcheted = AdvertSender(secret: keeper.ownSecret, restored: copy, machine: machine)
        ratcheted.ratchet(keeper.ownSecret.ratcheted(toDay: keeper.ownSecret.chain!.day + 1)!)
        #expect(ratcheted.secretID == first.secretID)
        // A mark written under another secret (a re-key later in this boot) says nothing about
        // this one: the start bound holds and the first seal waits for the next epoch.
        let other = SenderBootMark(secretID: AdvertSender.secretID(of: secret(0x60)), counters: mark!.counters)
        var unmarked = AdvertSender(secret: keeper.ownSecret, restored: copy, machine: machine, forgottenSealsUntil: t0 + 5,
                                    bootMark: other, countersExpected: true)
        #expect(!unmarked.resumedFromBootMark && unmarked.startFloor == 2_000_001)
        #expect(!unmarked.start(nowSeconds: t0 + 6).contains { if case .advertise = $0 { true } else { false } })
    }

    /// Issue 23 finding 7: a ring copied without its advert counters (or whose counters were lost)
    /// replaces its secret before sealing anything; a ring created just now has no counters yet and needs nothing.
    @Test func aRingWithoutItsCountersReKeysBeforeAnySeal() throws {
        let s = secret(0x43)
        var copied = AdvertSender(secret: s, restored: nil, machine: [1], forgottenSealsUntil: seconds(epoch: 2_000_000), countersExpected: true)
        #expect(copied.needsRekey)
        #expect(copied.start(nowSeconds: seconds(epoch: 2_000_005)).allSatisfy { if case .advertise = $0 { false } else { true } })
        var created = AdvertSender(secret: s, restored: nil, machine: [1])
        #expect(!created.needsRekey && created.startFloor == 0)
        #expect(created.start(nowSeconds: seconds(epoch: 2_000_000)).contains { if case .advertise = $0 { true } else { false } })
    }

    @Test func countersFromAnotherMachineForceARekeyBeforeAnySeal() throws {
        let random = SeededRandomFake(seed: 77)
        var keeper = try RingKeeper.create(name: "a", today: testDay, random: random)
        let machineA = [UInt8](repeating: 0xA, count: 32), machineB = [UInt8](repeating: 0xB, count: 32)
        var original = AdvertSender(secret: keeper.ownSecret, restored: nil, machine: machineA)
        _ = original.start(nowSeconds: seconds(epoch: 2_000_000))
        #expect(original.counters.machine == machineA)
        // The same state directory on machine B (disk image, restored backup).
        var clone = AdvertSender(secret: keeper.ownSecret, restored: original.counters, machine: machineB)
        #expect(clone.needsRekey)
        #expect(clone.start(nowSeconds: seconds(epoch: 2_000_000) + 1).isEmpty)
        #expect(clone.update(AdvertContent(activityType: "org.example.a"), nowSeconds: seconds(epoch: 2_000_000) + 2)
            .allSatisfy { if case .advertise = $0 { false } else { true } })
        // The action: a fresh own secret of the next generation, told to every member.
        let old = keeper.ownSecret
        let actions = keeper.rekey(random: random)
        #expect(keeper.ownSecret.generation == old.generation + 1 && keeper.ownSecret.bytes != old.bytes)
        #expect(actions.contains(.rotateOwnSecret(keeper.ownSecret)))
        let after = clone.rotateSecret(keeper.ownSecret, nowSeconds: seconds(epoch: 2_000_000) + 3)
        #expect(!clone.needsRekey)
        #expect(after.contains { if case .advertise = $0 { true } else { false } })
        #expect(clone.counters.machine == machineB)
        // The same machine, or counters written before the check existed, need nothing.
        #expect(!AdvertSender(secret: old, restored: original.counters, machine: machineA).needsRekey)
        var legacy = original.counters
        legacy.machine = nil
        #expect(!AdvertSender(secret: old, restored: legacy, machine: machineB).needsRekey)
    }
}
