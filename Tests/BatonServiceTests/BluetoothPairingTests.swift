import BatonCore
import BatonTransport
import Testing
@testable import BatonService

/// Parts of pairing over L2CAP (protocol §8.3) that need no radio.
@Suite struct BluetoothPairingTests {
    @Test func bluetoothTargetsParseAddressAndPSM() throws {
        let (address, psm) = try #require(RingService.splitBluetoothTarget("ble:00:AA:01:00:00:00/0x80"))
        #expect(address.description == "00:AA:01:00:00:00")
        #expect(psm == 0x80)
        #expect(RingService.splitBluetoothTarget("ble:00:aa:01:00:00:00/255")?.1 == 0xFF)
    }

    @Test func bluetoothTargetsOutsideTheDynamicRangeOrMalformedAreRefused() {
        for text in ["ble:00:AA:01:00:00:00/0x100", "ble:00:AA:01:00:00:00/0x7F", "ble:00:AA:01:00:00:00", "ble:00:AA:01:00:00/0x80",
                     "00:AA:01:00:00:00/0x80", "ble:/0x80", "ble:00:AA:01:00:00:00/", "ble:00:AA:01:00:00:00/-1", "127.0.0.1:80"] {
            #expect(RingService.splitBluetoothTarget(text) == nil, "\(text)")
        }
    }

    @Test func transferHintsRoundTripWithTheirAddressType() throws {
        let address = try BluetoothAddress("00:AA:01:00:00:01")
        let publicHint = RingService.bluetoothTransferEndpoint(address, .public)
        #expect(publicHint == "ble:00:AA:01:00:00:01/0xba")
        let (parsed, type, psm) = try #require(RingService.splitBluetoothEndpoint(publicHint))
        #expect(parsed == address && type == .public && psm == RingService.transferPSM)
        let randomHint = RingService.bluetoothTransferEndpoint(address, .random)
        #expect(randomHint == "ble:00:AA:01:00:00:01/0xba/random")
        #expect(RingService.splitBluetoothEndpoint(randomHint)?.1 == .random)
        // TCP hints are not mistaken for BLE ones, and a BLE hint is no TCP endpoint.
        #expect(RingService.splitBluetoothEndpoint("127.0.0.1:4000") == nil)
        #expect(RingService.splitBluetoothEndpoint("ble:00:AA:01:00:00:01/0xba/other") == nil)
        #expect(RingService.splitEndpoint(randomHint) == nil)
    }

    @Test func acceptFirstTakesTheTCPInitiatorWithoutABluetoothListener() async throws {
        let listener = try PlainFrameListener(host: "127.0.0.1", port: 0)
        async let accepted = PairingService.acceptFirst(tcp: listener, bluetooth: nil, timeout: .seconds(10))
        let client = try await PlainFrameConnector.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(10))
        let server = try await accepted
        #expect(server is PlainFrameChannel)
        client.close()
        server.close()
        // The listener is closed once an initiator arrived.
        await #expect(throws: TransportError.self) { try await PlainFrameConnector.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(2)) }
    }

    @Test func acceptFirstReportsTheTimeout() async throws {
        let listener = try PlainFrameListener(host: "127.0.0.1", port: 0)
        await #expect(throws: TransportError.timedOut) { try await PairingService.acceptFirst(tcp: listener, bluetooth: nil, timeout: .milliseconds(200)) }
    }
}
