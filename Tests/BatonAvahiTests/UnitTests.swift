// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus
import Testing

@testable import BatonAvahi

func member(_ byte: UInt8) throws -> (DeviceID, DerivedKeys) {
    let secret = try AdvertisingSecret(bytes: [UInt8](repeating: byte, count: 32), generation: 1)
    let id = try DeviceID(bytes: [UInt8](repeating: byte, count: 16))
    return (id, DerivedKeys(secret: secret))
}

@Suite struct InstanceNameDirectoryTests {
    @Test func protocolVectorNamesMapToTheirMember() throws {
        // §10.1: S = 00..1f, instance names for epochs 2000000 and 2000001.
        let secret = try AdvertisingSecret(bytes: (0..<32).map { UInt8($0) }, generation: 1)
        let id = try DeviceID(bytes: [UInt8](repeating: 7, count: 16))
        let members = [id: DerivedKeys(secret: secret)]
        let directory = InstanceNameDirectory(members: members, epoch: 2_000_000)
        #expect(directory.member(forInstanceName: "c8ec375262ede187") == id)
        #expect(directory.member(forInstanceName: "e7e0e81ee3150a2b") == id)  // next epoch, clock skew
        #expect(directory.member(forInstanceName: "E7E0E81EE3150A2B") == id)  // DNS folds case
        #expect(directory.member(forInstanceName: "b4405193fe4847fc") == nil)  // epoch 0: long gone
    }

    @Test func acceptsPreviousCurrentAndNextEpochOnly() throws {
        let (a, keysA) = try member(1)
        let (b, keysB) = try member(2)
        let members = [a: keysA, b: keysB]
        let epoch: UInt64 = 1_900_000
        for offset in [-1, 0, 1] {
            let name = keysB.mdnsInstanceName(epoch: UInt64(Int64(epoch) + Int64(offset)))
            #expect(InstanceNameDirectory.member(forInstanceName: name, members: members, epoch: epoch) == b)
        }
        for offset in [-2, 2] {
            let name = keysA.mdnsInstanceName(epoch: UInt64(Int64(epoch) + Int64(offset)))
            #expect(InstanceNameDirectory.member(forInstanceName: name, members: members, epoch: epoch) == nil)
        }
    }

    @Test func strangersAndJunkMapToNil() throws {
        let (a, keysA) = try member(1)
        let (_, strangerKeys) = try member(9)
        let directory = InstanceNameDirectory(members: [a: keysA], epoch: 42)
        #expect(directory.member(forInstanceName: strangerKeys.mdnsInstanceName(epoch: 42)) == nil)
        for junk in ["", "laptop", String(keysA.mdnsInstanceName(epoch: 42).dropLast()),
                     keysA.mdnsInstanceName(epoch: 42) + "0", String(repeating: "é", count: 8)] {
            #expect(directory.member(forInstanceName: junk) == nil)
        }
    }

    @Test func epochBoundsDoNotWrap() {
        #expect(InstanceNameDirectory.acceptedEpochs(around: 0).sorted() == [0, 1])
        #expect(InstanceNameDirectory.acceptedEpochs(around: .max).sorted() == [.max - 1, .max])
    }
}

@Suite struct TXTRecordTests {
    @Test func encodesSortedKeyValueStrings() throws {
        let encoded = try TXTRecord.encode(["v": "1", "port": "4433", "flag": ""])
        #expect(encoded == [Array("flag=".utf8), Array("port=4433".utf8), Array("v=1".utf8)])
    }

    @Test func rejectsBadKeysAndOversizedRecords() {
        for bad in ["", "a=b", "tab\t", "ünï"] {
            #expect(throws: AvahiError.self) { try TXTRecord.encode([bad: "x"]) }
        }
        #expect(throws: AvahiError.self) { try TXTRecord.encode(["k": String(repeating: "x", count: 254)]) }
        var many: [String: String] = [:]
        for index in 0..<20 { many["k\(index)"] = String(repeating: "x", count: 100) }
        #expect(throws: AvahiError.self) { try TXTRecord.encode(many) }
    }

