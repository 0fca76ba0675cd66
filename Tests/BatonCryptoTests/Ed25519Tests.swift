// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing

@Suite("Ed25519 (RFC 8032 section 7.1)")
struct Ed25519Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let seedHex: String
        let publicKeyHex: String
        let messageHex: String
        let signatureHex: String
        var testDescription: String { name }
    }

    static let vectors: [Vector] = [
        Vector(name: "TEST 1 (empty message)",
               seedHex: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
               publicKeyHex: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
               messageHex: "",
               signatureHex: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
                   + "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        Vector(name: "TEST 2",
               seedHex: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
               publicKeyHex: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
               messageHex: "72",
               signatureHex: "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
                   + "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
        Vector(name: "TEST 3",
               seedHex: "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
               publicKeyHex: "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
               messageHex: "af82",
               signatureHex: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
                   + "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
        Vector(name: "TEST SHA(abc)",
               seedHex: "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
               publicKeyHex: "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
               messageHex: "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                   + "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
               signatureHex: "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589"
                   + "09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"),
    ]

    @Test(arguments: vectors)
    func signMatchesVector(_ vector: Vector) throws {
        let key = try Ed25519PrivateKey(seed: try hexBytes(vector.seedHex))
        #expect(key.seed == (try hexBytes(vector.seedHex)))
        #expect(key.publicKey == (try hexBytes(vector.publicKeyHex)))
        #expect(try key.signature(for: try hexBytes(vector.messageHex)) == (try hexBytes(vector.signatureHex)))
    }

    @Test(arguments: vectors)
    func verifyAcceptsVectorAndRejectsAlterations(_ vector: Vector) throws {
        let publicKey = try hexBytes(vector.publicKeyHex)
        let message = try hexBytes(vector.messageHex)
        let signature = try hexBytes(vector.signatureHex)
        #expect(Ed25519.isValidSignature(signature, for: message, publicKey: publicKey))

        var badSignature = signature
        badSignature[10] ^= 0x04
        #expect(!Ed25519.isValidSignature(badSignature, for: message, publicKey: publicKey))
        #expect(!Ed25519.isValidSignature(signature, for: message + [0], publicKey: publicKey))
        var otherKey = publicKey
        otherKey[0] ^= 0x01
        #expect(!Ed25519.isValidSignature(signature, for: message, publicKey: otherKey))
    }

    @Test func garbageInputsGiveFalse() throws {
        let vector = Self.vectors[1]
        let publicKey = try hexBytes(vector.publicKeyHex)
        let message = try hexBytes(vector.messageHex)
        let signature = try hexBytes(vector.signatureHex)
        #expect(!Ed25519.isValidSignature(signature, for: message, publicKey: []))
        #expect(!Ed25519.isValidSignature(signature, for: message, publicKey: Array(publicKey.prefix(31))))
        #expect(!Ed25519.isValidSignature(signature, for: message, publicKey: publicKey + [0]))
        #expect(!Ed25519.isValidSignature(signature, for: message, publicKey: [UInt8](repeating: 0xff, count: 32)))
        #expect(!Ed25519.isValidSignature([], for: message, publicKey: publicKey))
        #expect(!Ed25519.isValidSignature(Array(signature.prefix(63)), for: message, publicKey: publicKey))
        #expect(!Ed25519.isValidSignature(signature + [0], for: message, publicKey: publicKey))
        #expect(!Ed25519.isValidSignature([UInt8](repeating: 0xff, count: 64), for: message, publicKey: publicKey))
    }

    @Test func generatedKeySignsAndVerifies() throws {
        let key = try Ed25519PrivateKey()
        let message = ascii("activity advert")
        let signature = try key.signature(for: message)
        #expect(signature.count == Ed25519.signatureByteCount)
        #expect(Ed25519.isValidSignature(signature, for: message, publicKey: key.publicKey))
    }

    @Test(arguments: [0, 31, 33, 64])
    func wrongSeedLengthIsRejected(length: Int) {
        #expect(throws: CryptoError.invalidKeyLength) { try Ed25519PrivateKey(seed: [UInt8](repeating: 3, count: length)) }
    }
}
