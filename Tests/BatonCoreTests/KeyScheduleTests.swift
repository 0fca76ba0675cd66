// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

@Suite struct KeyScheduleTests {
    @Test func keysAreDistinctAndSized() {
        let keys = DerivedKeys(secret: secret(7))
        #expect(keys.tagKey.count == 32)
        #expect(keys.sealKeyBytes(epoch: 5).count == 16)
        #expect(keys.typeKey.count == 32)
        #expect(keys.mdnsKey.count == 32)
        let all = [keys.tagKey, keys.sealKeyBytes(epoch: 5), keys.sealKeyBytes(epoch: 6), keys.typeKey, keys.mdnsKey]
        #expect(Set(all).count == 5)
    }

    @Test func keysFollowTheSpecFormula() throws {
        let s = secret(0x42)
        let keys = DerivedKeys(secret: s)
        let expected = try HKDF.deriveKey(ikm: s.bytes, salt: Array("baton/v1".utf8), info: Array("baton/v1 seal".utf8) + [0, 0, 0, 0, 0, 0, 0, 5], count: 16)
        #expect(keys.sealKeyBytes(epoch: 5) == expected)
        let mac = HMACSHA256.mac(key: keys.tagKey, message: Array("baton/v1 epoch".utf8) + [0, 0, 0, 0, 0, 0, 0, 5])
        let material = keys.epochMaterial(5)
        #expect(material.tag == Array(mac[0..<6]))
        #expect(material.mask == mac[6])
    }

    @Test func tagsRotateEveryEpochAndDifferPerSecret() {
        let a = DerivedKeys(secret: secret(1)), b = DerivedKeys(secret: secret(2))
        var seen = Set<[UInt8]>()
        for epoch in UInt64(1000)..<1100 {
            #expect(seen.insert(a.epochMaterial(epoch).tag).inserted)
            #expect(seen.insert(b.epochMaterial(epoch).tag).inserted)
        }
    }

    @Test func typeHashIsKeyedPerDevice() {
        let a = DerivedKeys(secret: secret(1)), b = DerivedKeys(secret: secret(2))
        #expect(a.typeHash("org.example.Reader.reading") != b.typeHash("org.example.Reader.reading"))
        #expect(a.typeHash("org.example.Reader.reading") != a.typeHash("org.example.Reader.Reading"))
        #expect(a.typeHash("x.y") == a.typeHash("x.y"))
    }

    @Test func epochArithmetic() {
        #expect(Protocol.epoch(unixSeconds: 0) == 0)
        #expect(Protocol.epoch(unixSeconds: -5) == 0)
        #expect(Protocol.epoch(unixSeconds: 899) == 0)
        #expect(Protocol.epoch(unixSeconds: 900) == 1)
        #expect(Protocol.epoch(unixSeconds: 1_800_000_000) == 2_000_000)
    }

    @Test func mdnsNameRotatesAndIsHex() {
        let keys = DerivedKeys(secret: secret(3))
        let name = keys.mdnsInstanceName(epoch: 10)
        #expect(name.count == 16)
        #expect(name.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(name != keys.mdnsInstanceName(epoch: 11))
    }

    @Test func deviceIDShortForm() throws {
        let id = try DeviceID(bytes: [0xAB, 0xCD, 0x01, 0x23] + [UInt8](repeating: 0, count: 12))
        #expect(id.shortForm == "abcd-0123")
        #expect(throws: WireError.malformed("device id length")) { try DeviceID(bytes: [1, 2, 3]) }
    }
}
