// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL
import Synchronization

/// An AES key (128 or 256 bits) for AES-GCM.
///
/// Holds one libcrypto cipher context per direction with the key schedule already computed, so each message only
/// sets its nonce. The contexts are guarded by mutexes; a caller that finds one busy uses a temporary context
/// rather than waiting, so concurrent use is correct, just slower.
public struct AESGCMKey: Sendable {
    fileprivate let state: State

    /// - Throws: `CryptoError.invalidKeyLength` unless `bytes` has 16 or 32 bytes.
    public init(_ bytes: [UInt8]) throws {
        let cipher: FetchedAlgorithm?
        switch bytes.count {
        case 16: cipher = fetchedAES128GCM
        case 32: cipher = fetchedAES256GCM
        default: throw CryptoError.invalidKeyLength
        }
        guard let cipher else { throw takeLibraryError("AES-GCM unavailable in libcrypto") }
        state = State(key: bytes, cipher: cipher)
    }

    /// Key length in bytes (16 or 32).
    public var byteCount: Int { state.key.count }

    fileprivate final class State: Sendable {
        let key: [UInt8]
        let cipher: FetchedAlgorithm
        /// Created on first use: many keys only ever seal or only ever open.
        let sealContext = Mutex<LockedContext?>(nil)
        let openContext = Mutex<LockedContext?>(nil)

        init(key: [UInt8], cipher: FetchedAlgorithm) {
            self.key = key
            self.cipher = cipher
        }

        deinit {
            sealContext.withLock { context in
                if let context { EVP_CIPHER_CTX_free(context.pointer) }
            }
            openContext.withLock { context in
                if let context { EVP_CIPHER_CTX_free(context.pointer) }
            }
        }

        /// A new cipher context with this key scheduled, for encryption or decryption.
        func makeContext(encrypting: Bool) throws -> OpaquePointer {
            guard let context = EVP_CIPHER_CTX_new() else { throw takeLibraryError("EVP_CIPHER_CTX_new") }
            let status = key.withUnsafeBufferPointer { key in
                encrypting
                    ? EVP_EncryptInit_ex2(context, cipher.pointer, key.baseAddress, nil, nil)
                    : EVP_DecryptInit_ex2(context, cipher.pointer, key.baseAddress, nil, nil)
            }
            guard status == 1 else {
                EVP_CIPHER_CTX_free(context)
                throw takeLibraryError("AES-GCM key setup")
            }
            return context
        }

        /// Runs `body` with this key's cached context for the direction, or with a temporary one when it is busy.
        func withContext<Result: Sendable>(encrypting: Bool, _ body: (OpaquePointer) throws -> Result) throws -> Result {
            let cachedResult = encrypting
                ? try withCachedContext(sealContext, encrypting: true, body)
                : try withCachedContext(openContext, encrypting: false, body)
            if let cachedResult {
                return cachedResult
            }
            let temporary = try makeContext(encrypting: encrypting)
            defer { EVP_CIPHER_CTX_free(temporary) }
            return try body(temporary)
        }

        /// Nil when another thread holds the cached context.
        private func withCachedContext<Result: Sendable>(
            _ cache: borrowing Mutex<LockedContext?>, encrypting: Bool, _ body: (OpaquePointer) throws -> Result
        ) throws -> Result? {
            try cache.withLockIfAvailable { context in
                if context == nil {
                    context = LockedContext(pointer: try makeContext(encrypting: encrypting))
                }
                guard let ready = context else { throw CryptoError.library("AES-GCM context missing") }
                return try body(ready.pointer)
            }
        }
    }
}

/// AES in Galois/Counter Mode (NIST SP 800-38D) with 96-bit nonces and tags of 8 to 16 bytes.
public enum AESGCM {
    public static let nonceByteCount = 12
    /// SP 800-38D allows tags of 12 to 16 bytes, and 8 bytes for short messages under strict limits.
    public static let allowedTagLengths = 8...16

    /// Encrypts and authenticates `plaintext`, and authenticates `aad`.
    /// A nonce must never repeat under one key.
    public static func seal(
        key: AESGCMKey, nonce: [UInt8], plaintext: [UInt8], aad: [UInt8], tagLength: Int = 16
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        try nonce.withUnsafeBytes { nonce in
            try plaintext.withUnsafeBytes { plaintext in
                try aad.withUnsafeBytes { aad in
                    try seal(key: key, nonce: nonce, plaintext: plaintext, aad: aad, tagLength: tagLength)
                }
            }
        }
    }

