// SPDX-License-Identifier: LGPL-2.1-or-later
/// Errors from BatonCrypto. Every failure caused by input is reported as one of these, never as a trap.
public enum CryptoError: Error, Equatable, Sendable {
    case invalidKeyLength
    case invalidNonceLength
    case invalidTagLength
    case authenticationFailed
    case invalidPublicKey
    case weakSharedSecret
    case invalidSignature
    /// libcrypto reported a failure that input validation could not prevent (for example, out of memory).
    case library(String)
}
