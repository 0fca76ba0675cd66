// SPDX-License-Identifier: LGPL-2.1-or-later
/// Every way untrusted bytes can be wrong. Decoders throw these; none of them traps.
/// Names match docs/protocol.md.
public enum WireError: Error, Equatable, Hashable, Sendable {
    case truncated
    case trailingBytes
    case malformed(String)
    case unsupportedVersion(UInt8)
    case unknownKind(UInt8)
    case unknownType(UInt8)
    case payloadTooLarge(limit: Int, actual: Int)
    case tooDeep(limit: Int)
    /// Advert matching outcomes that are rejections.
    case notRingMember
    case authenticationFailed
    case staleEpoch
    case replayedSequence
    case conflictingSequence
    case staleRevision
    /// Pairing.
    case commitMismatch
    case weakKey
    case badSignature
    case rejected
    case timedOut
    case unexpectedMessage(String)
    case sequenceExhausted
    /// Pairing with a device this ring removed (§7.4): refused before any roster is sent.
    case peerRemoved
}
