// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

/// Vectors of whole pairing exchanges, identity signatures, rosters and RingSync
/// (docs/protocol.md §10.8–§10.10), produced by running two real PairingSessions with fixed
/// randomness against each other.
extension ProtocolVectors {
    struct PartyVector: Codable, Equatable {
        var x25519Private: String, nonce: String, name: String, identitySeed: String, identityKey: String, deviceId: String
        /// The key of `day` (the generation's root: issued that day) and the commitment it leads to (§3.1).
        var secret: String, day: UInt64, commitment: String, generation: UInt32, endpoints: [String], rosterVersion: UInt64
        /// The bytes the party signs in its identity message (§7.2) and the Ed25519 signature.
        var signedBytes: String, signature: String
    }
    struct PairingFrameVector: Codable, Equatable {
        var from: String, message: String, frame: String
        var counter: UInt64?, plaintext: String?
    }
    struct PairingExchangeVector: Codable, Equatable {
        var sessionID: String, transcriptHash: String, code: String
        /// The second code (§7.1 "What the users do"): u32be(H[4..<8]) mod 10⁶.
        var secondCode: String
        var initiator: PartyVector, responder: PartyVector
        var frames: [PairingFrameVector]
    }
    struct RosterMemberVector: Codable, Equatable {
        var name: String, identitySeed: String, identityKey: String, deviceId: String, secret: String, day: UInt64, commitment: String, generation: UInt32
        /// Ed25519 by the member over `signedBytes` (§7.3).
        var signedBytes: String, signature: String
        /// The introducer's device id and its signature over `introductionSignedBytes`, when the entry has one.
        var introducedBy: String?, introductionSignedBytes: String?, introduction: String?
    }
    struct RemovalVector: Codable, Equatable {
        var deviceId: String, removedBy: String, signedBytes: String, signature: String
        /// The tombstone keeps the removed device's identity key and introductions (§7.3); `record`
        /// is the bytes value it travels as.
        var identityKey: String, introductions: [IntroductionVector], record: String
        /// A cascading mark (§7.3 "Cascade"); absent for a plain one.
        var cascading: Bool?
    }
    struct IntroductionVector: Codable, Equatable { var introducedBy: String, signature: String }
    struct RosterVector: Codable, Equatable {
        var comment: String, version: UInt64, members: [RosterMemberVector], removed: [RemovalVector]
        var roster: String, ringSyncRequestID: UInt32, ringSyncFrame: String
        /// §7.3 step 7: what Hello compares (its first 8 bytes).
        var digest: String
        /// Entries a cascading mark takes out (§7.3 step 5a), ascending; absent when none.
        var takenOut: [String]?
    }
    /// §7.3 merge: the receiver `me` holds `local`, merges each of `received` in order (the first one
    /// from the pairing peer `anchor`, when given) and holds `result` with `digest`; or the first
    /// merge is refused with `error` and nothing changes.
    struct RosterMergeVector: Codable, Equatable {
        var comment: String, me: String, anchor: String?, local: String, received: [String]
        var result: String?, digest: String?, newlyRemoved: [String], error: String?
        /// The members after the merge (ascending device ids): `result`'s entries less those a cascade takes out.
        var members: [String]?
    }
    struct ReplayVector: Codable, Equatable {
        var comment: String, adverts: [String], outcomes: [String]
    }
    /// One member's key at a receiver that holds `stored` and receives `received` of the same
    /// generation, on the receiver's day `receiverDay` (§3.1, §7.3): `result` is what it stores.
    struct KeyMergeVector: Codable, Equatable {
        var comment: String, generation: UInt32, receiverDay: UInt64
        var stored: DayKeyVector, received: DayKeyVector, result: DayKeyVector
    }
    struct DayKeyVector: Codable, Equatable { var secret: String, day: UInt64, commitment: String }
}

struct PairingParty {
    var role: PairingSession.Role
    var x25519: X25519PrivateKey
    var nonce: [UInt8]
    var name: String
    var seed: [UInt8]
    var secret: AdvertisingSecret
    var endpoints: [String]
    var identity: Ed25519PrivateKey { try! Ed25519PrivateKey(seed: seed) }
    var member: RosterMember { try! RosterMember.signed(name: name, identity: identity, secret: secret) }
    var roster: Roster { Roster(version: 1, members: [member]) }
    var info: LocalPairingInfo { LocalPairingInfo(name: name, identityKey: identity, roster: roster, endpoints: endpoints) }

