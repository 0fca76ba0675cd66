// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL

/// An X25519 private key (RFC 7748) for Diffie-Hellman key agreement.
public struct X25519PrivateKey: Sendable {
    public static let byteCount = 32

    /// The 32 scalar bytes as given; clamping happens inside each scalar multiplication.
    public let rawRepresentation: [UInt8]
    /// The 32-byte public key (u-coordinate).
    public let publicKey: [UInt8]
    private let key: OwnedPKey

    /// - Throws: `CryptoError.invalidKeyLength` unless `rawRepresentation` has 32 bytes.
    public init(rawRepresentation: [UInt8]) throws {
        guard rawRepresentation.count == Self.byteCount else { throw CryptoError.invalidKeyLength }
        guard let key = OwnedPKey.makePrivate(algorithm: "X25519", raw: rawRepresentation),
              let publicKey = key.rawPublicKey()
        else { throw takeLibraryError("X25519 key import") }
        self.rawRepresentation = rawRepresentation
        self.publicKey = publicKey
        self.key = key
    }

    /// A fresh random key.
    public init(using random: some RandomSource = SystemRandom()) throws {
        try self.init(rawRepresentation: random.bytes(Self.byteCount))
    }

    /// The 32-byte shared secret with the peer. Hash it (e.g. HKDF) before use as a key.
    /// - Throws: `CryptoError.invalidPublicKey` unless the peer key has 32 bytes; `CryptoError.weakSharedSecret`
    ///   when the result is all zero, which happens for low-order peer points (RFC 7748 section 6.1).
    public func sharedSecret(with peerPublicKey: [UInt8]) throws -> [UInt8] {
        guard peerPublicKey.count == Self.byteCount else { throw CryptoError.invalidPublicKey }
        guard let peer = OwnedPKey.makePublic(algorithm: "X25519", raw: peerPublicKey) else {
            throw takeLibraryError("X25519 peer key import")
        }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
            throw takeLibraryError("X25519 context")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer.pointer) == 1 else {
            throw takeLibraryError("X25519 setup")
        }
        var secret = [UInt8](repeating: 0, count: Self.byteCount)
        var length = secret.count
        // With valid 32-byte inputs libcrypto's X25519 derivation fails only when the result is all zero.
        guard EVP_PKEY_derive(context, &secret, &length) == 1 else {
            ERR_clear_error()
            throw CryptoError.weakSharedSecret
        }
        guard length == Self.byteCount else { throw CryptoError.library("X25519 secret length \(length)") }
        if constantTimeEquals(secret, [UInt8](repeating: 0, count: Self.byteCount)) {
            throw CryptoError.weakSharedSecret
        }
        return secret
    }
}
