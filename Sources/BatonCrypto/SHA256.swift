// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL

/// SHA-256 (FIPS 180-4).
public enum SHA256 {
    public static let byteCount = 32

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }

    public static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        guard let digest = fetchedSHA256 else {
            requireLibrarySuccess(false, "EVP_MD_fetch(SHA256)")
            return []
        }
        return [UInt8](unsafeUninitializedCapacity: byteCount) { output, initialized in
            var written: UInt32 = 0
            let status = withCBytes(bytes) { input, count in
                EVP_Digest(input, count, output.baseAddress, &written, digest.pointer, nil)
            }
            requireLibrarySuccess(status == 1 && written == UInt32(byteCount), "EVP_Digest(SHA256)")
            initialized = byteCount
        }
    }
}
