// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonCrypto
import COpenSSL
import Glibc
import Testing

/// What a peer that completed TLS with the listener saw.
struct RawSessionView: Sendable {
    var certificateDER: [UInt8]
    var certificateKey: [UInt8]?
    var commonName: String
    var exporter: [UInt8]
    /// Everything the server sent after the handshake, up to `expecting` bytes or the server's close.
    var received: [UInt8]
}

/// A blocking OpenSSL client with Baton's client context (a throw-away certificate, ALPN) that completes
/// the TLS handshake, records what the server showed, sends `proof(exporter)` if given and reads.
func runRawSession(port: UInt16, context: TLSContext, expecting: Int = ChannelIdentityProof.byteCount,
                   proof: (@Sendable ([UInt8]) -> [UInt8])? = nil) async throws -> RawSessionView {
    let result: Result<RawSessionView, TransportError> = await withCheckedContinuation { continuation in
        blockingQueue().async {
            continuation.resume(returning: Result { () throws(TransportError) in
                try rawSessionBlocking(port: port, context: context, expecting: expecting, proof: proof)
            })
        }
    }
    return try result.get()
}

private func rawSessionBlocking(port: UInt16, context: TLSContext, expecting: Int,
                                proof: (@Sendable ([UInt8]) -> [UInt8])?) throws(TransportError) -> RawSessionView {
    let descriptor: Int32
    do { descriptor = try rawTCPConnect(port: port) } catch { throw .socket(operation: "connect", errno: ECONNREFUSED) }
    defer { close(descriptor) }
    guard let ssl = SSL_new(context.pointer) else { throw .library("SSL_new") }
    defer { SSL_free(ssl) }
    defer { ERR_clear_error() }
    try TLSContext.installCertificate(on: ssl)
    // The client's certificate check needs its state object.
    let verification = HandshakeVerification()
    _ = SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(verification).toOpaque())
    _ = SSL_set_fd(ssl, descriptor)
    guard SSL_connect(ssl) == 1 else { throw .handshakeFailed(takeSSLError("raw connect").text) }
    guard let certificate = SSL_get0_peer_certificate(ssl) else { throw .peerCertificateMissing }
    let length = i2d_X509(certificate, nil)
    var der = [UInt8](repeating: 0, count: Int(max(length, 0)))
    der.withUnsafeMutableBufferPointer { buffer in
        var cursor = buffer.baseAddress
        _ = i2d_X509(certificate, &cursor)
    }
    var name = [CChar](repeating: 0, count: 128)
    let nameLength = X509_NAME_get_text_by_NID(X509_get_subject_name(certificate), NID_commonName, &name, Int32(name.count))
    var exporter = [UInt8](repeating: 0, count: ChannelIdentityProof.exporterByteCount)
    let label = ChannelIdentityProof.exporterLabel
    guard SSL_export_keying_material(ssl, &exporter, exporter.count, label, label.utf8.count, nil, 0, 0) == 1 else {
        throw .library("exporter")
    }
    if let proof {
        let bytes = proof(exporter)
        guard SSL_write(ssl, bytes, Int32(bytes.count)) == Int32(bytes.count) else { throw .closed }
    }
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 256)
    while received.count < expecting {
        let count = SSL_read(ssl, &chunk, Int32(min(chunk.count, expecting - received.count)))
        guard count > 0 else { break }
        received += chunk.prefix(Int(count))
    }
    return RawSessionView(
        certificateDER: der, certificateKey: ed25519PublicKey(of: certificate),
        commonName: nameLength > 0 ? String(decoding: name.prefix(Int(nameLength)).map { UInt8(bitPattern: $0) }, as: UTF8.self) : "",
        exporter: exporter, received: received)
}

extension [UInt8] {
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { Array(self[$0..<($0 + needle.count)]) == needle }
    }
}

