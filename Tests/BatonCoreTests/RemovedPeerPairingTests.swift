// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing
@testable import BatonCore

/// §7.2: a device the ring removed that pairs again learns no member's secret, not even from the
/// sealed identity message that goes out before the peer is checked.
@Suite struct RemovedPeerPairingTests {
    @Test func aRemovedMachineThatPairsAgainLearnsNoSecret() throws {
        var (x, member) = try PairingVectorSource.parties()
        let other = try RosterMember.signed(name: "other", identity: Ed25519PrivateKey(seed: [UInt8](repeating: 0x99, count: 32)),
                                            secret: chainedSecret(0x9A))
        var roster = Roster(version: 3, members: [member.member, other, x.member])
        let removed = roster.remove(x.member.deviceID, by: member.identity)
        #expect(removed)
        let memberInfo = LocalPairingInfo(name: member.name, identityKey: member.identity, roster: roster)
        let sessionID = PairingVectorSource.sessionID
        var initiator = try x.session(sessionID)
        var responder = try PairingSession(role: .responder, sessionID: sessionID, ephemeralKey: member.x25519, nonce: member.nonce, local: memberInfo)
        x.role = .initiator

        var fromMember: [Frame] = [], toMember: [Frame] = [], toX: [Frame] = []
        var failures: [String: WireError] = [:]
        func collect(_ actions: [PairingSession.Action], _ side: String) {
            for action in actions {
                switch action {
                case .send(let frame):
                    if side == "member" { fromMember.append(frame); toX.append(frame) } else { toMember.append(frame) }
                case .failed(let error): failures[side] = error
                case .completed: Issue.record("\(side) completed a pairing with a removed device")
                case .showCode: break
                }
            }
        }
        func deliver() {
            while !toMember.isEmpty || !toX.isEmpty {
                let a = toMember, b = toX
                toMember = []; toX = []
                for frame in a { collect(responder.receive(frame, nowSeconds: 1), "member") }
                for frame in b { collect(initiator.receive(frame, nowSeconds: 1), "x") }
            }
        }
        collect(initiator.start(nowSeconds: 0), "x")
        deliver()
        collect(initiator.userConfirmed(true), "x")
        collect(responder.userConfirmed(true), "member")
        deliver()
        #expect(failures["member"] == .peerRemoved)
        #expect(failures["x"] == .peerRemoved)

        // Everything the member sealed, opened with the keys the removed machine holds (K_RI).
        let commitment = PairingSession.commitment(publicKey: x.x25519.publicKey, nonce: x.nonce)
        let h = SHA256.hash("baton/v1 pair".utf8Bytes + sessionID + commitment + x.x25519.publicKey + x.nonce
                            + member.x25519.publicKey + member.nonce)
        let keys = try HKDF.deriveKey(ikm: try x.x25519.sharedSecret(with: member.x25519.publicKey), salt: h,
                                      info: "baton/v1 pair keys".utf8Bytes, count: 64)
        var kinds: [String] = []
        var revealed: [UInt8] = []
        for frame in fromMember where frame.type == .pairSealed {
            var reader = ByteReader(frame.payload)
            let counter = try reader.readUInt64()
            let body = try reader.readBytes(reader.remaining)
            let plaintext = try AESGCM.open(key: AESGCMKey(Array(keys[32..<64])), nonce: PairingSession.sealedNonce(counter),
                                            ciphertext: Array(body.dropLast(16)), tag: Array(body.suffix(16)),
                                            aad: "baton/v1 sealed".utf8Bytes + h)
            kinds.append(try PropertyValueCodec.decode(plaintext).dictionaryValue?["msg"]?.stringValue ?? "?")
            revealed += plaintext
        }
        #expect(kinds == ["confirm", "identity"])
        for secret in [member.member.secret, other.secret] {
            #expect(!contains(revealed, secret.bytes) && !contains(revealed, secret.chain!.commitment))
        }
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