    func session(_ sessionID: [UInt8]) throws -> PairingSession {
        try PairingSession(role: role, sessionID: sessionID, ephemeralKey: x25519, nonce: nonce, local: info)
    }

    /// "baton/v1 identity" || role || H || name || identityKey (§7.2): no secret.
    func signedBytes(transcript: [UInt8]) -> [UInt8] {
        "baton/v1 identity".utf8Bytes + [role == .initiator ? 1 : 2] + transcript + Array(name.utf8) + identity.publicKey
    }

    func vector(transcript: [UInt8]) throws -> ProtocolVectors.PartyVector {
        let signed = signedBytes(transcript: transcript)
        return .init(x25519Private: hex(x25519.rawRepresentation), nonce: hex(nonce), name: name, identitySeed: hex(seed),
                     identityKey: hex(identity.publicKey), deviceId: hex(member.deviceID.bytes), secret: hex(secret.bytes),
                     day: secret.day, commitment: hex(secret.chain!.commitment), generation: secret.generation, endpoints: endpoints, rosterVersion: roster.version,
                     signedBytes: hex(signed), signature: hex(try identity.signature(for: signed)))
    }
}

enum PairingVectorSource {
    static let sessionID: [UInt8] = Array(0xA0..<0xA8)

    static func parties() throws -> (initiator: PairingParty, responder: PairingParty) {
        let initiator = PairingParty(role: .initiator, x25519: try X25519PrivateKey(rawRepresentation: Array(repeating: 0x11, count: 32)),
                                     nonce: Array(repeating: 0x33, count: 16), name: "laptop", seed: Array(repeating: 0x55, count: 32),
                                     secret: try AdvertisingSecret.issue(root: Array(repeating: 0x66, count: 32), generation: 1, day: testDay),
                                     endpoints: ["192.0.2.10:47001", "[2001:db8::10]:47001"])
        let responder = PairingParty(role: .responder, x25519: try X25519PrivateKey(rawRepresentation: Array(repeating: 0x22, count: 32)),
                                     nonce: Array(repeating: 0x44, count: 16), name: "Schreibtisch-Ü", seed: Array(repeating: 0x77, count: 32),
                                     secret: try AdvertisingSecret.issue(root: Array(repeating: 0x88, count: 32), generation: 3, day: testDay), endpoints: [])
        return (initiator, responder)
    }

    /// Runs both roles against each other (both users accept) and records every frame in the order
    /// each side sent it; checks both sides complete with the other's identity.
    static func exchange() throws -> ProtocolVectors.PairingExchangeVector {
        let (i, r) = try parties()
        var initiator = try i.session(sessionID), responder = try r.session(sessionID)
        var frames: [(from: String, frame: Frame)] = []
        var toResponder: [Frame] = [], toInitiator: [Frame] = []
        var completed: [String: PairingResult] = [:]
        func collect(_ actions: [PairingSession.Action], from side: String) {
            for action in actions {
                switch action {
                case .send(let frame):
                    frames.append((side, frame))
                    if side == "initiator" { toResponder.append(frame) } else { toInitiator.append(frame) }
                case .completed(let result): completed[side] = result
                case .failed(let error): Issue.record("\(side) failed: \(error)")
                case .showCode: break
                }
            }
        }
        collect(initiator.start(nowSeconds: 0), from: "initiator")
        func deliver() {
            while !toResponder.isEmpty || !toInitiator.isEmpty {
                for frame in toResponder { collect(responder.receive(frame, nowSeconds: 1), from: "responder") }
                toResponder = []
                for frame in toInitiator { collect(initiator.receive(frame, nowSeconds: 1), from: "initiator") }
                toInitiator = []
            }
        }
        deliver()
        // Both users answer before either side has heard the other's answer (§7.2: no side waits).
        collect(initiator.userConfirmed(true), from: "initiator")
        collect(responder.userConfirmed(true), from: "responder")
        deliver()
        guard completed["initiator"]?.peer == r.member, completed["responder"]?.peer == i.member else {
            throw WireError.unexpectedMessage("pairing vector exchange did not complete")
        }
        let commitment = PairingSession.commitment(publicKey: i.x25519.publicKey, nonce: i.nonce)
        let h = SHA256.hash("baton/v1 pair".utf8Bytes + sessionID + commitment + i.x25519.publicKey + i.nonce + r.x25519.publicKey + r.nonce)
        let keys = try HKDF.deriveKey(ikm: try i.x25519.sharedSecret(with: r.x25519.publicKey), salt: h,
                                      info: "baton/v1 pair keys".utf8Bytes, count: 64)
        let frameVectors = try frames.map { side, frame -> ProtocolVectors.PairingFrameVector in
            var vector = ProtocolVectors.PairingFrameVector(from: side, message: "\(frame.type)", frame: hex(try frame.encoded()))
            if frame.type == .pairSealed {
                var reader = ByteReader(frame.payload)
                let counter = try reader.readUInt64()
                let body = try reader.readBytes(reader.remaining)
                let key = try AESGCMKey(side == "initiator" ? Array(keys[0..<32]) : Array(keys[32..<64]))
                let plaintext = try AESGCM.open(key: key, nonce: PairingSession.sealedNonce(counter), ciphertext: Array(body.dropLast(16)),
                                                tag: Array(body.suffix(16)), aad: "baton/v1 sealed".utf8Bytes + h)
                vector.counter = counter
                vector.plaintext = hex(plaintext)
                vector.message = PropertyValueCodec.decodeOrNil(plaintext)?.dictionaryValue?["msg"]?.stringValue ?? "?"
            }
            return vector
        }
        return .init(sessionID: hex(sessionID), transcriptHash: hex(h), code: PairingSession.shortAuthenticationString(transcriptHash: h),
                     secondCode: PairingSession.confirmationCode(transcriptHash: h), initiator: try i.vector(transcript: h), responder: try r.vector(transcript: h), frames: frameVectors)
    }