    @Test func decodeKeepsFirstKeyAndSkipsJunk() {
        let strings: [[UInt8]] = [
            Array("Sid=0011".utf8), Array("sid=ffff".utf8), Array("=novalue".utf8), [],
            [UInt8(ascii: "k"), UInt8(ascii: "="), 0xFF, 0xFE], Array("bool".utf8), Array("eq=a=b".utf8),
        ]
        #expect(TXTRecord.decode(strings) == ["sid": "0011", "bool": "", "eq": "a=b"])
    }

    @Test func decodeIsBounded() {
        let strings = (0..<500).map { Array("k\($0)=v".utf8) }
        #expect(TXTRecord.decode(strings).count == TXTRecord.maxEntries)
    }

    @Test func pairingSessionIDRoundTrips() throws {
        let sid: [UInt8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]
        let txt = try PairingEndpointTXT.txt(sessionID: sid)
        #expect(txt == ["sid": "0123456789abcdef"])
        #expect(PairingEndpointTXT.sessionID(from: txt) == sid)
        #expect(PairingEndpointTXT.sessionID(from: ["sid": "0123456789ABCDEF"]) == sid)
        #expect(PairingEndpointTXT.sessionID(from: ["sid": "0123"]) == nil)
        #expect(PairingEndpointTXT.sessionID(from: ["sid": "0123456789abcdeg"]) == nil)
        #expect(PairingEndpointTXT.sessionID(from: [:]) == nil)
        #expect(throws: AvahiError.self) { try PairingEndpointTXT.txt(sessionID: [1, 2, 3]) }
    }
}

@Suite struct AvahiErrorTests {
    @Test func mapsAvahiAndBusErrorNames() {
        #expect(AvahiError(DBusError(name: "org.freedesktop.Avahi.CollisionError")) == .collision)
        #expect(AvahiError(DBusError(name: "org.freedesktop.Avahi.TooManyObjectsError")) == .tooManyObjects)
        #expect(AvahiError(DBusError(name: "org.freedesktop.Avahi.InvalidServiceNameError")) == .invalidServiceName)
        #expect(AvahiError(DBusError(name: "org.freedesktop.Avahi.NoDaemonError")) == .daemonUnavailable)
        #expect(AvahiError(DBusError(name: DBusError.serviceUnknownName)) == .daemonUnavailable)
        #expect(AvahiError(DBusError(name: DBusError.nameHasNoOwnerName)) == .daemonUnavailable)
        #expect(AvahiError(DBusError(name: "org.freedesktop.Avahi.DNSSERVFAIL", message: "m"))
                == .avahi(name: "org.freedesktop.Avahi.DNSSERVFAIL", message: "m"))
        let other = DBusError(name: DBusError.accessDeniedName)
        #expect(AvahiError(other) == .bus(other))
    }

    @Test func resolveReplyIsValidated() throws {
        var reply: [DBusValue] = [
            .int32(2), .int32(0), .string("n"), .string("_baton._tcp"), .string("local"), .string("h.local"),
            .int32(0), .string("192.168.1.2"), .uint16(4433),
            .array(elementSignature: "ay", [.bytes(Array("a=1".utf8))]), .uint32(8),
        ]
        let endpoint = try AvahiBrowser.endpoint(fromResolveReply: reply)
        #expect(endpoint.port == 4433 && endpoint.txt == ["a": "1"] && endpoint.isLocal && endpoint.addressProtocol == .inet)
        reply[8] = .uint32(4433)
        #expect(throws: AvahiError.malformedReply("ResolveService")) { try AvahiBrowser.endpoint(fromResolveReply: reply) }
        #expect(throws: AvahiError.self) { try AvahiBrowser.endpoint(fromResolveReply: Array(reply.prefix(5))) }
        #expect(AvahiBrowser.itemKey([.int32(1)]) == nil)
    }
}
