// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
import BatonCore

@Suite("Bluetooth addresses")
struct BluetoothAddressTests {
    @Test("Addresses parse in either case and print in upper case with leading zeros")
    func parsesAndFormats() throws {
        let address = try BluetoothAddress("00:aa:01:0F:00:01")
        #expect(address.bytes == [0x00, 0xAA, 0x01, 0x0F, 0x00, 0x01])
        #expect(address.description == "00:AA:01:0F:00:01")
        #expect(try BluetoothAddress(address.description) == address)
    }

    @Test("Malformed addresses are refused", arguments: [
        "", "00:11:22:33:44", "00:11:22:33:44:55:66", "0G:11:22:33:44:55", "0:11:22:33:44:555",
        "+1:11:22:33:44:55", "00-11-22-33-44-55", "00:11:22:33:44:55:", "００:11:22:33:44:55",
    ])
    func refusesMalformed(text: String) {
        #expect(throws: BluetoothAddressError.notAnAddress(String(text.prefix(32)))) { try BluetoothAddress(text) }
    }

    @Test("A very long text is refused with a bounded copy of it")
    func refusesLongText() {
        let text = String(repeating: "00:", count: 10_000)
        #expect(throws: BluetoothAddressError.notAnAddress(String(text.prefix(32)))) { try BluetoothAddress(text) }
    }

    @Test("Only six address bytes are accepted")
    func refusesWrongByteCount() {
        #expect(throws: BluetoothAddressError.wrongByteCount(5)) { try BluetoothAddress(bytes: [1, 2, 3, 4, 5]) }
        #expect(throws: BluetoothAddressError.wrongByteCount(7)) { try BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6, 7]) }
    }

    @Test("Address types keep the kernel's values and BlueZ's names")
    func addressTypes() {
        #expect(LEAddressType.public.rawValue == 1 && LEAddressType.random.rawValue == 2)
        #expect(LEAddressType(name: "public") == .public && LEAddressType(name: "random") == .random)
        #expect(LEAddressType(name: "Random") == nil && LEAddressType(name: "") == nil)
        #expect(LEAddressType.random.name == "random" && LEAddressType.public.name == "public")
        // BlueZ's report: anything but "random" was always taken as public.
        #expect(LEAddressType(reported: "random") == .random && LEAddressType(reported: "") == .public)
    }
}

@Suite("Endpoints")
struct EndpointTests {
    let address = try! BluetoothAddress("00:AA:01:00:00:01")

    @Test("IP endpoints parse with and without brackets and print canonically")
    func ipEndpoints() throws {
        #expect(try Endpoint(parsing: "192.0.2.1:7000") == .ip(host: "192.0.2.1", port: 7000))
        #expect(try Endpoint(parsing: "[2001:db8::1]:7000") == .ip(host: "2001:db8::1", port: 7000))
        #expect(try Endpoint(parsing: "host.example:1") == .ip(host: "host.example", port: 1))
        // An unbracketed IPv6 host was accepted before (the last colon separates the port).
        #expect(try Endpoint(parsing: "::1:80") == .ip(host: "::1", port: 80))
        #expect(Endpoint.ip(host: "2001:db8::1", port: 7000).description == "[2001:db8::1]:7000")
        #expect(Endpoint.ip(host: "::1", port: 80).description == "[::1]:80")
        #expect(Endpoint.ip(host: "192.0.2.1", port: 65535).description == "192.0.2.1:65535")
        for text in ["192.0.2.1:7000", "[2001:db8::1]:7000", "ble:00:AA:01:00:00:01/0xba", "ble:00:AA:01:00:00:01/0xba/random"] {
            #expect(try Endpoint(parsing: text).description == text)
        }
    }

    @Test("Malformed IP endpoints are refused with their reason", arguments: [
        ("192.0.2.1", EndpointError.missingPort), ("", .missingPort), ("host:", .badPort), ("host:0", .badPort),
        ("host:65536", .badPort), ("host:+80", .badPort), ("host:-1", .badPort), ("host:8 0", .badPort),
        ("host:000080", .badPort), (":80", .emptyHost), ("[]:80", .emptyHost), ("[::1:80", .badHost),
        ("::1]:80", .badHost), ("a b:80", .badHost), ("a/b:80", .badHost), ("a\u{0}b:80", .badHost),
        ("a\nb:80", .badHost), ("[a]b]:80", .badHost),
    ])
    func refusesMalformedIP(text: String, error: EndpointError) {
        #expect(throws: error) { try Endpoint(parsing: text) }
    }

    @Test("Bluetooth endpoints: PSM in decimal or hex within the dynamic range, optional /random")
    func bluetoothEndpoints() throws {
        #expect(try Endpoint(parsing: "ble:00:aa:01:00:00:01/0xBA") == .bluetooth(address: address, type: .public, psm: 0xBA))
        #expect(try Endpoint(parsing: "ble:00:AA:01:00:00:01/186") == .bluetooth(address: address, type: .public, psm: 0xBA))
        #expect(try Endpoint(parsing: "ble:00:AA:01:00:00:01/0x80/random") == .bluetooth(address: address, type: .random, psm: 0x80))
        #expect(try Endpoint(parsing: "ble:00:AA:01:00:00:01/255") == .bluetooth(address: address, type: .public, psm: 0xFF))
        #expect(Endpoint.bluetoothTransfer(address: address, type: .random).description == "ble:00:AA:01:00:00:01/0xba/random")
        #expect(Endpoint.bluetoothTransfer(address: address, type: .public).description == "ble:00:AA:01:00:00:01/0xba")
    }

