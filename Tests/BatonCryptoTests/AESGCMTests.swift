// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing

/// Test cases from McGrew and Viega, "The Galois/Counter Mode of Operation (GCM)", as published with NIST's GCM spec.
@Suite("AES-GCM (GCM specification test cases)")
struct AESGCMTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let keyHex: String
        let nonceHex: String
        let plaintextHex: String
        let aadHex: String
        let ciphertextHex: String
        let tagHex: String
        var testDescription: String { name }
    }

    static let key128 = "feffe9928665731c6d6a8f9467308308"
    static let nonce = "cafebabefacedbaddecaf888"
    static let plaintext60 = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
        + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39"
    static let aad = "feedfacedeadbeeffeedfacedeadbeefabaddad2"

    static let vectors: [Vector] = [
        Vector(name: "case 1 (AES-128, empty)", keyHex: String(repeating: "00", count: 16),
               nonceHex: String(repeating: "00", count: 12), plaintextHex: "", aadHex: "", ciphertextHex: "",
               tagHex: "58e2fccefa7e3061367f1d57a4e7455a"),
        Vector(name: "case 2 (AES-128)", keyHex: String(repeating: "00", count: 16),
               nonceHex: String(repeating: "00", count: 12), plaintextHex: String(repeating: "00", count: 16),
               aadHex: "", ciphertextHex: "0388dace60b6a392f328c2b971b2fe78", tagHex: "ab6e47d42cec13bdf53a67b21257bddf"),
        Vector(name: "case 3 (AES-128)", keyHex: key128, nonceHex: nonce, plaintextHex: plaintext60 + "1aafd255", aadHex: "",
               ciphertextHex: "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
                   + "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
               tagHex: "4d5c2af327cd64a62cf35abd2ba6fab4"),
        Vector(name: "case 4 (AES-128, AAD)", keyHex: key128, nonceHex: nonce, plaintextHex: plaintext60, aadHex: aad,
               ciphertextHex: "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
                   + "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
               tagHex: "5bc94fbc3221a5db94fae95ae7121a47"),
        Vector(name: "case 13 (AES-256, empty)", keyHex: String(repeating: "00", count: 32),
               nonceHex: String(repeating: "00", count: 12), plaintextHex: "", aadHex: "", ciphertextHex: "",
               tagHex: "530f8afbc74536b9a963b4f1c4cb738b"),
        Vector(name: "case 14 (AES-256)", keyHex: String(repeating: "00", count: 32),
               nonceHex: String(repeating: "00", count: 12), plaintextHex: String(repeating: "00", count: 16),
               aadHex: "", ciphertextHex: "cea7403d4d606b6e074ec5d3baf39d18", tagHex: "d0d1c8a799996bf0265b98b5d48ab919"),
        Vector(name: "case 15 (AES-256)", keyHex: key128 + key128, nonceHex: nonce, plaintextHex: plaintext60 + "1aafd255",
               aadHex: "",
               ciphertextHex: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                   + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
               tagHex: "b094dac5d93471bdec1a502270e3cc6c"),
        Vector(name: "case 16 (AES-256, AAD)", keyHex: key128 + key128, nonceHex: nonce, plaintextHex: plaintext60,
               aadHex: aad,
               ciphertextHex: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                   + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
               tagHex: "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    @Test(arguments: vectors)
    func sealMatchesVector(_ vector: Vector) throws {
        let key = try AESGCMKey(try hexBytes(vector.keyHex))
        let sealed = try AESGCM.seal(
            key: key, nonce: try hexBytes(vector.nonceHex), plaintext: try hexBytes(vector.plaintextHex),
            aad: try hexBytes(vector.aadHex))
        #expect(sealed.ciphertext == (try hexBytes(vector.ciphertextHex)))
        #expect(sealed.tag == (try hexBytes(vector.tagHex)))
    }

    @Test(arguments: vectors)
    func openMatchesVector(_ vector: Vector) throws {
        let key = try AESGCMKey(try hexBytes(vector.keyHex))
        let opened = try AESGCM.open(
            key: key, nonce: try hexBytes(vector.nonceHex), ciphertext: try hexBytes(vector.ciphertextHex),
            tag: try hexBytes(vector.tagHex), aad: try hexBytes(vector.aadHex))
        #expect(opened == (try hexBytes(vector.plaintextHex)))
    }

    /// SP 800-38D section 5.2.1.2: a truncated tag is the leftmost bits of the full tag.
    @Test(arguments: [8, 12, 15])
    func truncatedTagIsPrefixOfFullTag(tagLength: Int) throws {
        let vector = Self.vectors[3]
        let key = try AESGCMKey(try hexBytes(vector.keyHex))
        let nonce = try hexBytes(vector.nonceHex)
        let aad = try hexBytes(vector.aadHex)
        let fullTag = try hexBytes(vector.tagHex)
        let sealed = try AESGCM.seal(
            key: key, nonce: nonce, plaintext: try hexBytes(vector.plaintextHex), aad: aad, tagLength: tagLength)
        #expect(sealed.tag == Array(fullTag.prefix(tagLength)))
        let opened = try AESGCM.open(key: key, nonce: nonce, ciphertext: sealed.ciphertext, tag: sealed.tag, aad: aad)
        #expect(opened == (try hexBytes(vector.plaintextHex)))
        var wrongTag = sealed.tag
        wrongTag[tagLength - 1] ^= 0x80
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(key: key, nonce: nonce, ciphertext: sealed.ciphertext, tag: wrongTag, aad: aad)
        }
    }

    @Test func rawBufferOpenReadsSlicesOfOnePacket() throws {
        let vector = Self.vectors[3]
        let key = try AESGCMKey(try hexBytes(vector.keyHex))
        let nonce = try hexBytes(vector.nonceHex)
        let aad = try hexBytes(vector.aadHex)
        let ciphertext = try hexBytes(vector.ciphertextHex)
        let tag = try hexBytes(vector.tagHex)
        let packet = aad + nonce + ciphertext + tag
        let opened = try packet.withUnsafeBytes { packet in
            var offset = 0
            func take(_ count: Int) -> UnsafeRawBufferPointer {
                defer { offset += count }
                return UnsafeRawBufferPointer(rebasing: packet[offset..<offset + count])
            }
            let aadSlice = take(aad.count), nonceSlice = take(12), ciphertextSlice = take(ciphertext.count), tagSlice = take(16)
            return try AESGCM.open(key: key, nonce: nonceSlice, ciphertext: ciphertextSlice, tag: tagSlice, aad: aadSlice)
        }
        #expect(opened == (try hexBytes(vector.plaintextHex)))
    }

    @Test func smallMessageRoundTripWithCachedContextsAcrossNonces() throws {
        let key = try AESGCMKey([UInt8](repeating: 0x42, count: 16))
        for counter in UInt8(0)..<50 {
            let nonce = [UInt8](repeating: 0, count: 11) + [counter]
            let plaintext = [UInt8](repeating: counter, count: 8)
            let aad: [UInt8] = [1, 2, 3, 4, 5, 6, 7, counter]
            let sealed = try AESGCM.seal(key: key, nonce: nonce, plaintext: plaintext, aad: aad, tagLength: 8)
            #expect(sealed.tag.count == 8)
            let opened = try AESGCM.open(key: key, nonce: nonce, ciphertext: sealed.ciphertext, tag: sealed.tag, aad: aad)
            #expect(opened == plaintext)
        }
    }

    @Test func concurrentOpensWithOneKeyAllSucceed() async throws {
        let key = try AESGCMKey([UInt8](repeating: 0x24, count: 32))
        let nonce = [UInt8](repeating: 9, count: 12)
        let plaintext: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let sealed = try AESGCM.seal(key: key, nonce: nonce, plaintext: plaintext, aad: [], tagLength: 8)
        let ciphertext = sealed.ciphertext, tag = sealed.tag
        let allMatch = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    (0..<500).allSatisfy { _ in
                        (try? AESGCM.open(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: [])) == plaintext
                    }
                }
            }
            return await group.allSatisfy { $0 }
        }
        #expect(allMatch)
    }
}