    static func rosterMember(name: String, seedByte: UInt8, secretByte: UInt8, generation: UInt32,
                             introducer: Ed25519PrivateKey? = nil) throws -> (RosterMember, ProtocolVectors.RosterMemberVector) {
        let seed = [UInt8](repeating: seedByte, count: 32)
        let identity = try Ed25519PrivateKey(seed: seed)
        let key = identity.publicKey
        let introduction = try introducer.map { introducer throws(WireError) in try Introduction.make(for: key, by: introducer) }
        let member = try RosterMember.signed(name: name, identity: identity,
                                             secret: AdvertisingSecret.issue(root: Array(repeating: secretByte, count: 32), generation: generation, day: testDay),
                                             introduction: introduction)
        return (member, .init(name: name, identitySeed: hex(seed), identityKey: hex(key), deviceId: hex(member.deviceID.bytes),
                              secret: hex(member.secret.bytes), day: member.secret.day, commitment: hex(member.secret.chain!.commitment), generation: generation,
                              signedBytes: hex(RosterMember.signingInput(name: name, identityKey: key, secret: member.secret)),
                              signature: hex(member.signature), introducedBy: introduction.map { hex($0.introducer.bytes) },
                              introductionSignedBytes: introduction.map { _ in hex(Introduction.signingInput(member: key)) },
                              introduction: introduction.map { hex($0.signature) }))
    }

    static let rosterSeeds: [String: UInt8] = ["laptop": 0x55, "Schreibtisch-Ü": 0x77, "tablet": 0x99, "phone": 0xBB, "old": 0xDD, "thief": 0x11]
    static func rosterKey(_ name: String) -> Ed25519PrivateKey { try! Ed25519PrivateKey(seed: Array(repeating: rosterSeeds[name]!, count: 32)) }
    static func rosterID(_ name: String) -> DeviceID { DeviceID(identityKey: rosterKey(name).publicKey) }

    /// The members of §10.10: laptop founded the ring; it paired Schreibtisch-Ü, phone and thief,
    /// Schreibtisch-Ü paired tablet, phone paired old.
    static func rosterMembers() throws -> [String: (RosterMember, ProtocolVectors.RosterMemberVector)] {
        [
            "laptop": try rosterMember(name: "laptop", seedByte: 0x55, secretByte: 0x66, generation: 1),
            "Schreibtisch-Ü": try rosterMember(name: "Schreibtisch-Ü", seedByte: 0x77, secretByte: 0x88, generation: 3, introducer: rosterKey("laptop")),
            "tablet": try rosterMember(name: "tablet", seedByte: 0x99, secretByte: 0xAA, generation: 2, introducer: rosterKey("Schreibtisch-Ü")),
            "phone": try rosterMember(name: "phone", seedByte: 0xBB, secretByte: 0xCC, generation: 1, introducer: rosterKey("laptop")),
            "old": try rosterMember(name: "old", seedByte: 0xDD, secretByte: 0xEE, generation: 1, introducer: rosterKey("phone")),
            "thief": try rosterMember(name: "thief", seedByte: 0x11, secretByte: 0x22, generation: 1, introducer: rosterKey("laptop")),
        ]
    }

