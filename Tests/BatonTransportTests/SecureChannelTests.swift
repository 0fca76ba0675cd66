// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonCrypto
import COpenSSL
import Glibc
import Synchronization
import Testing

@Suite("TLS channels between pinned identities")
struct SecureChannelTests {
    @Test("Frames travel both ways and each side sees the other's identity", arguments: ["127.0.0.1", "::1"])
    func exchangeBothWays(host: String) async throws {
        try await withTimeLimit {
            let pair = try PinnedPair(host: host)
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            #expect(client.peerIdentityKey == pair.serverIdentity.publicKey)
            #expect(server.peerIdentityKey == pair.clientIdentity.publicKey)
            #expect(server.peerDeviceID == DeviceID(identityKey: pair.clientIdentity.publicKey))

            let hello = HelloMessage(deviceID: DeviceID(identityKey: pair.clientIdentity.publicKey), rosterDigest: 7, maxFramePayload: 262_144)
            try await client.send(Frame(type: .hello, requestID: 1, payload: hello.payload))
            let received = try await server.receive()
            #expect(received.type == .hello)
            #expect(try HelloMessage(payload: received.payload) == hello)

            let reference = ActivityReference(typeHash: TypeHash(value: 0xA1B2_C3D4), revision: 9)
            try await server.send(Frame(type: .fetchActivity, requestID: 2, payload: reference.payload))
            let back = try await client.receive()
            #expect(back.requestID == 2)
            #expect(try ActivityReference(payload: back.payload) == reference)
            client.close()
            server.close()
        }
    }

    @Test("A 200 KB ActivityPayload frame makes the round trip intact")
    func largeFrameRoundTrip() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            let echo = startEchoServer(pair.listener)
            defer {
                pair.listener.close()
                echo.cancel()
            }
            let client = try await pair.connect()
            let frame = Frame(type: .activityPayload, requestID: 42, payload: patternedBytes(200 * 1024))
            try await client.send(frame)
            #expect(try await client.receive() == frame)
            client.close()
        }
    }

    @Test("Concurrent sends on one channel never interleave their frames")
    func concurrentSendsStayWhole() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            let frames = (0..<8).map { Frame(type: .activityPayload, requestID: UInt32($0), payload: patternedBytes(100_000, seed: UInt8($0))) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for frame in frames { group.addTask { try await client.send(frame) } }
                var received: [Frame] = []
                for _ in frames { received.append(try await server.receive()) }
                try await group.waitForAll()
                #expect(Set(received) == Set(frames))
            }
        }
    }

    @Test("A frame over its type's limit is refused before anything is sent")
    func unencodableFrame() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            await #expect(throws: TransportError.unencodableFrame(.payloadTooLarge(limit: 8, actual: 9))) {
                try await client.send(Frame(type: .fetchActivity, requestID: 1, payload: [UInt8](repeating: 0, count: 9)))
            }
            // The channel still works: nothing partial went out.
            try await client.send(Frame(type: .ack, requestID: 2, payload: []))
            #expect(try await server.receive() == Frame(type: .ack, requestID: 2, payload: []))
        }
    }

    @Test("receive gives up after its timeout when the peer is silent")
    func idleTimeout() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            await #expect(throws: TransportError.timedOut) { try await client.receive(timeout: .milliseconds(200)) }
            // A timeout leaves the channel usable.
            try await server.send(Frame(type: .ack, requestID: 4, payload: []))
            #expect(try await client.receive().requestID == 4)
        }
    }

    @Test("close wakes a pending receive and later calls throw closed")
    func closeWakesReceive() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            let pending = Task { try await client.receive(timeout: .seconds(30)) }
            try await Task.sleep(for: .milliseconds(100))
            client.close()
            await #expect(throws: TransportError.closed) { try await pending.value }
            await #expect(throws: TransportError.closed) { try await client.send(Frame(type: .ack, requestID: 1, payload: [])) }
            // The server sees the close as the end of the stream.
            await #expect(throws: TransportError.closed) { try await server.receive(timeout: .seconds(5)) }
        }
    }

    @Test("An oversize frame header from a pinned peer closes that channel; the server keeps serving")
    func oversizeHeader() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            // Hello allows 28 payload bytes; the header claims 29 and no payload follows.
            let header: [UInt8] = [1, FrameType.hello.rawValue, 0, 0, 0, 0, 0, 5, 0, 0, 0, 29]
            try await client.sendEncoded(header)
            await #expect(throws: TransportError.invalidFrame(.payloadTooLarge(limit: 28, actual: 29))) {
                try await server.receive()
            }
            #expect(server.isClosed)
            await #expect(throws: TransportError.closed) { try await client.receive(timeout: .seconds(5)) }

            let (second, secondServer) = try await pair.connectedChannels()
            try await second.send(Frame(type: .ack, requestID: 1, payload: []))
            #expect(try await secondServer.receive().type == .ack)
        }
    }

    @Test("The in-memory certificate is X.509 v3 with CN = baton and the key it was made for")
    func certificateContents() throws {
        let key = try Ed25519PrivateKey()
        let certificate = try SelfSignedCertificate(key: key)
        #expect(X509_get_version(certificate.certificate) == Int(X509_VERSION_3))
        #expect(ed25519PublicKey(of: certificate.certificate) == key.publicKey)
        var name = [CChar](repeating: 0, count: 64)
        let length = X509_NAME_get_text_by_NID(X509_get_subject_name(certificate.certificate), NID_commonName, &name, Int32(name.count))
        #expect(length == 5)
        #expect(String(decoding: name.prefix(5).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "baton")
    }
}

@Suite("TLS suites")
struct CipherSuiteTests {
    @Test("Two Baton peers agree on the first suite of the preference (AES-128-GCM on a CPU with AES instructions)")
    func cheapestSuiteFirst() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            let first = String(TLSContext.cipherSuitePreference.prefix { $0 != ":" })
            #expect(client.cipherSuite == first)
            #expect(server.cipherSuite == first)
            let aesInstructions = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n")
                .first { $0.hasPrefix("flags") || $0.hasPrefix("Features") }?.split(separator: " ").contains("aes") ?? true
            #expect(first == (aesInstructions ? "TLS_AES_128_GCM_SHA256" : "TLS_CHACHA20_POLY1305_SHA256"))
            client.close()
            server.close()
        }
    }

    @Test("A peer that offers a single TLS 1.3 suite still connects with it (all three stay allowed)",
          arguments: ["TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"])
    func singleSuitePeerConnects(suite: String) async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let context = try TLSContext(identity: pair.clientIdentity, role: .client)
            #expect(SSL_CTX_set_ciphersuites(context.pointer, suite) == 1)
            let deadline = Duration.seconds(5).deadlineFromNow
            async let accepted = pair.listener.accept()
            let socket = try await OwnedSocket.connectTCP(host: pair.host, port: pair.listener.port, until: deadline)
            let client = try await context.secure(socket, pins: pair.clientPins.provider, until: deadline, configuration: .init())
            let server = try await accepted
            #expect(client.cipherSuite == suite)
            #expect(server.cipherSuite == suite)
            let frame = Frame(type: .activityPayload, requestID: 3, payload: patternedBytes(50_000))
            try await client.send(frame)
            #expect(try await server.receive() == frame)
            client.close()
            server.close()
        }
    }
}