@Suite("AES-GCM rejects tampering and bad parameters")
struct AESGCMNegativeTests {
    let key: AESGCMKey
    let nonce = [UInt8](repeating: 0x11, count: 12)
    let plaintext = ascii("handoff payload")
    let aad = ascii("header")
    let ciphertext: [UInt8]
    let tag: [UInt8]

    init() throws {
        key = try AESGCMKey([UInt8](0..<16))
        (ciphertext, tag) = try AESGCM.seal(key: key, nonce: nonce, plaintext: plaintext, aad: aad)
    }

    private func flipped(_ bytes: [UInt8], at index: Int) -> [UInt8] {
        var copy = bytes
        copy[index] ^= 0x01
        return copy
    }

    @Test func untouchedMessageOpens() throws {
        #expect(try AESGCM.open(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: aad) == plaintext)
    }

    @Test func flippedCiphertextBitFails() {
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(key: key, nonce: nonce, ciphertext: flipped(ciphertext, at: 3), tag: tag, aad: aad)
        }
    }

    @Test func flippedTagBitFails() {
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(key: key, nonce: nonce, ciphertext: ciphertext, tag: flipped(tag, at: 15), aad: aad)
        }
    }

    @Test func flippedAADBitFails() {
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: flipped(aad, at: 0))
        }
    }

    @Test func missingAADFails() {
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: [])
        }
    }

    @Test func wrongNonceOrKeyFails() throws {
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(key: key, nonce: flipped(nonce, at: 11), ciphertext: ciphertext, tag: tag, aad: aad)
        }
        let otherKey = try AESGCMKey([UInt8](1...16))
        #expect(throws: CryptoError.authenticationFailed) {
            try AESGCM.open(key: otherKey, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: aad)
        }
    }

    @Test func failureDoesNotSpoilTheCachedContext() throws {
        _ = try? AESGCM.open(key: key, nonce: nonce, ciphertext: ciphertext, tag: flipped(tag, at: 0), aad: aad)
        #expect(try AESGCM.open(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: aad) == plaintext)
    }

    @Test(arguments: [0, 1, 15, 24, 31, 33, 64])
    func invalidKeyLengthsAreRejected(length: Int) {
        #expect(throws: CryptoError.invalidKeyLength) { try AESGCMKey([UInt8](repeating: 1, count: length)) }
    }

    @Test(arguments: [0, 8, 11, 13, 16])
    func invalidNonceLengthsAreRejected(length: Int) {
        let badNonce = [UInt8](repeating: 0, count: length)
        #expect(throws: CryptoError.invalidNonceLength) {
            try AESGCM.seal(key: key, nonce: badNonce, plaintext: plaintext, aad: aad)
        }
        #expect(throws: CryptoError.invalidNonceLength) {
            try AESGCM.open(key: key, nonce: badNonce, ciphertext: ciphertext, tag: tag, aad: aad)
        }
    }

    @Test(arguments: [0, 4, 7, 17, 32])
    func invalidTagLengthsAreRejected(length: Int) {
        #expect(throws: CryptoError.invalidTagLength) {
            try AESGCM.seal(key: key, nonce: nonce, plaintext: plaintext, aad: aad, tagLength: length)
        }
        #expect(throws: CryptoError.invalidTagLength) {
            try AESGCM.open(key: key, nonce: nonce, ciphertext: ciphertext, tag: [UInt8](repeating: 0, count: length), aad: aad)
        }
    }
}
