// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonCore
import BatonCrypto
import Testing
@testable import BatonService

/// Red-team attack on the response to a stolen machine, formed from security.md ("Respond from any
/// other member: `bt-pair remove NAME`") and dbus-api.md (Pairing1.Remove takes "name, short id or
/// device id"). A member may introduce identities in its own name, under any name of up to 64 bytes.
@Suite struct RedTeamRemovalTests {
    let random = SystemRandom()
    let today: UInt64 = 20_833

    /// a's ring with b and m as members (a paired each), m's keeper (the thief's copy of its state).
    func ring() throws -> (a: RingKeeper, m: RingKeeper) {
        var a = try RingKeeper.create(name: "alpha", today: today, random: random)
        let b = try RingKeeper.create(name: "beta", today: today, random: random)
        let m = try RingKeeper.create(name: "mallory", today: today, random: random)
        for peer in [b, m] {
            _ = try a.pair(PairingResult(peer: try #require(peer.state.roster.members[peer.deviceID]), peerRoster: peer.state.roster),
                           random: random)
        }
        return (a, m)
    }

    func snapshot(of keeper: RingKeeper) -> RingSnapshot {
        RingSnapshot(deviceID: keeper.deviceID, name: keeper.state.name, identity: keeper.identity,
                     roster: keeper.state.roster, ownSecret: keeper.ownSecret)
    }

    /// Attack: the thief, still a member, introduces three throw-away identities named "mallory",
    /// m's short id and m's full device id. Every text Pairing1.Remove accepts for m then matches
    /// two members, so `bt-pair remove` refuses each one (UnknownDevice, "no single ring member
    /// matches") and the stolen machine keeps its place (and, introducing fresh ones whenever the
    /// puppets are removed by their own ids, can keep it). Fixed: ids win over names, and among
    /// namesakes the one that introduced the others is meant.
    @Test func aThiefNamesPuppetsAfterItselfAndCannotBeRemovedByAnyText() throws {
        var (a, m) = try ring()
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        var puppets: [RosterMember] = []
        for name in ["mallory", m.deviceID.shortForm, m.deviceID.description] {
            let key = try Ed25519PrivateKey(seed: random.bytes(32))
            puppets.append(try RosterMember.signed(name: name, identity: key, secret: .generate(generation: 1, day: today, using: random),
                                                   introduction: Introduction.make(for: key.publicKey, by: m.identity)))
        }
        _ = try a.receive(Roster(version: 50, members: [mEntry] + puppets), from: m.deviceID, random: random)
        #expect(a.state.roster.members.count == 6)
        let view = snapshot(of: a)
        for text in ["mallory", m.deviceID.shortForm, m.deviceID.description] {
            #expect(view.member(matching: text)?.deviceID == m.deviceID, "Remove(\(text)) finds no single member")
        }
        // The full device id of an honest member with no namesake still resolves.
        let b = try #require(a.state.roster.members.values.first { $0.name == "beta" })
        #expect(view.member(matching: b.deviceID.description)?.deviceID == b.deviceID)
    }

    /// Attack: the thief names a puppet after an honest member. Neither introduced the other, so
    /// the name is ambiguous (Remove lists both with their ids) and each short id still resolves.
    @Test func aPuppetNamedAfterAnHonestMemberMakesTheNameAmbiguousNotTheIDs() throws {
        var (a, m) = try ring()
        let mEntry = try #require(m.state.roster.members[m.deviceID])
        let key = try Ed25519PrivateKey(seed: random.bytes(32))
        let puppet = try RosterMember.signed(name: "beta", identity: key, secret: .generate(generation: 1, day: today, using: random),
                                             introduction: Introduction.make(for: key.publicKey, by: m.identity))
        _ = try a.receive(Roster(version: 50, members: [mEntry, puppet]), from: m.deviceID, random: random)
        let view = snapshot(of: a)
        let b = try #require(a.state.roster.members.values.first { $0.name == "beta" && $0.deviceID != puppet.deviceID })
        #expect(Set(view.members(matching: "beta").map(\.deviceID)) == [b.deviceID, puppet.deviceID])
        #expect(view.member(matching: "beta") == nil)
        #expect(view.member(matching: b.deviceID.shortForm)?.deviceID == b.deviceID)
        #expect(view.member(matching: puppet.deviceID.shortForm)?.deviceID == puppet.deviceID)
    }
}