    /// A roster of `members` with the tombstones `removed` (name → remover's name), made as a
    /// device removes a member (§7.4): the tombstone keeps the key and introductions.
    static func roster(_ version: UInt64, _ members: [String], removed: [(String, String)] = [],
                       cascading: [(String, String)] = []) throws -> Roster {
        let all = try rosterMembers()
        var roster = Roster(version: version, members: (members + (removed + cascading).map(\.0)).map { all[$0]!.0 })
        for (name, remover) in removed { try roster.removing(rosterID(name), by: rosterKey(remover)) }
        for (name, remover) in cascading { try roster.removing(rosterID(name), by: rosterKey(remover), withIntroduced: true) }
        roster.version = version
        return roster
    }

    static func rosters() throws -> [ProtocolVectors.RosterVector] {
        let all = try rosterMembers()
        func vector(_ comment: String, _ roster: Roster, requestID: UInt32) throws -> ProtocolVectors.RosterVector {
            let bytes = try roster.encoded()
            let members = roster.entries.values.sorted { $0.deviceID < $1.deviceID }.map { m in all.values.first { $0.0.deviceID == m.deviceID }!.1 }
            let removedVectors = roster.removalMarks.sorted { $0.key < $1.key }.map { id, mark in
                ProtocolVectors.RemovalVector(deviceId: hex(id.bytes), removedBy: hex(mark.remover.bytes),
                                              signedBytes: hex(RemovalMark.signingInput(removed: id, cascading: mark.cascading)), signature: hex(mark.signature),
                                              identityKey: hex(mark.removedKey!),
                                              introductions: mark.introductions.map { .init(introducedBy: hex($0.introducer.bytes), signature: hex($0.signature)) },
                                              record: hex(mark.record!), cascading: mark.cascading ? true : nil)
            }
            return .init(comment: comment, version: roster.version, members: members, removed: removedVectors,
                         roster: hex(bytes), ringSyncRequestID: requestID,
                         ringSyncFrame: hex(try Frame(type: .ringSync, requestID: requestID, payload: bytes).encoded()),
                         digest: hex(roster.digest),
                         takenOut: roster.derivedOut.isEmpty ? nil : roster.derivedOut.sorted().map { hex($0.bytes) })
        }
        return try [
            vector("a fresh device: a ring of one, version 1", roster(1, ["laptop"]), requestID: 0x0000_0101),
            vector("three members, two removed: phone by Schreibtisch-Ü, old (whom phone paired) by laptop; members sorted by device id, tombstones by removed device id",
                   roster(7, ["laptop", "Schreibtisch-Ü", "tablet"], removed: [("phone", "Schreibtisch-Ü"), ("old", "laptop")]), requestID: 0xFFFF_FFFE),
            vector("laptop removed phone with what it introduced (a cascading mark): old, whom phone paired, is taken out without a tombstone; its entry stays in members",
                   roster(8, ["laptop", "Schreibtisch-Ü", "tablet", "old"], cascading: [("phone", "laptop")]), requestID: 0x0000_0202),
        ]
    }

