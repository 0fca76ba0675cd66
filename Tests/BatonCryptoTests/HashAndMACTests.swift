// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing

@Suite("SHA-256 (FIPS 180-4 examples)")
struct SHA256Tests {
    @Test func oneBlockMessageABC() throws {
        #expect(SHA256.hash(ascii("abc")) == (try hexBytes("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")))
    }

    @Test func twoBlockMessage448Bits() throws {
        let message = ascii("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
        #expect(message.count * 8 == 448)
        #expect(SHA256.hash(message) == (try hexBytes("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")))
    }

    @Test func emptyMessage() throws {
        #expect(SHA256.hash([]) == (try hexBytes("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")))
    }

    @Test func rawBufferOverloadMatchesArray() {
        let message = ascii("abc")
        let viaBuffer = message.withUnsafeBytes { SHA256.hash($0) }
        #expect(viaBuffer == SHA256.hash(message))
        #expect(viaBuffer.count == SHA256.byteCount)
    }
}

@Suite("HMAC-SHA256 (RFC 4231)")
struct HMACSHA256Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let key: [UInt8]
        let data: [UInt8]
        let macHex: String
        var testDescription: String { name }
    }

    static let vectors: [Vector] = [
        Vector(name: "case 1", key: [UInt8](repeating: 0x0b, count: 20), data: ascii("Hi There"),
               macHex: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        Vector(name: "case 2", key: ascii("Jefe"), data: ascii("what do ya want for nothing?"),
               macHex: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        Vector(name: "case 3", key: [UInt8](repeating: 0xaa, count: 20), data: [UInt8](repeating: 0xdd, count: 50),
               macHex: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        Vector(name: "case 4", key: Array(1...25), data: [UInt8](repeating: 0xcd, count: 50),
               macHex: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        Vector(name: "case 6", key: [UInt8](repeating: 0xaa, count: 131),
               data: ascii("Test Using Larger Than Block-Size Key - Hash Key First"),
               macHex: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        Vector(name: "case 7", key: [UInt8](repeating: 0xaa, count: 131),
               data: ascii("This is a test using a larger than block-size key and a larger than block-size data. "
                   + "The key needs to be hashed before being used by the HMAC algorithm."),
               macHex: "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]

    @Test(arguments: vectors)
    func oneShot(_ vector: Vector) throws {
        #expect(HMACSHA256.mac(key: vector.key, message: vector.data) == (try hexBytes(vector.macHex)))
    }

    @Test(arguments: vectors)
    func preparedKeyGivesSameResultWhenReused(_ vector: Vector) throws {
        let key = HMACSHA256Key(vector.key)
        let expected = try hexBytes(vector.macHex)
        #expect(key.mac(vector.data) == expected)
        #expect(key.mac(ascii("something else")) != expected)
        #expect(key.mac(vector.data) == expected)
    }

    @Test func preparedKeyIsCorrectUnderConcurrentUse() async throws {
        let vector = Self.vectors[1]
        let key = HMACSHA256Key(vector.key)
        let expected = try hexBytes(vector.macHex)
        let allMatch = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask { (0..<200).allSatisfy { _ in key.mac(vector.data) == expected } }
            }
            return await group.allSatisfy { $0 }
        }
        #expect(allMatch)
    }

    @Test func emptyKeyAndMessageMatchZeroKey() {
        // HMAC pads the key with zeros to the block size, so an empty key equals a zero-byte key.
        #expect(HMACSHA256.mac(key: [], message: []) == HMACSHA256.mac(key: [0], message: []))
        #expect(HMACSHA256Key([]).mac([]) == HMACSHA256.mac(key: [], message: []))
    }
}

@Suite("Constant-time comparison")
struct ConstantTimeEqualsTests {
    @Test func comparesContentsAndLengths() {
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(constantTimeEquals([], []))
        #expect(!constantTimeEquals([], [0]))
    }
}
