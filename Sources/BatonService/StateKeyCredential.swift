// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonStore
import BatonSystem

/// The state sealing key as systemd hands it over (docs/security.md "Key storage at rest"):
/// batond.service's `LoadCredentialEncrypted=baton.state-key:/etc/credstore.encrypted/baton.state-key`
/// makes the service manager decrypt the credential (host key, TPM2 where present) before batond
/// starts, outside its sandbox, into `$CREDENTIALS_DIRECTORY/baton.state-key`.
enum StateKeyCredential {
    /// What batond was given, and in words why it has no key when it has none (for the log).
    enum Outcome: Sendable {
        case key(StateSealingKey)
        case none(reason: String)
    }

    /// Reads the credential. No `$CREDENTIALS_DIRECTORY`, no file in it, or `missing` (the unit's
    /// SetCredential= default when the sealed file is missing) is no key; anything else
    /// that is not a Baton state key is an error (batond does not start rather than write plain).
    static func load(environment: [String: String]) throws(StoreError) -> Outcome {
        guard let directory = environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") else {
            return .none(reason: "not started by systemd with the credential \(StateSealingKey.credentialName)")
        }
        let path = directory + "/" + StateSealingKey.credentialName
        let file: FileDescriptor
        do throws(Errno) { file = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) } catch {
            if error.code == ENOENT { return .none(reason: "the unit passes no credential \(StateSealingKey.credentialName)") }
            throw .io(file: path, operation: "open", errno: error.code)
        }
        let bytes: [UInt8]
        do throws(Errno) { bytes = try file.readAll(upTo: 4097, chunkSize: 512) } catch {
            throw .io(file: path, operation: "read", errno: error.code)
        }
        guard bytes.count <= 4096 else {
            throw .invalidConfiguration("the credential \(path) is larger than a Baton state key")
        }
        guard let key = try StateSealingKey(credential: bytes) else {
            return .none(reason: "the credential \(StateSealingKey.credentialName) says \"missing\": /etc/credstore.encrypted/\(StateSealingKey.credentialName) is missing (baton-state-key.service creates it)")
        }
        return .key(key)
    }
}
