// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// The identity proof each side of a ring TLS channel sends inside the channel, right after the
/// handshake (§8.1): an Ed25519 signature by its identity key that binds it to this one TLS session.
/// The key itself is never sent: the receiver finds it by trying the identity keys it pins. So the
/// certificates (throw-away keys) and the proofs show a stranger nothing stable, whichever side it is on.
public struct ChannelIdentityProof: Equatable, Sendable {
    public enum Role: Sendable {
        /// The side that opened the connection; it sends its proof first.
        case client
        /// The side that accepted it; it answers only a client proof from a pinned member.
        case server

        var label: String {
            switch self {
            case .client: "baton/v1 channel client"
            case .server: "baton/v1 channel server"
            }
        }
    }

    /// The TLS exporter label (RFC 8446 §7.5) whose value the proofs sign.
    public static let exporterLabel = "EXPORTER-baton/v1 channel"
    /// Bytes taken from the exporter.
    public static let exporterByteCount = 32
    /// The signature alone, with no header.
    public static let byteCount = Ed25519.signatureByteCount

    public let signature: [UInt8]

    /// `"baton/v1 channel client"` or `"baton/v1 channel server"` ‖ exporter value: the role label
    /// keeps a client's proof from being reflected back as the server's.
    public static func signedBytes(role: Role, exporter: [UInt8]) -> [UInt8] {
        role.label.utf8Bytes + exporter
    }

    /// This side's proof for a session whose exporter value is `exporter`.
    public static func make(role: Role, exporter: [UInt8], identity: Ed25519PrivateKey) throws(WireError) -> ChannelIdentityProof {
        guard exporter.count == exporterByteCount,
              let signature = try? identity.signature(for: signedBytes(role: role, exporter: exporter))
        else { throw .badSignature }
        return ChannelIdentityProof(signature: signature)
    }

    private init(signature: [UInt8]) {
        self.signature = signature
    }

    /// Takes the 64 bytes as they came; the signature is checked by `signer(among:)`.
    public init(decoding bytes: [UInt8]) throws(WireError) {
        guard bytes.count == Self.byteCount else { throw .malformed("channel proof length") }
        signature = bytes
    }

    public var encoded: [UInt8] { signature }

    /// The one key among `candidates` whose signature this is for `role` and `exporter`; nil when none
    /// (a stranger, a removed member, or a proof made for another session or role).
    public func signer<Keys: Sequence>(among candidates: Keys, role: Role, exporter: [UInt8]) -> [UInt8]?
    where Keys.Element == [UInt8] {
        guard exporter.count == Self.exporterByteCount else { return nil }
        let message = Self.signedBytes(role: role, exporter: exporter)
        return candidates.first { Ed25519.isValidSignature(signature, for: message, publicKey: $0) }
    }
}
