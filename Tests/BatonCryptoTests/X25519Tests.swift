// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing

@Suite("X25519 (RFC 7748)")
struct X25519Tests {
    struct ScalarMultiplication: Sendable {
        let scalarHex: String
        let uHex: String
        let outputHex: String
    }

    /// Section 5.2; the second input u-coordinate has its top bit set, which implementations must ignore.
    @Test(arguments: [
        ScalarMultiplication(
            scalarHex: "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
            uHex: "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
            outputHex: "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"),
        ScalarMultiplication(
            scalarHex: "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
            uHex: "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
            outputHex: "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"),
    ])
    func section5Point2(_ vector: ScalarMultiplication) throws {
        let key = try X25519PrivateKey(rawRepresentation: try hexBytes(vector.scalarHex))
        #expect(try key.sharedSecret(with: try hexBytes(vector.uHex)) == (try hexBytes(vector.outputHex)))
        #expect(key.rawRepresentation == (try hexBytes(vector.scalarHex)))
    }

    @Test func section6Point1DiffieHellman() throws {
        let alice = try X25519PrivateKey(
            rawRepresentation: try hexBytes("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let bob = try X25519PrivateKey(
            rawRepresentation: try hexBytes("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        #expect(alice.publicKey == (try hexBytes("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")))
        #expect(bob.publicKey == (try hexBytes("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")))
        let shared = try hexBytes("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(try alice.sharedSecret(with: bob.publicKey) == shared)
        #expect(try bob.sharedSecret(with: alice.publicKey) == shared)
    }

    @Test func generatedKeysAgree() throws {
        let first = try X25519PrivateKey()
        let second = try X25519PrivateKey(using: FakeCountingRandom(start: 7))
        #expect(second.rawRepresentation == FakeCountingRandom(start: 7).bytes(32))
        #expect(first.rawRepresentation != second.rawRepresentation)
        #expect(try first.sharedSecret(with: second.publicKey) == second.sharedSecret(with: first.publicKey))
    }

    /// u = 0 and u = 1 are points of small order: every clamped scalar maps them to the all-zero output.
    @Test(arguments: [
        [UInt8](repeating: 0, count: 32),
        [1] + [UInt8](repeating: 0, count: 31),
    ])
    func lowOrderPointIsRejected(peer: [UInt8]) throws {
        let key = try X25519PrivateKey(using: FakeCountingRandom(start: 1))
        #expect(throws: CryptoError.weakSharedSecret) { try key.sharedSecret(with: peer) }
    }

    @Test(arguments: [0, 31, 33, 56])
    func wrongPeerKeyLengthIsRejected(length: Int) throws {
        let key = try X25519PrivateKey(using: FakeCountingRandom(start: 1))
        #expect(throws: CryptoError.invalidPublicKey) {
            try key.sharedSecret(with: [UInt8](repeating: 9, count: length))
        }
    }

    @Test(arguments: [0, 31, 33, 64])
    func wrongPrivateKeyLengthIsRejected(length: Int) {
        #expect(throws: CryptoError.invalidKeyLength) {
            try X25519PrivateKey(rawRepresentation: [UInt8](repeating: 5, count: length))
        }
    }
}