@Suite("What a stranger completing TLS learns (§8.1)")
struct StrangerViewTests {
    @Test("A stranger sees a fresh throw-away certificate on every connection and restart, never the identity")
    func strangerLearnsNothingStable() async throws {
        try await withTimeLimit {
            let identity = try Ed25519PrivateKey()
            let stranger = try TLSContext(identity: try Ed25519PrivateKey(), role: .client)
            let configuration = TransportConfiguration(handshakeTimeout: .milliseconds(300))
            var views: [RawSessionView] = []
            for _ in 0..<2 {  // two daemon runs with the same identity ("restart")
                let failures = FailureLog()
                let listener = try TLSListener(identity: identity, pins: { PinSet([]) }, host: "127.0.0.1", port: 0,
                                               configuration: configuration, onHandshakeFailure: failures.record)
                defer { listener.close() }
                for _ in 0..<2 {
                    views.append(try await runRawSession(port: listener.port, context: stranger))
                }
                // A stranger that proves nothing is dropped at the handshake timeout.
                #expect(await failures.waitForCount(2) == [.handshakeTimedOut, .handshakeTimedOut])
            }
            let deviceID = DeviceID(identityKey: identity.publicKey)
            for view in views {
                #expect(view.received.isEmpty, "the server sent something to a peer that proved nothing")
                #expect(view.commonName == "baton")
                #expect(view.certificateKey != nil && view.certificateKey != identity.publicKey)
                #expect(!view.certificateDER.contains(subsequence: identity.publicKey))
                #expect(!view.certificateDER.contains(subsequence: deviceID.bytes))
                #expect(!view.certificateDER.contains(subsequence: Array(deviceID.description.utf8)))
            }
            #expect(Set(views.map(\.certificateKey)).count == views.count)
            #expect(Set(views.map(\.certificateDER)).count == views.count)
        }
    }

    @Test("A member's proof is answered with the server's proof, bound to this session")
    func memberProofAnswered() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let context = try TLSContext(identity: pair.clientIdentity, role: .client)
            let identity = pair.clientIdentity
            let view = try await runRawSession(port: pair.listener.port, context: context) { exporter in
                (try? ChannelIdentityProof.make(role: .client, exporter: exporter, identity: identity).encoded) ?? []
            }
            let answer = try ChannelIdentityProof(decoding: view.received)
            let candidates = [pair.clientIdentity.publicKey, pair.serverIdentity.publicKey]
            #expect(answer.signer(among: candidates, role: .server, exporter: view.exporter) == pair.serverIdentity.publicKey)
            #expect(answer.signer(among: candidates, role: .client, exporter: view.exporter) == nil)
            #expect(!view.received.contains(subsequence: pair.serverIdentity.publicKey))
            let accepted = try await pair.listener.accept()
            #expect(accepted.peerIdentityKey == pair.clientIdentity.publicKey)
        }
    }

    @Test("An impostor with a valid handshake and a well-signed proof of a non-member key is refused, told nothing")
    func impostorRefused() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let impostor = try Ed25519PrivateKey()
            let context = try TLSContext(identity: impostor, role: .client)
            let view = try await runRawSession(port: pair.listener.port, context: context) { exporter in
                (try? ChannelIdentityProof.make(role: .client, exporter: exporter, identity: impostor).encoded) ?? []
            }
            #expect(view.received.isEmpty)
            #expect(await pair.failures.waitForCount(1) == [.peerNotRecognised])
            #expect(pair.listener.liveConnections == 0)
        }
    }

    @Test("A client dialling a stranger's listener shows it no identity: the stranger cannot name the key")
    func strangerServerLearnsNoClientIdentity() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let strangerFailures = FailureLog()
            let strangerListener = try TLSListener(identity: try Ed25519PrivateKey(), pins: { PinSet([]) }, host: "127.0.0.1", port: 0,
                                                   onHandshakeFailure: strangerFailures.record)
            defer { strangerListener.close() }
            await #expect(throws: TransportError.closed) {
                try await pair.connector.connect(host: "127.0.0.1", port: strangerListener.port, timeout: .seconds(5))
            }
            #expect(await strangerFailures.waitForCount(1) == [.peerNotRecognised])
        }
    }

    @Test("A member's proof bound to another session or to the server's label, or cut short, is refused and told nothing",
          arguments: ["replayed", "reflected", "truncated"])
    func unboundProofRefused(kind: String) async throws {
        try await withTimeLimit {
            let pair = try PinnedPair(configuration: TransportConfiguration(handshakeTimeout: .milliseconds(500)))
            defer { pair.listener.close() }
            let member = pair.clientIdentity
            let context = try TLSContext(identity: member, role: .client)
            let view = try await runRawSession(port: pair.listener.port, context: context) { exporter in
                let proof: ChannelIdentityProof? = switch kind {
                case "replayed": try? .make(role: .client, exporter: Array(repeating: 0x42, count: 32), identity: member)
                default: try? .make(role: .server, exporter: exporter, identity: member)
                }
                let bytes = proof?.encoded ?? []
                return kind == "truncated" ? Array(bytes.dropLast()) : bytes
            }
            #expect(view.received.isEmpty)
            let expected: TransportError = kind == "truncated" ? .handshakeTimedOut : .peerNotRecognised
            #expect(await pair.failures.waitForCount(1) == [expected])
            #expect(pair.listener.liveConnections == 0)
        }
    }
}
