// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import Foundation
import Testing
@testable import BatonService

/// Red team (issue 25): members' derived keys and type hashes are kept by the continuation, per
/// member and keyed by the secret they came from (Suggestions.swift `keys(of:secret:)`,
/// `typeHash(_:of:)`). A hash kept for a secret the member no longer has would make the source
/// refuse the Continue (or, for a hash that meant another type, answer for another activity).
@Suite("BatonServiceTests: red team, members' keys and type hashes kept per secret", .serialized)
struct RedTeamContinueKeyCacheTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rt-keycache-\(UUID().uuidString)")
    let type = "org.example.Reader.reading"

    /// A member entry of one identity with `secret` (signed, as a roster carries it).
    static func member(_ identity: Ed25519PrivateKey, _ secret: AdvertisingSecret) throws -> RosterMember {
        try RosterMember.signed(name: "alpha", identity: identity, secret: secret)
    }

    /// alpha re-keys (a new generation, as after a removal, §7.4) after beta continued from it once:
    /// beta's next Continue and its prefetch must hash the type with the new secret, which is all
    /// alpha's source accepts (a hash kept from the old secret is refused unknownActivity).
    @Test func aMemberThatReKeysIsContinuedAndPrefetchedWithItsNewSecretsHash() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, _) = try await suggestedChapter(in: directory, type: type, continuation: .init(prefetchAfter: .milliseconds(50)))
        let idA = await a.ring.deviceID
        #expect(try await b.continuation.continueActivity(from: "alpha", type: type, uid: getuid()) == "delivered")
        let old = try #require(await b.ring.snapshot().roster.members[idA]).secret
        #expect(await b.continuation.keptHashSecret(idA) == old)
        await a.ring.rekey(reason: "red team")
        let fresh = await a.ring.snapshot().ownSecret
        #expect(fresh.generation == old.generation + 1)
        #expect(DerivedKeys(secret: fresh).typeHash(type) != DerivedKeys(secret: old).typeHash(type))
        // Beta learns the new generation from alpha's RingSync.
        #expect(await eventually(timeout: .seconds(120)) {
            await b.ring.snapshot().roster.members[idA]?.secret.generation == fresh.generation
        })
        #expect(try await b.continuation.continueActivity(from: "alpha", type: type, uid: getuid()) == "delivered")
        #expect(await b.continuation.keptHashSecret(idA)?.generation == fresh.generation)
        #expect(await b.continuation.keptHashes(idA)?[type] == DerivedKeys(secret: fresh).typeHash(type))
        #expect(await b.continuation.keptKeysSecret(idA)?.generation == fresh.generation)
        // A new advert under the new secret: its suggestion is prefetched with the new hash.
        let next = try ActivityRecord(activityType: type, title: "Chapter 4", userInfo: [:], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), next)
        try await a.ring.radio.publish(next, uid: getuid())
        b.radio.hear(try #require(a.radio.onAir))
        #expect(await eventually(timeout: .seconds(120)) { b.board.suggestions.first?.revision != nil && b.board.titles.values.contains("Chapter 4") })
        let path = try #require(b.board.suggestions.first?.path)
        #expect(await b.continuation.isPrefetched(path))
        #expect(try await b.continuation.take(path, uid: getuid()) == "delivered")
        #expect(b.activities.delivered.last?.record.title == "Chapter 4")
        await a.stop()
        await b.stop()
    }

    /// Every way a member's secret moves (the daily ratchet: same generation and commitment, another
    /// day's key; a re-key: another generation), asked in any order, even with an entry taken before
    /// an await (a stale RosterMember): the hash is always that of the secret asked with, never one
    /// kept for another secret. The ratchet does not change K_type (§3: from the commitment).
    @Test func theHashIsAlwaysThatOfTheSecretAskedWith() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let node = try await BusLessNode.start(in: directory, name: "beta")
        let identity = try Ed25519PrivateKey(seed: SystemRandom().bytes(32))
        let day: UInt64 = 20_000
        let first = AdvertisingSecret.generate(generation: 3, day: day, using: SystemRandom())
        let nextDay = try #require(first.ratcheted(toDay: day + 1))
        let rekeyed = AdvertisingSecret.generate(generation: 4, day: day + 1, using: SystemRandom())
        let members = try [first, nextDay, rekeyed, first, rekeyed, nextDay].map { try Self.member(identity, $0) }
        for member in members {
            for type in [type, "org.example.Other.type"] {
                let expected = DerivedKeys(secret: member.secret).typeHash(type)
                #expect(await node.continuation.typeHash(type, of: member) == expected)
                #expect(await node.continuation.keptHashSecret(member.deviceID) == member.secret)
                #expect(await node.continuation.keptKeysSecret(member.deviceID) == member.secret)
            }
        }
        // The ratchet keeps the hash (K_type from C), a re-key changes it.
        #expect(DerivedKeys(secret: first).typeHash(type) == DerivedKeys(secret: nextDay).typeHash(type))
        #expect(DerivedKeys(secret: first).typeHash(type) != DerivedKeys(secret: rekeyed).typeHash(type))
        await node.stop()
    }

    /// The hashes are those of the type's exact UTF-8 bytes (§3). Swift's String equality is
    /// canonical equivalence, so a dictionary keyed by String would give the hash of one spelling
    /// to the other: two strings that compare equal with different bytes must still hash apart.
    @Test func typesEqualAsStringsButNotAsBytesHashApart() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let node = try await BusLessNode.start(in: directory, name: "beta")
        let identity = try Ed25519PrivateKey(seed: SystemRandom().bytes(32))
        let member = try Self.member(identity, AdvertisingSecret.generate(generation: 1, day: 20_000, using: SystemRandom()))
        let composed = "org.example.caf\u{E9}", decomposed = "org.example.cafe\u{301}"
        #expect(composed == decomposed && Array(composed.utf8) != Array(decomposed.utf8))
        let keys = DerivedKeys(secret: member.secret)
        #expect(await node.continuation.typeHash(composed, of: member) == keys.typeHash(composed))
        #expect(await node.continuation.typeHash(decomposed, of: member) == keys.typeHash(decomposed))
        #expect(keys.typeHash(composed) != keys.typeHash(decomposed))
        await node.stop()
    }

    /// A flood of Continue calls with distinct types keeps at most `typeHashLimit` hashes per member,
    /// each right; a member that leaves the ring (or this machine's new identity, §7.5) takes its
    /// keys and hashes with it.
    @Test func theHashesOfAMemberAreBoundedAndGoWithTheMember() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, _) = try await suggestedChapter(in: directory, type: type)
        let idA = await a.ring.deviceID
        let member = try #require(await b.ring.snapshot().roster.members[idA])
        for index in 0..<(3 * ContinuationService.typeHashLimit + 5) {
            let type = "org.example.flood\(index).type"
            #expect(await b.continuation.typeHash(type, of: member) == DerivedKeys(secret: member.secret).typeHash(type))
            #expect(await b.continuation.keptHashes(idA)?.count ?? 0 <= ContinuationService.typeHashLimit)
        }
        // Ring1.Continue with a type alpha does not publish: refused, nothing kept beyond the bound.
        for index in 0..<8 {
            _ = try? await b.continuation.continueActivity(from: "alpha", type: "org.example.absent\(index).type", uid: getuid())
        }
        #expect(await b.continuation.keptHashes(idA)?.count ?? 0 <= ContinuationService.typeHashLimit)
        // This machine takes a new identity: alpha is no member of its ring any more.
        _ = try await b.ring.resetIdentity()
        #expect(await eventually(timeout: .seconds(120)) {
            await b.continuation.keepsNothing
        })
        await a.stop()
        await b.stop()
    }

    /// alpha removes beta while beta is kept in alpha's continuation: the entries go at the ring change.
    @Test func aRemovedMembersKeysAndHashesAreDropped() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, _) = try await suggestedChapter(in: directory, type: type)
        let idB = await b.ring.deviceID
        let member = try #require(await a.ring.snapshot().roster.members[idB])
        _ = await a.continuation.typeHash(type, of: member)
        #expect(await a.continuation.keptHashSecret(idB) != nil)
        try await a.ring.remove("beta")
        #expect(await eventually(timeout: .seconds(120)) {
            await a.continuation.keepsNothing(for: idB)
        })
        await a.stop()
        await b.stop()
    }
}

/// What the continuation keeps for a member, read inside the actor (tests).
extension ContinuationService {
    func keptHashSecret(_ member: DeviceID) -> AdvertisingSecret? { typeHashes[member]?.secret }
    func keptHashes(_ member: DeviceID) -> [String: TypeHash]? { typeHashes[member]?.hashes }
    func keptKeysSecret(_ member: DeviceID) -> AdvertisingSecret? { derivedAdvertKeys[member]?.secret }
    var keepsNothing: Bool { typeHashes.isEmpty && derivedAdvertKeys.isEmpty }
    func keepsNothing(for member: DeviceID) -> Bool { typeHashes[member] == nil && derivedAdvertKeys[member] == nil }
}
