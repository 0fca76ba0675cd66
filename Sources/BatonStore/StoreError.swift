// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every failure of the durable store, typed so the daemon can react to each one differently
/// (refuse to start, quarantine and re-pair, ask the user to fix permissions).
public enum StoreError: Error, Equatable, Sendable {
    /// Which version field of a record was too new for this build.
    public enum VersionKind: String, Sendable, Equatable {
        /// The container format (header layout) itself.
        case format
        /// The schema of the value stored in the body.
        case schema
    }

    /// A record, journal or status name that is not a plain, safe file name.
    case invalidName(String)
    /// A configuration value that cannot work (for example a journal capacity below 1).
    case invalidConfiguration(String)
    /// The state directory is not a directory, is not owned by us, or is group/world-writable.
    case insecureDirectory(path: String, reason: String)
    /// A state file is not owned by us, is a symbolic link, or has a mode looser than 0600.
    case insecureFile(file: String, reason: String)
    /// The operating system refused access (EACCES, EPERM, EROFS).
    case permissionDenied(file: String, operation: String, errno: Int32)
    /// The file exists but is not a valid record. It is left in place until `quarantine()`.
    case corrupt(file: String, reason: String)
    /// The file was written by a newer build; it is left in place and never overwritten.
    case unsupportedVersion(file: String, kind: VersionKind, found: UInt32, supported: UInt32)
    /// The value could not be encoded; nothing was written.
    case encodingFailed(file: String, reason: String)
    /// Any other operating-system failure.
    case io(file: String, operation: String, errno: Int32)
    /// Another process (another batond) holds the state directory's lock; `holder` is its pid when known.
    case directoryInUse(path: String, holder: Int32?)
    /// libcrypto could not compute a digest (should not happen with a working OpenSSL).
    case digestFailed
    /// The file is sealed with a state key (docs/security.md "Key storage at rest"), and this
    /// process was given none: started outside batond.service, or the credential is missing.
    case sealedWithoutKey(file: String)
    /// The file is sealed under another state key than the one this process was given (key
    /// identifiers in hex): the credential was replaced, or the state came from another machine.
    case sealedToOtherKey(file: String, sealedWith: String, given: String)

    /// Classifies an errno from `operation` on `file`.
    static func system(_ operation: String, file: String, errno code: Int32) -> StoreError {
        switch code {
        case EACCES, EPERM, EROFS:
            return .permissionDenied(file: file, operation: operation, errno: code)
        default:
            return .io(file: file, operation: operation, errno: code)
        }
    }
}

extension StoreError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .invalidName(let name):
            return "invalid state file name \"\(name)\""
        case .invalidConfiguration(let reason):
            return "invalid store configuration: \(reason)"
        case .insecureDirectory(let path, let reason):
            return "refusing state directory \(path): \(reason)"
        case .insecureFile(let file, let reason):
            return "refusing state file \(file): \(reason)"
        case .permissionDenied(let file, let operation, let code):
            return "permission denied: \(operation) \(file): \(StoreError.errnoText(code))"
        case .corrupt(let file, let reason):
            return "corrupt state file \(file): \(reason)"
        case .unsupportedVersion(let file, let kind, let found, let supported):
            return "state file \(file) has \(kind.rawValue) version \(found), this build supports up to \(supported)"
        case .encodingFailed(let file, let reason):
            return "cannot encode \(file): \(reason)"
        case .io(let file, let operation, let code):
            return "\(operation) \(file) failed: \(StoreError.errnoText(code))"
        case .directoryInUse(let path, let holder):
            let who = holder.map { "another batond (pid \($0))" } ?? "another batond"
            return "state directory \(path) is in use by \(who); give each instance its own --state-dir"
        case .digestFailed:
            return "SHA-256 from libcrypto failed"
        case .sealedWithoutKey(let file):
            return "the secrets in \(file) are sealed to this machine's credential key (systemd-creds), which batond "
                + "was not given: it was started outside batond.service, or the unit has no LoadCredentialEncrypted= "
                + "for \(StateSealingKey.credentialName), or the file /etc/credstore.encrypted/\(StateSealingKey.credentialName) "
                + "is gone; fix: start it with `systemctl start batond`, or restore that credential file from this "
                + "machine's backup (nothing was changed or replaced)"
        case .sealedToOtherKey(let file, let sealedWith, let given):
            return "the secrets in \(file) are sealed to a credential key (id \(sealedWith)) that is not the one batond "
                + "was given (id \(given)): /etc/credstore.encrypted/\(StateSealingKey.credentialName) was replaced, or "
                + "the state directory came from another machine or an older install; fix: put back the credential file "
                + "that sealed them (it opens only on the machine that made it), or move \(file) aside and pair this "
                + "machine again (nothing was changed or replaced)"
        }
    }

    private static func errnoText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return "\(String(cString: text)) (errno \(code))"
    }
}
