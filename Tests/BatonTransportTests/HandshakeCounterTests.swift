// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonCrypto
import Testing

@Suite("Handshake counters")
struct HandshakeCounterTests {
    @Test("TLSConnector counts every handshake it starts, refused ones included; frames on an open channel add none")
    func connectorCountsHandshakes() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            #expect(pair.connector.handshakes.value == 0)
            let (client, server) = try await pair.connectedChannels()
            try await client.send(Frame(type: .ack, requestID: 1, payload: []))
            _ = try await server.receive(timeout: .seconds(5))
            try await client.send(Frame(type: .ack, requestID: 2, payload: []))
            _ = try await server.receive(timeout: .seconds(5))
            #expect(pair.connector.handshakes.value == 1)

            pair.clientPins.remove(pair.serverIdentity.publicKey)
            await #expect(throws: TransportError.peerNotRecognised) {
                try await pair.connect()
            }
            #expect(pair.connector.handshakes.value == 2)
        }
    }

    @Test("SecureL2CAP counts the handshakes of both its sides")
    func secureL2CAPCountsHandshakes() async throws {
        let alice = try Ed25519PrivateKey()
        let bob = try Ed25519PrivateKey()
        let aliceSide = try SecureL2CAP(identity: alice, pins: { [bob] in PinSet([bob.publicKey]) })
        let bobSide = try SecureL2CAP(identity: bob, pins: { [alice] in PinSet([alice.publicKey]) })
        for round in 1...2 {
            let (alicePipe, bobPipe) = FakeSDUPipe.pair(sduSize: 64)
            async let server = bobSide.accept(pipe: bobPipe)
            let client = try await aliceSide.connect(pipe: alicePipe)
            _ = try await server
            client.close()
            #expect(aliceSide.handshakes.value == round)
            #expect(bobSide.handshakes.value == round)
        }
    }
}