    /// §7.3: merges, each from what a receiver holds and what it receives to what it keeps.
    static func rosterMerges() throws -> [ProtocolVectors.RosterMergeVector] {
        let desk = "Schreibtisch-Ü"
        func vector(_ comment: String, me: String = desk, anchor: String? = nil, _ local: Roster, _ received: [Roster]) throws -> ProtocolVectors.RosterMergeVector {
            var roster = local
            var newlyRemoved: Set<DeviceID> = []
            var failure: String?
            for (index, other) in received.enumerated() {
                do {
                    newlyRemoved.formUnion(try roster.merge(other, me: rosterID(me), anchor: index == 0 ? anchor.map(rosterID) : nil).newlyRemoved)
                } catch { failure = specName(error); break }
            }
            return .init(comment: comment, me: hex(rosterID(me).bytes), anchor: anchor.map { hex(rosterID($0).bytes) },
                         local: hex(try local.encoded()), received: try received.map { hex(try $0.encoded()) },
                         result: failure == nil ? hex(try roster.encoded()) : nil, digest: failure == nil ? hex(roster.digest) : nil,
                         newlyRemoved: newlyRemoved.sorted().map { hex($0.bytes) }, error: failure,
                         members: failure == nil ? roster.members.keys.sorted().map { hex($0.bytes) } : nil)
        }
        let three = try roster(3, ["laptop", desk, "thief"])
        let byThief = try roster(4, [desk, "thief"], removed: [("laptop", "thief")])
        let byOwner = try roster(9, ["laptop", desk], removed: [("thief", "laptop")])
        // A legacy mark (dictionary form, no key) for a device that never joined.
        var legacy = try roster(2, ["laptop", desk])
        legacy = Roster(version: 2, members: Array(legacy.members.values),
                        removalMarks: [try DeviceID(bytes: Array(repeating: 0xEE, count: 16)): try RemovalMark.make(removing: DeviceID(bytes: Array(repeating: 0xEE, count: 16)), by: rosterKey("laptop"))])
        // thief's entry with a second introduction that claims Schreibtisch-Ü but carries laptop's signature.
        let thiefEntry = try rosterMembers()["thief"]!.0
        let forged = try Introduction(introducer: rosterID(desk), signature: thiefEntry.introductions[0].signature)
        let withForgedIntroduction = Roster(version: 5, members: [try rosterMembers()["laptop"]!.0, try rosterMembers()[desk]!.0,
                                                                  thiefEntry.introduced(by: forged)])
        // laptop's tombstone of thief, its signature made by thief's own key.
        let badMark = try RemovalMark.make(removing: rosterID("thief"), by: rosterKey("thief"))
        let selfSigned = Roster(version: 9, members: [try rosterMembers()["laptop"]!.0, try rosterMembers()[desk]!.0],
                                removalMarks: [rosterID("thief"): try RemovalMark(remover: rosterID("laptop"), signature: badMark.signature,
                                                                                   removedKey: thiefEntry.identityKey, introductions: thiefEntry.introductions)])
        // old's entry claiming laptop as introducer with the signature phone made for it.
        let oldEntry = try rosterMembers()["old"]!.0
        let unvouched = Roster(version: 5, members: [try rosterMembers()["laptop"]!.0, try rosterMembers()[desk]!.0,
                                                     oldEntry.with(introductions: [try Introduction(introducer: rosterID("laptop"), signature: oldEntry.introductions[0].signature)])])
        // laptop's plain tombstone of phone with the cascading flag set.
        let plain = try roster(4, ["laptop", desk, "phone", "old"], removed: [("phone", "laptop")])
        let plainMark = plain.removalMarks[rosterID("phone")]!
        let flipped = Roster(version: 4, members: Array(plain.entries.values),
                             removalMarks: [rosterID("phone"): try RemovalMark(remover: plainMark.remover, signature: plainMark.signature,
                                                                               removedKey: plainMark.removedKey, introductions: plainMark.introductions,
                                                                               cascading: true)])
        // Two owners, each paired with a rogue, introduced both ways as pairing leaves them:
        // laptop paired phone and Schreibtisch-Ü, Schreibtisch-Ü paired thief. laptop removes phone
        // with what it introduced, Schreibtisch-Ü removes thief so (§7.3 step 5a, spared removers).
        func twoOwners(_ version: UInt64, cascading: [(String, String)]) throws -> Roster {
            let all = try rosterMembers()
            func with(_ name: String, _ introducers: [String]) throws -> RosterMember {
                var member = all[name]!.0
                for introducer in introducers {
                    member = member.introduced(by: try Introduction.make(for: member.identityKey, by: rosterKey(introducer)))
                }
                return member
            }
            var roster = Roster(version: version, members: [try with("laptop", ["phone", desk]), try with(desk, ["thief"]), try with("thief", [desk]),
                                                            all["tablet"]!.0, all["phone"]!.0, all["old"]!.0])
            for (name, remover) in cascading { try roster.removing(rosterID(name), by: rosterKey(remover), withIntroduced: true) }
            roster.version = version
            return roster
        }
        return try [
            vector("a member paired in elsewhere joins: thief, introduced by laptop", roster(2, ["laptop", desk]), [roster(6, ["laptop", desk, "thief"])]),
            vector("thief and owner remove each other, thief's roster first: both are out", three, [byThief, byOwner]),
            vector("...the owner's roster first: the same roster", three, [byOwner, byThief]),
            vector("two members remove the same device: the mark with the lower removedBy is kept",
                   roster(4, ["laptop", desk], removed: [("thief", desk)]), [byOwner]),
            vector("a mark (legacy form, no key) for a device that was never a member is left out: nothing changes",
                   roster(2, ["laptop", desk]), [legacy]),
            vector("an introduction that does not verify is dropped; the entry stays", three, [withForgedIntroduction]),
            vector("a removal mark that does not verify refuses the whole roster", three, [selfSigned]),
            vector("a new member whose only introduction does not verify is left out: nothing changes", roster(2, ["laptop", desk]), [unvouched]),
            vector("a cascading mark: laptop removes phone with what it introduced; old, which only phone introduced, is out without a tombstone (its entry stays in members)",
                   roster(3, ["laptop", desk, "phone", "old"]), [roster(4, ["laptop", desk, "phone", "old"], cascading: [("phone", "laptop")])]),
            vector("a plain and a cascading mark for one device by different removers: the cascading one is kept, in either order",
                   roster(2, ["laptop", desk, "phone", "old"]),
                   [roster(4, ["laptop", desk, "phone", "old"], removed: [("phone", desk)]),
                    roster(4, ["laptop", desk, "phone", "old"], cascading: [("phone", "laptop")])]),
            vector("the remover is spared by its own cascade: phone removes laptop with what it introduced; Schreibtisch-Ü, tablet and thief go, phone (introduced by laptop) and old stay",
                   me: "old", roster(3, ["laptop", desk, "tablet", "phone", "old", "thief"]),
                   [roster(8, [desk, "tablet", "phone", "old", "thief"], cascading: [("laptop", "phone")])]),
            vector("two roots, each remover spared: laptop removes phone and Schreibtisch-Ü removes thief, each with what it introduced; each owner is reached from the other's root only through the other owner, where a walk stops; old goes, laptop, Schreibtisch-Ü and tablet stay",
                   me: "tablet", twoOwners(3, cascading: []),
                   [twoOwners(5, cascading: [("phone", "laptop")]), twoOwners(6, cascading: [("thief", desk)])]),
            vector("a plain mark turned into a cascading one does not verify: the whole roster is refused", roster(3, ["laptop", desk, "phone", "old"]),
                   [flipped]),
            vector("pairing: the peer's roster, its members vouched for from the peer (the anchor) on", anchor: "laptop", roster(1, [desk]),
                   [roster(5, ["laptop", "thief"], removed: [("phone", "laptop")])]),
        ]
    }

