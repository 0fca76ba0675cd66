// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Dispatch

/// The identity proofs right after the TLS handshake, before any frame (§8.1). The client proves
/// first; the server finds the pinned key that made the proof and only then sends its own, so a peer
/// that is not a ring member never gets the server's proof. A proof is a bare signature: whoever does
/// not already hold the signer's identity key cannot tell whose it is. Both proofs sign the session's
/// exporter value, so a proof cannot be replayed on another connection or relayed by a man in the middle.
enum ChannelIdentityExchange {
    /// Runs this side's half of the exchange within `deadline`; returns the peer's pinned identity key.
    /// Any failure leaves the caller to close the connection without sending anything further.
    static func run(_ engine: TLSEngine, role: TLSContext.Role, identity: Ed25519PrivateKey,
                    pins: PinProvider, until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        let exporter = try engine.exportKeyingMaterial(
            label: ChannelIdentityProof.exporterLabel, count: ChannelIdentityProof.exporterByteCount)
        let mine: ChannelIdentityProof.Role = role == .client ? .client : .server
        let theirs: ChannelIdentityProof.Role = role == .client ? .server : .client
        let ownProof: [UInt8]
        do { ownProof = try ChannelIdentityProof.make(role: mine, exporter: exporter, identity: identity).encoded } catch {
            throw .library("identity proof: \(error)")
        }
        do {
            if role == .client { try await engine.send(ownProof, until: deadline) }
            let peerKey = try await receiveProof(engine, role: theirs, exporter: exporter, pins: pins, until: deadline)
            if role == .server { try await engine.send(ownProof, until: deadline) }
            return peerKey
        } catch .timedOut {
            throw .handshakeTimedOut
        }
    }

    /// Reads exactly one proof (nothing beyond it, so the first frame stays in the stream) and checks it.
    private static func receiveProof(_ engine: TLSEngine, role: ChannelIdentityProof.Role, exporter: [UInt8],
                                     pins: PinProvider, until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        var bytes: [UInt8] = []
        while bytes.count < ChannelIdentityProof.byteCount {
            let chunk = try await engine.receive(upTo: ChannelIdentityProof.byteCount - bytes.count, until: deadline)
            guard !chunk.isEmpty else { throw .closed }
            bytes += chunk
        }
        let proof: ChannelIdentityProof
        do { proof = try ChannelIdentityProof(decoding: bytes) } catch { throw .peerNotRecognised }
        guard let key = proof.signer(among: pins().keys, role: role, exporter: exporter) else { throw .peerNotRecognised }
        return key
    }
}

extension TLSContext {
    /// Runs this side's handshake and identity exchange over `transport` within `deadline` and wraps
    /// the session in a channel. Takes ownership of `transport`; `counter` counts the attempt.
    func secure(_ transport: any ByteTransport, pins: @escaping PinProvider, until deadline: DispatchTime,
                configuration: TransportConfiguration, counter: HandshakeCounter? = nil,
                onClose: @escaping @Sendable () -> Void = {}) async throws(TransportError) -> SecureChannel {
        counter?.increment()
        let engine = try TLSEngine(context: self, transport: transport, onClose: onClose)
        do {
            try await engine.handshake(until: deadline)
            let key = try await ChannelIdentityExchange.run(engine, role: role, identity: identity, pins: pins, until: deadline)
            return SecureChannel(session: engine, peerIdentityKey: key, configuration: configuration)
        } catch {
            engine.close()
            throw error
        }
    }
}
