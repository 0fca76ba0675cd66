// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonCrypto
import Testing

/// An idle daemon's listener and connectors make no SSL_CTX (libssl's configuration and the
/// algorithms it fetches stay out of memory, docs/benchmarks.md); the first connection makes it,
/// later ones share it.
@Suite("TLS contexts made at the first connection")
struct LazyTLSContextTests {
    @Test("A listener and a connector make their contexts at the first connection, once")
    func tcpContextsWaitForAConnection() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            #expect(!pair.listener.contextIsMade)
            #expect(!pair.connector.contextIsMade)
            let (client, server) = try await pair.connectedChannels()
            #expect(pair.listener.contextIsMade)
            #expect(pair.connector.contextIsMade)
            client.close()
            server.close()
            // A second connection over the same contexts.
            let (again, againServer) = try await pair.connectedChannels()
            try await again.send(Frame(type: .ack, requestID: 1, payload: []))
            #expect(try await againServer.receive(timeout: .seconds(5)).requestID == 1)
            again.close()
            againServer.close()
        }
    }

    @Test("SecureL2CAP makes each side's context at its first use")
    func l2capContextsWaitForAChannel() async throws {
        let alice = try Ed25519PrivateKey(), bob = try Ed25519PrivateKey()
        let aliceSide = try SecureL2CAP(identity: alice, pins: { [bob] in PinSet([bob.publicKey]) })
        let bobSide = try SecureL2CAP(identity: bob, pins: { [alice] in PinSet([alice.publicKey]) })
        #expect(aliceSide.contextsMade == (false, false))
        let (alicePipe, bobPipe) = FakeSDUPipe.pair(sduSize: 64)
        async let server = bobSide.accept(pipe: bobPipe)
        let client = try await aliceSide.connect(pipe: alicePipe)
        _ = try await server
        client.close()
        #expect(aliceSide.contextsMade == (false, true))
        #expect(bobSide.contextsMade == (true, false))
    }
}