    /// §3.1/§7.3: which key of one member a receiver keeps when both sides hold the same generation.
    static func keyMerges() throws -> [ProtocolVectors.KeyMergeVector] {
        let identity = try Ed25519PrivateKey(seed: Array(repeating: 0x55, count: 32))
        let me = try DeviceID(bytes: Array(repeating: 0x01, count: 16))
        let chain = try AdvertisingSecret.issue(root: Array(0..<32), generation: 1, day: testDay)
        let otherChain = try AdvertisingSecret.issue(root: Array(repeating: 0x66, count: 32), generation: 1, day: testDay)
        func key(_ secret: AdvertisingSecret, _ day: UInt64) -> AdvertisingSecret { secret.ratcheted(toDay: day)! }
        func dayKey(_ secret: AdvertisingSecret) -> ProtocolVectors.DayKeyVector {
            .init(secret: hex(secret.bytes), day: secret.day, commitment: hex(secret.chain!.commitment))
        }
        func vector(_ comment: String, stored: AdvertisingSecret, received: AdvertisingSecret, receiverDay: UInt64) throws -> ProtocolVectors.KeyMergeVector {
            var local = Roster(version: 3, members: [try RosterMember.signed(name: "laptop", identity: identity, secret: stored)])
            _ = try local.merge(Roster(version: 3, members: [try RosterMember.signed(name: "laptop", identity: identity, secret: received)]), me: me)
            local.ratchet(toDay: receiverDay)
            let result = try #require(local.members[DeviceID(identityKey: identity.publicKey)]?.secret)
            return .init(comment: comment, generation: 1, receiverDay: receiverDay, stored: dayKey(stored), received: dayKey(received), result: dayKey(result))
        }
        return try [
            vector("an earlier key of the same chain replaces the stored one", stored: key(chain, testDay + 3), received: chain, receiverDay: testDay),
            vector("...moved forward to the receiver's day", stored: key(chain, testDay + 3), received: chain, receiverDay: testDay + 1),
            vector("a later key of the same chain is not taken", stored: chain, received: key(chain, testDay + 3), receiverDay: testDay),
            vector("same generation, another chain: the entry with the lower member signature is kept", stored: key(chain, testDay + 3), received: otherChain,
                   receiverDay: testDay),
        ]
    }

