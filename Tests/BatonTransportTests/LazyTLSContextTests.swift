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

    @Test("use(identity:) swaps the identity for the next connection; an open channel keeps its own")
    func aNewIdentityIsProvedFromTheNextConnection() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            defer { client.close(); server.close() }
            #expect(client.peerDeviceID == DeviceID(identityKey: pair.serverIdentity.publicKey))

            // The server takes a new identity: a client pinning the old key no longer gets a channel,
            // one pinning the new key does; the channel opened before still works.
            let renewed = try Ed25519PrivateKey()
            pair.listener.use(identity: renewed)
            #expect(pair.listener.identityKey == renewed.publicKey)
            #expect(!pair.listener.contextIsMade)
            do {
                _ = try await pair.connect()
                Issue.record("a client pinning the old key got a channel")
            } catch {}
            let pinningNew = try TLSConnector(identity: pair.clientIdentity, pins: { PinSet([renewed.publicKey]) })
            async let accepted = pair.listener.accept()
            let fresh = try await pinningNew.connect(host: pair.host, port: pair.listener.port, timeout: .seconds(5))
            let freshServer = try await accepted
            defer { fresh.close(); freshServer.close() }
            #expect(fresh.peerDeviceID == DeviceID(identityKey: renewed.publicKey))
            try await client.send(Frame(type: .ack, requestID: 7, payload: []))
            #expect(try await server.receive(timeout: .seconds(5)).requestID == 7)

            // The client takes a new identity the server has not pinned: refused.
            pair.connector.use(identity: try Ed25519PrivateKey())
            let stillPinsNew = try TLSConnector(identity: pair.clientIdentity, pins: { PinSet([renewed.publicKey]) })
            stillPinsNew.use(identity: try Ed25519PrivateKey())
            do {
                _ = try await stillPinsNew.connect(host: pair.host, port: pair.listener.port, timeout: .seconds(5))
                Issue.record("a client with an unpinned new identity got a channel")
            } catch {}
        }
    }

    @Test("SecureL2CAP proves a new identity after use(identity:)")
    func l2capProvesANewIdentity() async throws {
        let alice = try Ed25519PrivateKey(), bob = try Ed25519PrivateKey(), carol = try Ed25519PrivateKey()
        let aliceSide = try SecureL2CAP(identity: alice, pins: { [bob] in PinSet([bob.publicKey]) })
        let bobSide = try SecureL2CAP(identity: bob, pins: { [carol] in PinSet([carol.publicKey]) })
        aliceSide.use(identity: carol)
        #expect(aliceSide.identityKey == carol.publicKey)
        let (alicePipe, bobPipe) = FakeSDUPipe.pair(sduSize: 64)
        async let server = bobSide.accept(pipe: bobPipe)
        let client = try await aliceSide.connect(pipe: alicePipe)
        let accepted = try await server
        #expect(accepted.peerDeviceID == DeviceID(identityKey: carol.publicKey))
        client.close()
        accepted.close()
    }
}
