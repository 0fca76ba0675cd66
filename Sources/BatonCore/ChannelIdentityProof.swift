import BatonCrypto

/// The identity proof each side of a ring TLS channel sends inside the channel, right after the
/// handshake (§8.1): its Ed25519 identity key and a signature binding that key to this one TLS
/// session. The certificates are throw-away keys, so a stranger who completes the handshake sees
/// nothing stable; only a peer that proved membership first gets the server's identity.
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
    /// identity key (32) ‖ signature (64), with no header.
    public static let byteCount = Ed25519.publicKeyByteCount + Ed25519.signatureByteCount

    public let identityKey: [UInt8]
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
        return ChannelIdentityProof(identityKey: identity.publicKey, signature: signature)
    }

    private init(identityKey: [UInt8], signature: [UInt8]) {
        self.identityKey = identityKey
        self.signature = signature
    }

    /// Splits the 96 bytes; the signature is not checked here (see `isValid`).
    public init(decoding bytes: [UInt8]) throws(WireError) {
        guard bytes.count == Self.byteCount else { throw .malformed("channel proof length") }
        identityKey = Array(bytes[0..<Ed25519.publicKeyByteCount])
        signature = Array(bytes[Ed25519.publicKeyByteCount...])
    }

    public var encoded: [UInt8] { identityKey + signature }

    /// True when the signature is the identity key's over this role's signed bytes for `exporter`.
    public func isValid(role: Role, exporter: [UInt8]) -> Bool {
        exporter.count == Self.exporterByteCount
            && Ed25519.isValidSignature(signature, for: Self.signedBytes(role: role, exporter: exporter), publicKey: identityKey)
    }
}
