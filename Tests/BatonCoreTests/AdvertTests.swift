// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

@Suite struct RingAdvertTests {
    let keys = DerivedKeys(secret: secret(9))

    func advert(epoch: UInt64 = 2_000_000, sequence: UInt8 = 0, body: AdvertBody? = nil) -> [UInt8] {
        let b = body ?? AdvertBody(typeHash: TypeHash(value: 0xDEADBEEF), revision: 42, flags: [.hasActivity, .hasWebpageURL])
        return RingAdvert.seal(body: b, keys: keys, epoch: keys.epochMaterial(epoch), sequence: sequence)
    }

    @Test func layout() {
        let bytes = advert()
        #expect(bytes.count == 24)
        #expect(bytes[0] == 0x11)
        #expect(Array(bytes[1..<7]) == keys.epochMaterial(2_000_000).tag)
        #expect(bytes[7] == keys.epochMaterial(2_000_000).mask)  // sequence 0 XOR mask
    }

    @Test func roundTrip() throws {
        let material = keys.epochMaterial(2_000_000)
        let opened = try RingAdvert.open(advert(sequence: 9), keys: keys, epoch: 2_000_000, mask: material.mask)
        #expect(opened.sequence == 9)
        #expect(opened.body.typeHash.value == 0xDEADBEEF)
        #expect(opened.body.revision == 42)
        #expect(opened.body.flags == [.hasActivity, .hasWebpageURL])
    }

    @Test func everyBitFlipIsRejected() {
        let original = advert()
        let material = keys.epochMaterial(2_000_000)
        for index in 0..<24 {
            for bit in 0..<8 {
                var bytes = original
                bytes[index] ^= 1 << bit
                #expect(throws: WireError.self) {
                    _ = try RingAdvert.open(bytes, keys: keys, epoch: 2_000_000, mask: material.mask)
                }
            }
        }
    }

    @Test func wrongKeyOrEpochFails() {
        let other = DerivedKeys(secret: secret(10))
        #expect(throws: WireError.authenticationFailed) {
            _ = try RingAdvert.open(advert(), keys: other, epoch: 2_000_000, mask: keys.epochMaterial(2_000_000).mask)
        }
        #expect(throws: WireError.authenticationFailed) {
            _ = try RingAdvert.open(advert(), keys: keys, epoch: 2_000_001, mask: keys.epochMaterial(2_000_000).mask)
        }
    }

    @Test func presenceBodyRules() throws {
        let presence = AdvertBody.presence(revision: 3)
        let material = keys.epochMaterial(1)
        let opened = try RingAdvert.open(advert(epoch: 1, body: presence), keys: keys, epoch: 1, mask: material.mask)
        #expect(!opened.body.isActivity)
        let bad = AdvertBody(typeHash: TypeHash(value: 1), revision: 3, flags: [])
        #expect(throws: WireError.malformed("body")) {
            _ = try RingAdvert.open(advert(epoch: 1, body: bad), keys: keys, epoch: 1, mask: material.mask)
        }
    }

    @Test func reservedFlagsAreIgnored() throws {
        let body = AdvertBody(typeHash: TypeHash(value: 5), revision: 1, flags: AdvertFlags(rawValue: 0xF1))
        let opened = try RingAdvert.open(advert(epoch: 1, body: body), keys: keys, epoch: 1, mask: keys.epochMaterial(1).mask)
        #expect(opened.body.flags == [.hasActivity])
    }

    @Test func classifyRejectsBadHeaders() {
        #expect(throws: WireError.malformed("length")) { try AdvertKind.classify([0x11]) }
        #expect(throws: WireError.malformed("length")) { try AdvertKind.classify([UInt8](repeating: 0x11, count: 25)) }
        #expect(throws: WireError.unsupportedVersion(2)) { try AdvertKind.classify([0x21] + [UInt8](repeating: 0, count: 23)) }
        #expect(throws: WireError.unknownKind(3)) { try AdvertKind.classify([0x13] + [UInt8](repeating: 0, count: 23)) }
    }
}

@Suite struct PairingAdvertTests {
    @Test func roundTrip() throws {
        let advert = try PairingAdvert(sessionID: [1, 2, 3, 4, 5, 6, 7, 8], tcpPublished: true, psm: 0x81, name: "Laptöp of Ada Lovelace")
        let bytes = advert.encoded
        #expect(bytes.count == 24)
        #expect(bytes[0] == 0x12)
        let decoded = try PairingAdvert(decoding: bytes)
        #expect(decoded == advert)
        #expect(decoded.name == "Laptöp of A")  // 12 bytes, cut at a character boundary
    }

    @Test func rejectsBadFields() throws {
        let good = try PairingAdvert(sessionID: [UInt8](repeating: 1, count: 8), tcpPublished: false, psm: nil, name: "x").encoded
        var badPSM = good; badPSM[9] = 2; badPSM[11] = 0x10
        #expect(throws: WireError.malformed("psm")) { try PairingAdvert(decoding: badPSM) }
        var flagWithoutPSM = good; flagWithoutPSM[9] = 2
        #expect(throws: WireError.malformed("psm")) { try PairingAdvert(decoding: flagWithoutPSM) }
        var badName = good; badName[12] = 0xFF
        #expect(throws: WireError.malformed("name")) { try PairingAdvert(decoding: badName) }
        var innerZero = good; innerZero[12] = 0; innerZero[13] = 0x41
        #expect(throws: WireError.malformed("name")) { try PairingAdvert(decoding: innerZero) }
        #expect(throws: WireError.malformed("psm")) { try PairingAdvert(sessionID: [UInt8](repeating: 1, count: 8), tcpPublished: false, psm: 0x7F, name: "") }
    }
}
