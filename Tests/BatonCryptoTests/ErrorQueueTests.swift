// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto
import COpenSSL
import Testing

/// libssl's SSL_get_error reads the same per-thread error queue, so stale entries left by a failed crypto call
/// would make later TLS calls on that thread misreport. Every failure path must leave the queue empty.
@Suite("libcrypto error queue hygiene")
struct ErrorQueueTests {
    @Test func failedOperationsLeaveNoQueuedErrors() throws {
        ERR_clear_error()
        let key = try AESGCMKey([UInt8](repeating: 1, count: 16))
        let nonce = [UInt8](repeating: 0, count: 12)
        let sealed = try AESGCM.seal(key: key, nonce: nonce, plaintext: [1, 2, 3], aad: [])
        _ = try? AESGCM.open(key: key, nonce: nonce, ciphertext: sealed.ciphertext, tag: [UInt8](repeating: 0, count: 16), aad: [])
        #expect(ERR_peek_error() == 0)

        let x25519 = try X25519PrivateKey(rawRepresentation: [UInt8](repeating: 0x40, count: 32))
        _ = try? x25519.sharedSecret(with: [UInt8](repeating: 0, count: 32))
        #expect(ERR_peek_error() == 0)

        _ = Ed25519.isValidSignature([UInt8](repeating: 0xff, count: 64), for: [1], publicKey: [UInt8](repeating: 0xff, count: 32))
        _ = Ed25519.isValidSignature([UInt8](repeating: 0, count: 64), for: [1], publicKey: x25519.publicKey)
        #expect(ERR_peek_error() == 0)
    }
}