    public static func seal(
        key: AESGCMKey, nonce: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer,
        aad: UnsafeRawBufferPointer, tagLength: Int = 16
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        guard nonce.count == nonceByteCount else { throw CryptoError.invalidNonceLength }
        guard allowedTagLengths.contains(tagLength) else { throw CryptoError.invalidTagLength }
        let plaintextLength = try cLength(plaintext.count)
        let aadLength = try cLength(aad.count)

        return try key.state.withContext(encrypting: true) { context in
            guard EVP_EncryptInit_ex2(context, nil, nil, nonce.baseAddress?.assumingMemoryBound(to: UInt8.self), nil) == 1
            else { throw takeLibraryError("AES-GCM nonce") }
            var written: Int32 = 0
            if aadLength > 0 {
                guard EVP_EncryptUpdate(context, nil, &written, aad.baseAddress?.assumingMemoryBound(to: UInt8.self), aadLength) == 1
                else { throw takeLibraryError("AES-GCM AAD") }
            }
            let ciphertext = try [UInt8](unsafeUninitializedCapacity: plaintext.count) { output, initialized in
                if plaintextLength > 0 {
                    guard EVP_EncryptUpdate(
                        context, output.baseAddress, &written,
                        plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), plaintextLength
                    ) == 1, written == plaintextLength
                    else { throw takeLibraryError("AES-GCM encrypt") }
                }
                // GCM is a stream mode: finishing writes no bytes, but libcrypto wants a buffer.
                var finalBlock: (UInt64, UInt64) = (0, 0)
                let finished = withUnsafeMutableBytes(of: &finalBlock) { finalBytes in
                    EVP_EncryptFinal_ex(context, finalBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), &written) == 1
                }
                guard finished, written == 0 else { throw takeLibraryError("AES-GCM finish") }
                initialized = plaintext.count
            }
            var tag = [UInt8](repeating: 0, count: tagLength)
            guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), &tag) == 1
            else { throw takeLibraryError("AES-GCM tag") }
            return (ciphertext, tag)
        }
    }

    /// Verifies `tag` over `aad` and `ciphertext` and returns the plaintext.
    /// - Throws: `CryptoError.authenticationFailed` when anything was altered or the key or nonce is wrong.
    public static func open(
        key: AESGCMKey, nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8], aad: [UInt8]
    ) throws -> [UInt8] {
        try nonce.withUnsafeBytes { nonce in
            try ciphertext.withUnsafeBytes { ciphertext in
                try tag.withUnsafeBytes { tag in
                    try aad.withUnsafeBytes { aad in
                        try open(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: aad)
                    }
                }
            }
        }
    }

    /// As `open` over arrays, for callers holding slices of a received packet (no copies).
    public static func open(
        key: AESGCMKey, nonce: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer,
        tag: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer
    ) throws -> [UInt8] {
        guard nonce.count == nonceByteCount else { throw CryptoError.invalidNonceLength }
        guard allowedTagLengths.contains(tag.count), let tagBytes = tag.baseAddress else {
            throw CryptoError.invalidTagLength
        }
        let ciphertextLength = try cLength(ciphertext.count)
        let aadLength = try cLength(aad.count)

        return try key.state.withContext(encrypting: false) { context in
            guard EVP_DecryptInit_ex2(context, nil, nil, nonce.baseAddress?.assumingMemoryBound(to: UInt8.self), nil) == 1,
                  EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tag.count), UnsafeMutableRawPointer(mutating: tagBytes)) == 1
            else { throw takeLibraryError("AES-GCM nonce or tag") }
            var written: Int32 = 0
            if aadLength > 0 {
                guard EVP_DecryptUpdate(context, nil, &written, aad.baseAddress?.assumingMemoryBound(to: UInt8.self), aadLength) == 1
                else { throw takeLibraryError("AES-GCM AAD") }
            }
            return try [UInt8](unsafeUninitializedCapacity: ciphertext.count) { output, initialized in
                if ciphertextLength > 0 {
                    guard EVP_DecryptUpdate(
                        context, output.baseAddress, &written,
                        ciphertext.baseAddress?.assumingMemoryBound(to: UInt8.self), ciphertextLength
                    ) == 1, written == ciphertextLength
                    else { throw takeLibraryError("AES-GCM decrypt") }
                }
                // libcrypto compares the tag (in constant time) here.
                var finalBlock: (UInt64, UInt64) = (0, 0)
                let verified = withUnsafeMutableBytes(of: &finalBlock) { finalBytes in
                    EVP_DecryptFinal_ex(context, finalBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), &written) == 1
                }
                guard verified else {
                    // Unauthenticated plaintext must not linger in freed memory.
                    if let base = output.baseAddress { OPENSSL_cleanse(base, output.count) }
                    ERR_clear_error()
                    throw CryptoError.authenticationFailed
                }
                initialized = ciphertext.count
            }
        }
    }
}
