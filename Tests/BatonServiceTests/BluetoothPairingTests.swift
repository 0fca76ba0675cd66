// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport
import BatonClient
import Testing
@testable import BatonService

/// Parts of pairing over L2CAP (protocol §8.3) that need no radio.
@Suite struct BluetoothPairingTests {
    /// With LE privacy the acceptor's advert moves to a new private address: the newest hearing of
    /// the session's advert (same PSM) is dialled, as random when heard so.
    @Test func pairingDialsTheAddressItsSessionsAdvertWasLastHeardFrom() throws {
        let session: [UInt8] = Array(1...8)
        func heard(_ address: String, _ type: String, session: [UInt8], psm: UInt16, at time: Int64) throws -> HeardPairingAdvert {
            HeardPairingAdvert(advert: try PairingAdvert(sessionID: session, tcpPublished: false, psm: psm, name: "alpha"),
                               address: try BluetoothAddress(address), addressType: try #require(LEAddressType(name: type)), heardAtMilliseconds: time)
        }
        let adverts = [try heard("52:85:CE:26:80:E0", "random", session: session, psm: 0x80, at: 100),
                       try heard("45:74:E7:02:96:AB", "random", session: session, psm: 0x80, at: 200),
                       try heard("4A:00:00:00:00:01", "random", session: session, psm: 0x81, at: 300),
                       try heard("4B:00:00:00:00:02", "random", session: Array(9...16), psm: 0x80, at: 400)]
        let target = try #require(PairingService.heardSessionAddress(adverts, psm: 0x80, sessionID: session))
        #expect(target.address.description == "45:74:E7:02:96:AB")
        #expect(target.type == .random)
        let publicTarget = PairingService.heardSessionAddress([try heard("00:AA:01:00:00:00", "public", session: session, psm: 0x80, at: 1)],
                                                              psm: 0x80, sessionID: session)
        #expect(publicTarget?.type == .public)
        #expect(PairingService.heardSessionAddress(adverts, psm: 0x80, sessionID: Array(17...24)) == nil)
    }

    /// A CI run's Pair over L2CAP got NoReply: two 15 s dials timed out and the third outlived the
    /// client's 40 s. Every dial, with the wait for a rotated address (3 s), fits the budget, and
    /// the budget the client's timeout, so the caller hears why.
    @Test func pairingDialsEndBeforeTheClientStopsWaiting() {
        let rotationWait: Duration = .seconds(3)
        #expect(PairingService.pairingDialBudget + rotationWait + .seconds(2) <= BatonConnection.pairTimeout)
        #expect(PairingService.pairingDialMinimum > rotationWait)
        #expect(PairingService.pairingDialTimeout <= PairingService.pairingDialBudget)
        #expect(PairingService.seconds(.milliseconds(15_049)) == "15.0")
        #expect(PairingService.seconds(.milliseconds(2_750)) == "2.7")
    }

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
