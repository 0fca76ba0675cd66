// SPDX-License-Identifier: LGPL-2.1-or-later
import COpenSSL

/// Compares two byte strings in time independent of their contents (CRYPTO_memcmp).
/// Lengths are not secret: different lengths return false at once.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    return withCBytes(a) { left, count in
        withCBytes(b) { right, _ in CRYPTO_memcmp(left, right, count) == 0 }
    }
}