    @Test("Malformed Bluetooth endpoints are refused with their reason", arguments: [
        ("ble:00:AA:01:00:00:01", EndpointError.badPSM), ("ble:00:AA:01:00:00:01/", .badPSM),
        ("ble:00:AA:01:00:00:01/0x", .badPSM), ("ble:00:AA:01:00:00:01/0xZZ", .badPSM),
        ("ble:00:AA:01:00:00:01/+128", .badPSM), ("ble:00:AA:01:00:00:01/70000", .badPSM),
        ("ble:00:AA:01:00:00:01/0x7f", .psmOutOfRange(0x7F)), ("ble:00:AA:01:00:00:01/256", .psmOutOfRange(256)),
        ("ble:00:AA:01:00:00:01/0xba/public", .unknownSuffix), ("ble:00:AA:01:00:00:01/0xba/random/x", .unknownSuffix),
        ("ble:00:AA:01:00:00/0xba", .badBluetoothAddress(.notAnAddress("00:AA:01:00:00"))),
        ("ble:/0xba", .badBluetoothAddress(.notAnAddress(""))),
    ])
    func refusesMalformedBluetooth(text: String, error: EndpointError) {
        #expect(throws: error) { try Endpoint(parsing: text) }
    }

    @Test("Over-long text is refused before it is parsed")
    func refusesLongText() {
        let text = String(repeating: "a", count: 300) + ":80"
        #expect(throws: EndpointError.tooLong(303)) { try Endpoint(parsing: text) }
        #expect(throws: EndpointError.badHost) { try Endpoint(parsing: String(repeating: "a", count: 200) + " :80") }
    }

    @Test("Merging puts the new first, drops duplicates and keeps eight")
    func merge() {
        let old = (1...8).map { Endpoint.ip(host: "192.0.2.\($0)", port: 7000) }
        let merged = Endpoint.merge(new: [.ip(host: "192.0.2.5", port: 7000), .ip(host: "198.51.100.1", port: 1)], old: old)
        #expect(merged.count == Endpoint.maxPerMember)
        #expect(merged.prefix(2) == [.ip(host: "192.0.2.5", port: 7000), .ip(host: "198.51.100.1", port: 1)])
        #expect(merged.dropFirst(2) == [1, 2, 3, 4, 6, 7].map { Endpoint.ip(host: "192.0.2.\($0)", port: 7000) }[...])
        #expect(Endpoint.merge(new: [], old: []) == [])
        let twice = Endpoint.ip(host: "a", port: 1)
        #expect(Endpoint.merge(new: [twice, twice], old: [twice]) == [twice])
    }

    @Test("Reachability and wildcards")
    func reachability() {
        #expect(Endpoint.ip(host: "192.0.2.1", port: 1).isReachableByOtherMachines)
        #expect(!Endpoint.ip(host: "127.0.0.1", port: 1).isReachableByOtherMachines)
        #expect(!Endpoint.ip(host: "::1", port: 1).isReachableByOtherMachines)
        #expect(!Endpoint.ip(host: "0.0.0.0", port: 1).isReachableByOtherMachines)
        #expect(!Endpoint.bluetoothTransfer(address: address, type: .public).isReachableByOtherMachines)
        #expect(Endpoint.isWildcard(host: "0.0.0.0") && Endpoint.isWildcard(host: "::") && Endpoint.isWildcard(host: "[::]"))
        #expect(!Endpoint.isWildcard(host: "127.0.0.1"))
        #expect(Endpoint.ip(host: "::", port: 1).isWildcard && !Endpoint.bluetoothTransfer(address: address, type: .public).isWildcard)
    }

    @Test("DNS-SD hints skip empty, wildcard and link-local addresses")
    func dnssdHints() {
        #expect(Endpoint.hint(resolvedAddress: "192.0.2.7", port: 7000) == .ip(host: "192.0.2.7", port: 7000))
        #expect(Endpoint.hint(resolvedAddress: "2001:db8::7", port: 7000)?.description == "[2001:db8::7]:7000")
        #expect(Endpoint.hint(resolvedAddress: "", port: 7000) == nil)
        #expect(Endpoint.hint(resolvedAddress: "0.0.0.0", port: 7000) == nil)
        #expect(Endpoint.hint(resolvedAddress: "FE80::1", port: 7000) == nil)
        #expect(Endpoint.hint(resolvedAddress: "192.0.2.7", port: 0) == nil)
        #expect(Endpoint.hint(resolvedAddress: "bad host", port: 7000) == nil)
    }

    @Test("Pairing hints: observed host with each announced port, then announced non-wildcards, then L2CAP")
    func pairingHints() {
        let hints = Endpoint.pairingHints(announced: ["0.0.0.0:7000", "192.0.2.1:7001", "garbage", "ble:00:AA:01:00:00:01/0xba"],
                                          observedHost: "198.51.100.9", bluetoothPeer: (address, .random))
        #expect(hints == [.ip(host: "198.51.100.9", port: 7000), .ip(host: "198.51.100.9", port: 7001),
                          .ip(host: "192.0.2.1", port: 7001), .bluetoothTransfer(address: address, type: .random)])
        #expect(Endpoint.pairingHints(announced: ["192.0.2.1:7001"], observedHost: "?", bluetoothPeer: nil) == [.ip(host: "192.0.2.1", port: 7001)])
        #expect(Endpoint.pairingHints(announced: ["192.0.2.1:7001"], observedHost: "", bluetoothPeer: nil) == [.ip(host: "192.0.2.1", port: 7001)])
        #expect(Endpoint.pairingHints(announced: [], observedHost: "198.51.100.9", bluetoothPeer: nil) == [])
    }
}
