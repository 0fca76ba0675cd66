// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonDBus
import Testing

/// Each typed argument/reply reads back what it writes, in the signatures docs/dbus-api.md gives.
@Suite("BatonAPI: typed arguments and replies")
struct TypedReplyTests {
    @Test func ringMemberRoundTrips() throws {
        let peer = RingMember(name: "alpha", deviceID: String(repeating: "ab", count: 16), shortID: "abab-abab", isSelf: false,
                              pairedSince: 10, lastSeen: 20, lastRSSI: -60, endpoints: ["10.0.0.1:7000"])
        let me = RingMember(name: "beta", deviceID: String(repeating: "cd", count: 16), shortID: "cdcd-cdcd", isSelf: true)
        let reply: [DBusValue] = [.array(elementSignature: "a{sv}", [peer.dbusValue, me.dbusValue])]
        #expect(reply[0].signature == "aa{sv}")
        #expect(peer.dbusValue.asDictionary?["LastRSSI"] == .int16(-60))
        #expect(try RingMember.list(reply) == [peer, me])
    }

    @Test func ringMemberWithoutItsRequiredFieldsIsAnUnexpectedReply() {
        #expect(throws: BatonAPIError.self) { _ = try RingMember(.propertyDictionary(["Name": .string("x")])) }
        #expect(throws: BatonAPIError.self) { _ = try RingMember.list([.string("x")]) }
    }

    @Test func pairingEndpointRoundTripsAndSkipsMalformedEntries() throws {
        let ble = PairingEndpoint(name: "alpha", sessionID: "0123456789abcdef", address: "AA:BB:CC:DD:EE:FF", port: 0,
                                  transport: "ble", psm: 0x81, addressType: "random")
        let reply: [DBusValue] = [.array(elementSignature: "a{sv}", [ble.dbusValue, .propertyDictionary(["Name": .string("half")])])]
        #expect(try PairingEndpoint.list(reply) == [ble])
    }

    @Test func sessionPropertiesRoundTrip() throws {
        let session = PairingSessionProperties(state: "confirming", role: "initiator", code: "123456", port: 7001, sessionID: "00ff")
        #expect(session.dbusProperties["Port"] == .uint16(7001))
        let read = try PairingSessionProperties(session.dbusProperties)
        #expect(read == session && read.knownState == .confirming)
        #expect(throws: BatonAPIError.self) { _ = try PairingSessionProperties([:]) }
    }

    @Test func managerStatusRoundTrips() throws {
        let status = ManagerStatus(state: "running", adapter: "hci0", radio: "both",
                                   errors: [ManagerStatus.ErrorRecord(time: 5, category: "source-timeout", count: 2)])
        #expect(status.dbusValue.signature == "a{sv}")
        #expect(try ManagerStatus(status.dbusValue) == status)
        #expect(throws: BatonAPIError.self) { _ = try ManagerStatus(.propertyDictionary(["State": .string("running")])) }
    }

    @Test func managerStatusCarriesWhyTheRadioIsUnavailable() throws {
        let status = ManagerStatus(state: "degraded", adapter: "hci0", radio: "unavailable", radioDetail: "bluetoothd is not running")
        #expect(status.dbusValue.asDictionary?["RadioDetail"] == .string("bluetoothd is not running"))
        #expect(try ManagerStatus(status.dbusValue) == status)
        // Absent when the radio works (or from an older daemon); a wrong type is refused.
        #expect(ManagerStatus(state: "running", adapter: "hci0", radio: "both").dbusValue.asDictionary?["RadioDetail"] == nil)
        #expect(throws: BatonAPIError.self) {
            _ = try ManagerStatus(.propertyDictionary(["State": .string("degraded"), "Adapter": .string("hci0"),
                                                       "Radio": .string("unavailable"), "RadioDetail": .uint32(1)]))
        }
    }

    @Test func managerStatusCarriesTheLastRefusedRingChange() throws {
        let status = ManagerStatus(state: "running", adapter: "hci0", radio: "both", ringChangeRefused: "the removal of x was refused",
                                   ringChangeRefusedTime: 1_700_000_000)
        #expect(status.dbusValue.asDictionary?["RingChangeRefused"] == .string("the removal of x was refused"))
        #expect(status.dbusValue.asDictionary?["RingChangeRefusedTime"] == .int64(1_700_000_000))
        #expect(try ManagerStatus(status.dbusValue) == status)
        #expect(ManagerStatus(state: "running", adapter: "hci0", radio: "both").dbusValue.asDictionary?["RingChangeRefused"] == nil)
        #expect(throws: BatonAPIError.self) {
            _ = try ManagerStatus(.propertyDictionary(["State": .string("running"), "Adapter": .string("hci0"),
                                                       "Radio": .string("both"), "RingChangeRefused": .boolean(true)]))
        }
    }

    @Test func managerStatusSaysHowTheKeysAreKeptAtRest() throws {
        let status = ManagerStatus(state: "running", adapter: "hci0", radio: "both", secretsAtRest: "sealed-host+tpm2")
        #expect(status.dbusValue.asDictionary?["SecretsAtRest"] == .string("sealed-host+tpm2"))
        #expect(try ManagerStatus(status.dbusValue) == status)
        // Absent from an older daemon; a wrong type is refused.
        #expect(ManagerStatus(state: "running", adapter: "hci0", radio: "both").dbusValue.asDictionary?["SecretsAtRest"] == nil)
        #expect(throws: BatonAPIError.self) {
            _ = try ManagerStatus(.propertyDictionary(["State": .string("running"), "Adapter": .string("hci0"),
                                                       "Radio": .string("both"), "SecretsAtRest": .boolean(true)]))
        }
    }

    @Test func suggestionPropertiesRoundTripInTheirSignatures() {
        let suggestion = SuggestionProperties(device: "abab-abab", deviceName: "alpha", activityType: "org.example.doc", revision: 3,
                                              hasWebpageURL: true, near: false)
        for (name, value) in suggestion.dbusProperties {
            #expect(SuggestionProperties.signatures[name] == value.signature, "\(name)")
        }
        #expect(SuggestionProperties(suggestion.dbusProperties) == suggestion)
    }

    @Test func pairingOptionsCarryOnlyWhatIsSet() {
        #expect(AcceptOptions().dbusValue == .propertyDictionary([:]))
        #expect(AcceptOptions(host: "h").dbusValue == .propertyDictionary(["Host": .string("h")]))
        #expect(PairOptions(sessionID: "s").dbusValue == .propertyDictionary(["SessionId": .string("s")]))
        #expect(PairOptions(sessionID: "s", addressType: "random").dbusValue.asDictionary?["AddressType"] == .string("random"))
    }
}
