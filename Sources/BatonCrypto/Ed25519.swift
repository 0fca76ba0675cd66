// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL

/// An Ed25519 signing key (RFC 8032), PureEdDSA.
public struct Ed25519PrivateKey: Sendable {
    /// The 32-byte private key seed.
    public let seed: [UInt8]
    /// The 32-byte public key.
    public let publicKey: [UInt8]
    private let key: OwnedPKey

    /// - Throws: `CryptoError.invalidKeyLength` unless `seed` has 32 bytes.
    public init(seed: [UInt8]) throws {
        guard seed.count == Ed25519.seedByteCount else { throw CryptoError.invalidKeyLength }
        guard let key = OwnedPKey.makePrivate(algorithm: "ED25519", raw: seed),
              let publicKey = key.rawPublicKey()
        else { throw takeLibraryError("Ed25519 key import") }
        self.seed = seed
        self.publicKey = publicKey
        self.key = key
    }

    /// A fresh random key.
    public init(using random: some RandomSource = SystemRandom()) throws {
        try self.init(seed: random.bytes(Ed25519.seedByteCount))
    }

    /// The 64-byte signature of `message` (deterministic).
    public func signature(for message: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw takeLibraryError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        // Ed25519 hashes internally, so no digest is named.
        guard EVP_DigestSignInit(context, nil, nil, nil, key.pointer) == 1 else {
            throw takeLibraryError("Ed25519 sign setup")
        }
        var signature = [UInt8](repeating: 0, count: Ed25519.signatureByteCount)
        var length = signature.count
        let status = withCBytes(message) { bytes, count in
            EVP_DigestSign(context, &signature, &length, bytes, count)
        }
        guard status == 1, length == Ed25519.signatureByteCount else { throw takeLibraryError("Ed25519 sign") }
        return signature
    }
}

public enum Ed25519 {
    public static let seedByteCount = 32
    public static let publicKeyByteCount = 32
    public static let signatureByteCount = 64

    /// True only for a valid signature. Any malformed input (wrong lengths, points off the curve,
    /// non-canonical encodings libcrypto rejects) gives false.
    public static func isValidSignature(_ signature: [UInt8], for message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == signatureByteCount, publicKey.count == publicKeyByteCount else { return false }
        guard let key = OwnedPKey.makePublic(algorithm: "ED25519", raw: publicKey),
              let context = EVP_MD_CTX_new()
        else {
            ERR_clear_error()
            return false
        }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key.pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        let status = withCBytes(message) { bytes, count in
            signature.withUnsafeBufferPointer { signature in
                EVP_DigestVerify(context, signature.baseAddress, signature.count, bytes, count)
            }
        }
        if status != 1 { ERR_clear_error() }
        return status == 1
    }
}
