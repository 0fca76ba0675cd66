// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonCrypto
import COpenSSL
import Glibc
import Testing

@Suite("Handshakes that must fail")
struct HandshakeRefusalTests {
    @Test("An unpinned client is refused, and the server accepts pinned clients afterwards")
    func unpinnedClientRefused() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let stranger = try Ed25519PrivateKey()
            let strangerConnector = try TLSConnector(identity: stranger, pins: { PinSet([pair.serverIdentity.publicKey]) })
            // TLS 1.3: the client's handshake may complete before the server judged its certificate,
            // so the refusal can surface either at connect or at the first receive.
            do {
                let channel = try await strangerConnector.connect(host: "127.0.0.1", port: pair.listener.port)
                await #expect(throws: TransportError.self) { try await channel.receive(timeout: .seconds(5)) }
            } catch {
                // Refused during connect: also correct.
            }
            let failures = await pair.failures.waitForCount(1)
            #expect(failures == [.peerNotRecognised])

            let (client, server) = try await pair.connectedChannels()
            try await client.send(Frame(type: .ack, requestID: 3, payload: []))
            #expect(try await server.receive().requestID == 3)
        }
    }

    @Test("A client refuses a server whose key is not pinned")
    func unpinnedServerRefused() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let otherKey = try Ed25519PrivateKey().publicKey
            let connector = try TLSConnector(identity: pair.clientIdentity, pins: { PinSet([otherKey]) })
            await #expect(throws: TransportError.peerNotRecognised) {
                try await connector.connect(host: "127.0.0.1", port: pair.listener.port)
            }
            // The client proved itself first (§8.1), so the server accepted it; it sees the client leave.
            let accepted = try await pair.listener.accept()
            #expect(accepted.peerIdentityKey == pair.clientIdentity.publicKey)
            await #expect(throws: TransportError.closed) { try await accepted.receive(timeout: .seconds(5)) }
            #expect(pair.failures.all.isEmpty)
        }
    }

    @Test("A client presenting no certificate is refused")
    func clientWithoutCertificate() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let context = try #require(SSL_CTX_new(TLS_client_method()))
            defer { SSL_CTX_free(context) }
            _ = SSL_CTX_set_alpn_protos(context, [7] + Array("baton/1".utf8), 8)
            let outcome = await runRawClient(port: pair.listener.port, context: RawContext(pointer: context))
            #expect(outcome == .refusedAfterHandshake)
            #expect(await pair.failures.waitForCount(1) == [.peerCertificateMissing])
        }
    }

    @Test("A client whose certificate carries a P-256 key is refused")
    func nonEd25519ClientRefused() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let keyContext = try #require(EVP_PKEY_CTX_new_from_name(nil, "EC", nil))
            defer { EVP_PKEY_CTX_free(keyContext) }
            var key: OpaquePointer?
            try #require(EVP_PKEY_keygen_init(keyContext) == 1)
            try #require(EVP_PKEY_CTX_set_group_name(keyContext, "P-256") == 1)
            try #require(EVP_PKEY_generate(keyContext, &key) == 1)
            let ecKey = try #require(key)
            defer { EVP_PKEY_free(ecKey) }
            let certificate = try #require(X509_new())
            defer { X509_free(certificate) }
            try #require(X509_set_version(certificate, Int(X509_VERSION_3)) == 1)
            try #require(ASN1_INTEGER_set_uint64(X509_get_serialNumber(certificate), 1) == 1)
            try #require(ASN1_TIME_set_string_X509(X509_getm_notBefore(certificate), "20000101000000Z") == 1)
            try #require(ASN1_TIME_set_string_X509(X509_getm_notAfter(certificate), "99991231235959Z") == 1)
            try #require(X509_set_pubkey(certificate, ecKey) == 1)
            try #require(X509_sign(certificate, ecKey, EVP_sha256()) > 0)

            let context = try #require(SSL_CTX_new(TLS_client_method()))
            defer { SSL_CTX_free(context) }
            try #require(SSL_CTX_use_certificate(context, certificate) == 1)
            try #require(SSL_CTX_use_PrivateKey(context, ecKey) == 1)
            _ = SSL_CTX_set_alpn_protos(context, [7] + Array("baton/1".utf8), 8)
            let outcome = await runRawClient(port: pair.listener.port, context: RawContext(pointer: context))
            #expect(outcome == .refusedAfterHandshake)
            #expect(await pair.failures.waitForCount(1) == [.peerKeyNotEd25519])
        }
    }

    @Test("A client that offers only TLS 1.2 is refused")
    func tls12ClientRefused() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            // A pinned identity with everything right except the version.
            let client = try TLSContext(identity: pair.clientIdentity, role: .client)
            #expect(SSL_CTX_ctrl(client.pointer, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1)
            #expect(SSL_CTX_ctrl(client.pointer, SSL_CTRL_SET_MAX_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1)
            let verification = HandshakeVerification()
            let outcome = await runRawClient(port: pair.listener.port, context: RawContext(pointer: client.pointer), verification: verification)
            #expect(outcome == .handshakeRefused)
            let failures = await pair.failures.waitForCount(1)
            #expect(failures.count == 1)
            if case .handshakeFailed(let text)? = failures.first {
                #expect(text.contains("protocol"))
            } else {
                Issue.record("expected handshakeFailed, got \(failures)")
            }
        }
    }

    @Test("A client with another ALPN, or none, is refused", arguments: [["http/1.1"], []])
    func wrongALPNRefused(offered: [String]) async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let client = try TLSContext(identity: pair.clientIdentity, role: .client)
            let wire = offered.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
            if wire.isEmpty {
                // An empty list switches ALPN off.
                #expect(SSL_CTX_set_alpn_protos(client.pointer, nil, 0) == 0)
            } else {
                #expect(SSL_CTX_set_alpn_protos(client.pointer, wire, UInt32(wire.count)) == 0)
            }
            let verification = HandshakeVerification()
            let outcome = await runRawClient(port: pair.listener.port, context: RawContext(pointer: client.pointer), verification: verification)
            // With a foreign ALPN the server aborts in its first flight; with none it finds out after the handshake.
            #expect(outcome == (offered.isEmpty ? .refusedAfterHandshake : .handshakeRefused))
            #expect(await pair.failures.waitForCount(1) == [.alpnMismatch])
        }
    }

    @Test("A peer that connects and says nothing is dropped at the handshake timeout")
    func handshakeTimeout() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair(configuration: TransportConfiguration(handshakeTimeout: .milliseconds(300)))
            defer { pair.listener.close() }
            let descriptor = try rawTCPConnect(port: pair.listener.port)
            defer { close(descriptor) }
            let start = ContinuousClock.now
            #expect(await waitForPeerClose(descriptor))
            #expect(ContinuousClock.now - start < .seconds(4))
            #expect(await pair.failures.waitForCount(1) == [.handshakeTimedOut])
            #expect(pair.listener.liveConnections == 0)
        }
    }

    @Test("Connections over the limit are closed on arrival; slots free up when connections end")
    func connectionLimit() async throws {
        try await withTimeLimit {
            // Eviction only after a minute: on a loaded machine the idle ones may be seconds old
            // when the third arrives, and this test is about arrival, not eviction.
            let pair = try PinnedPair(configuration: TransportConfiguration(handshakeTimeout: .seconds(10), maxConnections: 2,
                                                                            evictionAge: .seconds(60)))
            defer { pair.listener.close() }
            let idle = try (0..<2).map { _ in try rawTCPConnect(port: pair.listener.port) }
            defer { idle.forEach { close($0) } }
            // Let the listener admit both before the third arrives.
            let deadline = ContinuousClock.now + .seconds(5)
            while pair.listener.liveConnections < 2 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(pair.listener.liveConnections == 2)
            let third = try rawTCPConnect(port: pair.listener.port)
            defer { close(third) }
            #expect(await waitForPeerClose(third))

            // Closing the idle ones ends their handshakes (EOF), which frees the slots.
            idle.forEach { shutdown($0, Int32(SHUT_RDWR)) }
            _ = await pair.failures.waitForCount(2)
            let (client, server) = try await pair.connectedChannels()
            try await client.send(Frame(type: .ack, requestID: 1, payload: []))
            #expect(try await server.receive().type == .ack)
        }
    }

    @Test("Removing a pin at runtime refuses new handshakes on both sides")
    func pinRemovedAtRuntime() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (first, _) = try await pair.connectedChannels()
            first.close()

            // The client proves itself first (§8.1): with the server still pinning it, the client's own
            // check of the server is what refuses.
            pair.clientPins.remove(pair.serverIdentity.publicKey)
            await #expect(throws: TransportError.peerNotRecognised) {
                try await pair.connect()
            }

            pair.serverPins.remove(pair.clientIdentity.publicKey)
            do {
                let channel = try await pair.connect()
                await #expect(throws: TransportError.self) { try await channel.receive(timeout: .seconds(5)) }
            } catch {
                // Refused during connect: also correct.
            }
            #expect(await pair.failures.waitForCount(1) == [.peerNotRecognised])
        }
    }

    @Test("Connecting to a port nobody listens on fails with a socket error")
    func connectionRefused() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            // A bound socket that never listens holds a port on which connections are refused.
            let bound = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            try #require(bound >= 0)
            defer { close(bound) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bindStatus = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(bound, pointer, length) == 0 ? getsockname(bound, pointer, &length) : -1
                }
            }
            try #require(bindStatus == 0)
            await #expect(throws: TransportError.socket(operation: "connect", errno: ECONNREFUSED)) {
                try await pair.connector.connect(host: "127.0.0.1", port: UInt16(bigEndian: address.sin_port), timeout: .seconds(2))
            }
        }
    }
}
