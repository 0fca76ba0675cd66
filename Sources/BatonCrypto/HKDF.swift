// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL

/// HKDF with SHA-256 (RFC 5869), computed by libcrypto's HKDF through the EVP_PKEY interface.
public enum HKDF {
    /// RFC 5869 limits output to 255 hash lengths.
    public static let maximumOutputCount = 255 * SHA256.byteCount

    /// HKDF-Extract: a 32-byte pseudorandom key from input keying material. An empty salt means 32 zero bytes.
    public static func extract(salt: [UInt8], ikm: [UInt8]) -> [UInt8] {
        let result = Result { try derive(mode: EVP_PKEY_HKDEF_MODE_EXTRACT_ONLY, key: ikm, salt: salt, info: nil, count: SHA256.byteCount) }
        switch result {
        case .success(let prk):
            return prk
        case .failure:
            requireLibrarySuccess(false, "HKDF-Extract")
            return []
        }
    }

    /// HKDF-Expand: `count` bytes (1...8160) from a pseudorandom key of at least 32 bytes.
    public static func expand(prk: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        guard prk.count >= SHA256.byteCount, (1...maximumOutputCount).contains(count) else {
            throw CryptoError.invalidKeyLength
        }
        return try derive(mode: EVP_PKEY_HKDEF_MODE_EXPAND_ONLY, key: prk, salt: nil, info: info, count: count)
    }

    /// Extract then expand: `count` bytes (1...8160) of key material.
    public static func deriveKey(ikm: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        guard (1...maximumOutputCount).contains(count) else { throw CryptoError.invalidKeyLength }
        return try derive(mode: EVP_PKEY_HKDEF_MODE_EXTRACT_AND_EXPAND, key: ikm, salt: salt, info: info, count: count)
    }

    private static func derive(mode: Int32, key: [UInt8], salt: [UInt8]?, info: [UInt8]?, count: Int) throws -> [UInt8] {
        guard let digest = fetchedSHA256, let context = EVP_PKEY_CTX_new_from_name(nil, "HKDF", nil) else {
            throw takeLibraryError("HKDF setup")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1,
              EVP_PKEY_CTX_set_hkdf_mode(context, mode) == 1,
              EVP_PKEY_CTX_set_hkdf_md(context, digest.pointer) == 1,
              try withCBytes(key, { EVP_PKEY_CTX_set1_hkdf_key(context, $0, try cLength($1)) }) == 1
        else { throw takeLibraryError("HKDF parameters") }
        if let salt {
            guard try withCBytes(salt, { EVP_PKEY_CTX_set1_hkdf_salt(context, $0, try cLength($1)) }) == 1 else {
                throw takeLibraryError("HKDF salt")
            }
        }
        if let info, !info.isEmpty {
            guard try withCBytes(info, { EVP_PKEY_CTX_add1_hkdf_info(context, $0, try cLength($1)) }) == 1 else {
                throw takeLibraryError("HKDF info")
            }
        }
        var output = [UInt8](repeating: 0, count: count)
        var written = count
        guard EVP_PKEY_derive(context, &output, &written) == 1, written == count else {
            throw takeLibraryError("HKDF derive")
        }
        return output
    }
}
