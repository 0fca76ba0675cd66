// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL

/// SHA-256 over bytes that arrive in pieces (a file read in blocks, a transfer in chunks), so a large
/// document is hashed without holding it in memory. Not shared between tasks: one owner feeds it.
public final class SHA256Stream {
    private let context: OpaquePointer
    private var finished = false

    public init() {
        guard let context = EVP_MD_CTX_new(), let digest = fetchedSHA256 else {
            requireLibrarySuccess(false, "EVP_MD_CTX_new")
            preconditionFailure("unreachable")
        }
        requireLibrarySuccess(EVP_DigestInit_ex2(context, digest.pointer, nil) == 1, "EVP_DigestInit_ex2(SHA256)")
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        precondition(!finished, "SHA256Stream used after finish")
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        requireLibrarySuccess(EVP_DigestUpdate(context, base, bytes.count) == 1, "EVP_DigestUpdate(SHA256)")
    }

    public func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The digest of everything fed so far; the stream cannot be fed afterwards.
    public func finish() -> [UInt8] {
        precondition(!finished, "SHA256Stream finished twice")
        finished = true
        return [UInt8](unsafeUninitializedCapacity: SHA256.byteCount) { output, initialized in
            var written: UInt32 = 0
            requireLibrarySuccess(EVP_DigestFinal_ex(context, output.baseAddress, &written) == 1 && written == 32, "EVP_DigestFinal_ex(SHA256)")
            initialized = SHA256.byteCount
        }
    }
}
