// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL

// Internal glue to libcrypto: fetched algorithms, error-queue handling, pointer helpers.

/// A fetched libcrypto algorithm (EVP_CIPHER, EVP_MD, ...).
/// Fetched algorithm objects are immutable and documented as safe to share between threads (openssl-threads(7)).
struct FetchedAlgorithm: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A mutable libcrypto context (EVP_CIPHER_CTX, EVP_MAC_CTX) owned by a key and only touched while its
/// owner's mutex is held. Marked Sendable so the mutex can hand it out; the mutex provides the exclusion.
struct LockedContext: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Fetched once per process: EVP_*_fetch takes locks and searches providers, too slow for per-message use.
let fetchedAES128GCM: FetchedAlgorithm? = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil).map(FetchedAlgorithm.init)
let fetchedAES256GCM: FetchedAlgorithm? = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil).map(FetchedAlgorithm.init)
let fetchedSHA256: FetchedAlgorithm? = EVP_MD_fetch(nil, "SHA256", nil).map(FetchedAlgorithm.init)
let fetchedHMAC: FetchedAlgorithm? = EVP_MAC_fetch(nil, "HMAC", nil).map(FetchedAlgorithm.init)

/// Takes the oldest error off this thread's libcrypto error queue as text and empties the queue.
/// The queue is per thread and shared with libssl, whose SSL_get_error misreports when stale entries remain,
/// so every failure path clears it.
func takeLibraryError(_ context: String) -> CryptoError {
    let code = ERR_get_error()
    ERR_clear_error()
    guard code != 0 else { return .library(context) }
    var text = [CChar](repeating: 0, count: 256)
    ERR_error_string_n(code, &text, text.count)
    let message = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return .library("\(context): \(message)")
}

/// For the few non-throwing operations (hash, MAC, HKDF-Extract) libcrypto can only fail when it cannot
/// allocate memory; like any Swift allocation failure, that ends the process.
func requireLibrarySuccess(_ succeeded: Bool, _ operation: StaticString) {
    if !succeeded {
        let error = takeLibraryError("\(operation)")
        preconditionFailure("libcrypto failed in \(operation) (out of memory?): \(error)")
    }
}

/// Calls `body` with a non-null pointer to the bytes: libcrypto rejects some NULL inputs even when the length is 0,
/// and Swift gives empty buffers a nil base address.
@inline(__always)
func withCBytes<Result>(
    _ buffer: UnsafeRawBufferPointer,
    _ body: (UnsafePointer<UInt8>, Int) throws -> Result
) rethrows -> Result {
    if let base = buffer.baseAddress {
        return try body(base.assumingMemoryBound(to: UInt8.self), buffer.count)
    }
    var placeholder: UInt8 = 0
    return try withUnsafePointer(to: &placeholder) { try body($0, 0) }
}

@inline(__always)
func withCBytes<Result>(
    _ bytes: [UInt8],
    _ body: (UnsafePointer<UInt8>, Int) throws -> Result
) rethrows -> Result {
    try bytes.withUnsafeBytes { try withCBytes($0, body) }
}

/// libcrypto's update functions take `int` lengths.
@inline(__always)
func cLength(_ count: Int) throws -> Int32 {
    guard let length = Int32(exactly: count) else { throw CryptoError.library("input longer than libcrypto accepts") }
    return length
}

/// Owns an EVP_PKEY. libcrypto allows concurrent read-only use of one EVP_PKEY from several threads, each with its
/// own EVP_PKEY_CTX or EVP_MD_CTX (openssl-threads(7)); nothing here modifies the key after creation.
final class OwnedPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    /// A private key from its 32 raw bytes, for "X25519" or "ED25519".
    static func makePrivate(algorithm: String, raw: [UInt8]) -> OwnedPKey? {
        raw.withUnsafeBufferPointer { raw in
            EVP_PKEY_new_raw_private_key_ex(nil, algorithm, nil, raw.baseAddress, raw.count).map(OwnedPKey.init)
        }
    }

    static func makePublic(algorithm: String, raw: [UInt8]) -> OwnedPKey? {
        raw.withUnsafeBufferPointer { raw in
            EVP_PKEY_new_raw_public_key_ex(nil, algorithm, nil, raw.baseAddress, raw.count).map(OwnedPKey.init)
        }
    }

    /// The 32-byte raw public key, or nil if libcrypto fails.
    func rawPublicKey() -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 32)
        var length = bytes.count
        guard EVP_PKEY_get_raw_public_key(pointer, &bytes, &length) == 1, length == 32 else { return nil }
        return bytes
    }
}