    /// Item: §4.3 step 6 compares bodies with the reserved flag bits 6–7 masked, the clipboard bits 4–5 not.
    static func replays(keys: DerivedKeys) throws -> [ProtocolVectors.ReplayVector] {
        let hash = keys.typeHash("org.example.Reader.reading")
        func seal(_ sequence: UInt8, revision: UInt32, flags: UInt8) -> String {
            hex(RingAdvert.seal(body: AdvertBody(typeHash: hash, revision: revision, flags: AdvertFlags(rawValue: flags),
                                                 clipboard: ClipboardKind(flagsByte: flags)),
                                keys: keys, epoch: keys.epochMaterial(2_000_000), sequence: sequence))
        }
        return [
            .init(comment: "same epoch and sequence, bodies differ only in a reserved flag bit", adverts: [seal(0, revision: 1, flags: 0x03), seal(0, revision: 1, flags: 0x43)],
                  outcomes: ["newRevision", "sameRevision"]),
            .init(comment: "same epoch and sequence, bodies differ in the clipboard bits", adverts: [seal(0, revision: 1, flags: 0x03), seal(0, revision: 1, flags: 0x13)],
                  outcomes: ["newRevision", "conflictingSequence"]),
            .init(comment: "same epoch and sequence, another revision", adverts: [seal(0, revision: 1, flags: 0x03), seal(0, revision: 2, flags: 0x03)],
                  outcomes: ["newRevision", "conflictingSequence"]),
            .init(comment: "later sequence, older revision", adverts: [seal(4, revision: 9, flags: 0x01), seal(5, revision: 8, flags: 0x01)],
                  outcomes: ["newRevision", "staleRevision"]),
        ]
    }
}

extension PropertyValueCodec {
    static func decodeOrNil(_ bytes: [UInt8]) -> PropertyValue? { try? decode(bytes) }
}

extension VectorTests {
    static func party(_ v: ProtocolVectors.PartyVector, role: PairingSession.Role) throws -> PairingParty {
        PairingParty(role: role, x25519: try X25519PrivateKey(rawRepresentation: unhex(v.x25519Private)), nonce: unhex(v.nonce), name: v.name,
                     seed: unhex(v.identitySeed), secret: try AdvertisingSecret.issue(root: unhex(v.secret), generation: v.generation, day: v.day), endpoints: v.endpoints)
    }

    /// The file's frames of one side, fed to the core's other role, make it send exactly the file's
    /// frames of that role and complete with the file's identity of the peer.
    @Test func pairingExchangeFramesAreAcceptedByBothRoles() throws {
        let v = try fileVectors().pairingExchange
        let sessionID = unhex(v.sessionID)
        for (me, peer, role) in [(v.initiator, v.responder, PairingSession.Role.initiator), (v.responder, v.initiator, .responder)] {
            let side = role == .initiator ? "initiator" : "responder"
            var session = try Self.party(me, role: role).session(sessionID)
            var sent: [String] = []
            var result: PairingResult?
            func collect(_ actions: [PairingSession.Action]) throws {
                for action in actions {
                    switch action {
                    case .send(let frame): sent.append(hex(try frame.encoded()))
                    case .completed(let done): result = done
                    case .failed(let error): Issue.record("\(side) failed: \(error)")
                    case .showCode(let code):
                        #expect(code == v.code)
                        #expect(session.secondCode == v.secondCode)
                    }
                }
            }
            try collect(session.start(nowSeconds: 0))
            for frame in v.frames where frame.from != side {
                if frame.message == "confirm" { try collect(session.userConfirmed(true)) }
                try collect(session.receive(Frame.decode(unhex(frame.frame)), nowSeconds: 1))
            }
            #expect(sent == v.frames.filter { $0.from == side }.map(\.frame), "\(side)")
            let expectedPeer = try Self.party(peer, role: role == .initiator ? .responder : .initiator).member
            #expect(result?.peer == expectedPeer, "\(side)")
            #expect(result?.peerEndpoints == peer.endpoints, "\(side)")
        }
        for party in [v.initiator, v.responder] {
            #expect(Ed25519.isValidSignature(unhex(party.signature), for: unhex(party.signedBytes), publicKey: unhex(party.identityKey)))
            #expect(hex(Array(SHA256.hash(unhex(party.identityKey)).prefix(16))) == party.deviceId)
        }
        for (side, party) in [("initiator", v.initiator), ("responder", v.responder)] {
            let identity = v.frames.first { $0.from == side && $0.message == "identity" }?.plaintext.flatMap { PropertyValueCodec.decodeOrNil(unhex($0)) }
            #expect(identity?.dictionaryValue?["signature"]?.bytesValue.map(hex) == party.signature, "\(side)")
        }
    }

