// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCrypto

/// The key a state directory's secret records are sealed under (docs/security.md "Key storage at
/// rest"): 32 random bytes that systemd hands batond as the credential `baton.state-key`, decrypted
/// by the service manager with `systemd-creds` (this machine's host key, and its TPM2 where one
/// is present) before batond starts.
public struct StateSealingKey: Sendable {
    /// How the credential holding the key is itself protected, as the tool that created it
    /// recorded in the credential (authenticated with it: the words are inside the sealed data).
    public enum Protection: String, Sendable, Hashable, CaseIterable {
        /// Sealed with the host key (/var/lib/systemd/credential.secret) only.
        case host
        /// Sealed with the TPM2 chip and the host key: neither alone opens it.
        case hostAndTPM2 = "host+tpm2"
        /// Sealed with the TPM2 chip only.
        case tpm2
    }

    public static let byteCount = 32
    /// The credential's name (LoadCredentialEncrypted=baton.state-key:…, $CREDENTIALS_DIRECTORY/baton.state-key).
    public static let credentialName = "baton.state-key"

    public let protection: Protection
    /// First 8 bytes of HMAC-SHA256(key, "baton state key id v1"): names the key in a sealed file
    /// without revealing it, so a file sealed under another key is told apart from a tampered one.
    public let identifier: [UInt8]
    let aead: AESGCMKey

    public init(bytes: [UInt8], protection: Protection) throws(StoreError) {
        guard bytes.count == Self.byteCount, let aead = try? AESGCMKey(bytes) else {
            throw .invalidConfiguration("a state sealing key has \(Self.byteCount) bytes, not \(bytes.count)")
        }
        self.aead = aead
        self.protection = protection
        identifier = Array(HMACSHA256.mac(key: bytes, message: Array("baton state key id v1".utf8)).prefix(8))
    }

    /// What batond.service's `SetCredential=baton.state-key:missing` passes when the sealed file
    /// is missing (systemd 252 refuses an empty value there).
    public static let missingCredential = "missing"

    /// Parses the credential's plain text: one line `baton-state-key 1 PROTECTION HEX64`, written by
    /// baton-state-key (dbus/baton-state-key). An empty credential or `missing` (the unit's
    /// SetCredential= default, used when the sealed file is missing) is no key: nil.
    public init?(credential bytes: [UInt8]) throws(StoreError) {
        guard !bytes.isEmpty, bytes != Array(Self.missingCredential.utf8), bytes != Array((Self.missingCredential + "\n").utf8) else { return nil }
        guard bytes.count <= 256, let text = String(validating: bytes, as: UTF8.self) else {
            throw .invalidConfiguration("the credential \(Self.credentialName) is not a Baton state key (not a short text)")
        }
        var line = Substring(text)
        if line.hasSuffix("\n") { line = line.dropLast() }
        let words = line.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count == 4, words[0] == "baton-state-key" else {
            throw .invalidConfiguration("the credential \(Self.credentialName) is not a Baton state key (expected \"baton-state-key 1 KIND HEX\")")
        }
        guard words[1] == "1" else {
            throw .invalidConfiguration("the credential \(Self.credentialName) has version \(words[1]), this build reads version 1")
        }
        guard let protection = Protection(rawValue: String(words[2])) else {
            throw .invalidConfiguration("the credential \(Self.credentialName) names an unknown protection \"\(words[2])\"")
        }
        guard words[3].utf8.count == 2 * Self.byteCount, let key = [UInt8](hex: String(words[3])) else {
            throw .invalidConfiguration("the credential \(Self.credentialName) does not hold \(Self.byteCount) bytes of hex")
        }
        try self.init(bytes: key, protection: protection)
    }

    /// The credential text for `bytes` (what baton-state-key writes; for tests and tools).
    public static func credentialText(bytes: [UInt8], protection: Protection) -> String {
        "baton-state-key 1 \(protection.rawValue) \(bytes.hexString)\n"
    }
}

/// The sealed container of a secret record: the plain `RecordFormat` bytes, encrypted and
/// authenticated with AES-256-GCM (libcrypto) under the state sealing key. Integers big-endian:
///
///     offset  size  field
///          0     8  magic "BATONSEA"
///          8     2  format version (this layout: 1)
///         10     2  reserved, must be 0
///         12     8  key identifier (StateSealingKey.identifier)
///         20    12  nonce (random, fresh for every write)
///         32     …  ciphertext of the RecordFormat bytes
///        end    16  GCM tag
///
/// The additional data is bytes 0..<32 followed by the record's name, so a sealed file renamed
/// over another record's name does not open.
enum SealedFormat {
    static let magic: [UInt8] = Array("BATONSEA".utf8)
    static let formatVersion: UInt16 = 1
    static let headerSize = 32
    static let tagSize = 16

    static func isSealed(_ bytes: [UInt8]) -> Bool {
        bytes.count >= magic.count && bytes[0..<magic.count].elementsEqual(magic)
    }

    static func seal(_ plain: [UInt8], name: String, key: StateSealingKey, nonce: [UInt8]) throws(StoreError) -> [UInt8] {
        var header = magic
        header.append(contentsOf: [UInt8(formatVersion >> 8), UInt8(formatVersion & 0xFF), 0, 0])
        header.append(contentsOf: key.identifier)
        header.append(contentsOf: nonce)
        let sealed: (ciphertext: [UInt8], tag: [UInt8])
        do {
            sealed = try AESGCM.seal(key: key.aead, nonce: nonce, plaintext: plain, aad: header + Array(name.utf8), tagLength: tagSize)
        } catch {
            throw .encodingFailed(file: name, reason: "AES-256-GCM from libcrypto failed: \(error)")
        }
        return header + sealed.ciphertext + sealed.tag
    }

    /// The plain RecordFormat bytes. Callers checked `isSealed`.
    static func open(_ bytes: [UInt8], name: String, file: String, key: StateSealingKey?) throws(StoreError) -> [UInt8] {
        guard bytes.count >= headerSize + tagSize else {
            throw .corrupt(file: file, reason: "truncated sealed file: \(bytes.count) bytes, at least \(headerSize + tagSize) needed")
        }
        let format = UInt32(bytes[8]) << 8 | UInt32(bytes[9])
        if format > UInt32(formatVersion) {
            throw .unsupportedVersion(file: file, kind: .format, found: format, supported: UInt32(formatVersion))
        }
        guard format == UInt32(formatVersion) else { throw .corrupt(file: file, reason: "sealed format version \(format) does not exist") }
        guard bytes[10] == 0, bytes[11] == 0 else { throw .corrupt(file: file, reason: "reserved header field is not zero") }
        guard let key else { throw .sealedWithoutKey(file: file) }
        let identifier = Array(bytes[12..<20])
        guard identifier == key.identifier else {
            throw .sealedToOtherKey(file: file, sealedWith: identifier.hexString, given: key.identifier.hexString)
        }
        let header = Array(bytes[0..<headerSize])
        do {
            return try AESGCM.open(key: key.aead, nonce: Array(bytes[20..<32]),
                                   ciphertext: Array(bytes[headerSize..<(bytes.count - tagSize)]),
                                   tag: Array(bytes[(bytes.count - tagSize)...]), aad: header + Array(name.utf8))
        } catch {
            throw .corrupt(file: file, reason: "the sealed contents do not authenticate under the state key (altered or truncated)")
        }
    }
}
