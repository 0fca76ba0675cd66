// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import Testing

@Suite("HKDF-SHA256 (RFC 5869 appendix A)")
struct HKDFTests {
    @Test func case1Basic() throws {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let salt = try hexBytes("000102030405060708090a0b0c")
        let info = try hexBytes("f0f1f2f3f4f5f6f7f8f9")
        let prk = HKDF.extract(salt: salt, ikm: ikm)
        #expect(prk == (try hexBytes("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5")))
        let okm = try hexBytes("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        #expect(try HKDF.expand(prk: prk, info: info, count: 42) == okm)
        #expect(try HKDF.deriveKey(ikm: ikm, salt: salt, info: info, count: 42) == okm)
    }

    @Test func case2LongInputs() throws {
        let ikm = [UInt8](0x00...0x4f)
        let salt = [UInt8](0x60...0xaf)
        let info = [UInt8](0xb0...0xff)
        let prk = HKDF.extract(salt: salt, ikm: ikm)
        #expect(prk == (try hexBytes("06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244")))
        let okm = try hexBytes(
            "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
                + "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
                + "cc30c58179ec3e87c14c01d5c1f3434f1d87")
        #expect(try HKDF.expand(prk: prk, info: info, count: 82) == okm)
        #expect(try HKDF.deriveKey(ikm: ikm, salt: salt, info: info, count: 82) == okm)
    }

    @Test func case3EmptySaltAndInfo() throws {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let prk = HKDF.extract(salt: [], ikm: ikm)
        #expect(prk == (try hexBytes("19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04")))
        let okm = try hexBytes("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        #expect(try HKDF.expand(prk: prk, info: [], count: 42) == okm)
        #expect(try HKDF.deriveKey(ikm: ikm, salt: [], info: [], count: 42) == okm)
    }

    @Test func extractIsHMACKeyedBySalt() {
        // RFC 5869 section 2.2 defines PRK = HMAC-Hash(salt, IKM); holds for empty input keying material too.
        let salt = ascii("salt")
        #expect(HKDF.extract(salt: salt, ikm: []) == HMACSHA256.mac(key: salt, message: []))
        #expect(HKDF.extract(salt: salt, ikm: [1, 2, 3]) == HMACSHA256.mac(key: salt, message: [1, 2, 3]))
    }

    @Test func rejectsOutputLengthsOutsideRFCLimit() throws {
        let prk = [UInt8](repeating: 7, count: 32)
        #expect(throws: CryptoError.invalidKeyLength) { try HKDF.expand(prk: prk, info: [], count: 0) }
        #expect(throws: CryptoError.invalidKeyLength) { try HKDF.expand(prk: prk, info: [], count: 255 * 32 + 1) }
        #expect(throws: CryptoError.invalidKeyLength) { try HKDF.deriveKey(ikm: [1], salt: [], info: [], count: -1) }
        #expect(try HKDF.expand(prk: prk, info: [], count: 255 * 32).count == 255 * 32)
    }

    @Test func rejectsShortPseudorandomKey() {
        #expect(throws: CryptoError.invalidKeyLength) { try HKDF.expand(prk: [1, 2, 3], info: [], count: 16) }
    }
}