    @Test func rosterVectorsDecodeAndReencode() throws {
        for vector in try fileVectors().rosters {
            let roster = try Roster(decoding: unhex(vector.roster))
            #expect(roster.version == vector.version)
            #expect(Set(roster.entries.keys.map { hex($0.bytes) }) == Set(vector.members.map(\.deviceId)))
            #expect(roster.derivedOut.sorted().map { hex($0.bytes) } == vector.takenOut ?? [])
            #expect(Set(roster.removed.map { hex($0.bytes) }) == Set(vector.removed.map(\.deviceId)))
            for member in vector.members {
                #expect(Ed25519.isValidSignature(unhex(member.signature), for: unhex(member.signedBytes), publicKey: unhex(member.identityKey)))
                let decoded = try #require(try roster.entries[DeviceID(bytes: unhex(member.deviceId))])
                #expect(hex(decoded.signature) == member.signature && decoded.introduction.map { hex($0.signature) } == member.introduction)
            }
            for mark in vector.removed {
                let decoded = try #require(try roster.removalMarks[DeviceID(bytes: unhex(mark.deviceId))])
                #expect(hex(decoded.remover.bytes) == mark.removedBy && hex(decoded.signature) == mark.signature)
                #expect(decoded.cascading == (mark.cascading ?? false))
                #expect(decoded.removedKey.map(hex) == mark.identityKey && decoded.record.map(hex) == mark.record)
                #expect(decoded.introductions.map { hex($0.introducer.bytes) + hex($0.signature) } == mark.introductions.map { $0.introducedBy + $0.signature })
            }
            #expect(hex(roster.digest) == vector.digest)
            #expect(hex(try roster.encoded()) == vector.roster)
            let frame = try Frame.decode(unhex(vector.ringSyncFrame))
            #expect(frame.type == .ringSync && frame.requestID == vector.ringSyncRequestID && hex(frame.payload) == vector.roster)
        }
    }

    /// The file's merges, run from its bytes: the code holds what the file says, or refuses as it says.
    @Test func rosterMergeVectorsGiveTheFilesResults() throws {
        let merges = try fileVectors().rosterMerges
        #expect(merges.count >= 9)
        for vector in merges {
            var roster = try Roster(decoding: unhex(vector.local))
            let before = roster
            var failure: String?
            var newlyRemoved: Set<DeviceID> = []
            for (index, bytes) in vector.received.enumerated() {
                do {
                    let anchor = try index == 0 ? vector.anchor.map { try DeviceID(bytes: unhex($0)) } : nil
                    newlyRemoved.formUnion(try roster.merge(try Roster(decoding: unhex(bytes)), me: DeviceID(bytes: unhex(vector.me)), anchor: anchor).newlyRemoved)
                } catch { failure = (error as? WireError).map(specName) ?? "\(error)"; break }
            }
            #expect(failure == vector.error, "\(vector.comment)")
            if failure != nil { #expect(roster == before, "\(vector.comment): a refused merge changes nothing") }
            if let result = vector.result { #expect(hex(try roster.encoded()) == result, "\(vector.comment)") }
            if let digest = vector.digest { #expect(hex(roster.digest) == digest, "\(vector.comment)") }
            #expect(newlyRemoved.sorted().map { hex($0.bytes) } == vector.newlyRemoved, "\(vector.comment)")
        }
        // Both delivery orders of the mutual removal hold one roster.
        let orders = merges.filter { $0.comment.contains("remove each other") || $0.comment.hasPrefix("...the owner's") }
        #expect(orders.count == 2 && orders[0].result == orders[1].result)
    }

    @Test func replayVectorsGiveTheFilesOutcomes() throws {
        let v = try fileVectors()
        for vector in v.replays {
            var matcher = AdvertMatcher(epoch: 2_000_000)
            matcher.setMember(deviceID(1), secret: try AdvertisingSecret.issue(root: unhex(v.keySchedule.secret), generation: 1, day: v.keySchedule.day))
            let outcomes = vector.adverts.map { advert -> String in
                do { return "\(try matcher.receive(unhex(advert)).outcome)" } catch { return (error as? WireError).map(specName) ?? "\(error)" }
            }
            #expect(outcomes == vector.outcomes, "\(vector.comment)")
        }
    }
}
