// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonDBus
import BatonStore

extension DBusError {
    /// An activity call's refusal as its org.baton.Error.* name and words.
    init(_ failure: ActivityFailure) {
        switch failure {
        case .registry(let error): self.init(error)
        case .service(let failure): self.init(failure)
        case .alreadyExists(let message): self = .baton(BatonErrorName.alreadyExists, message)
        case .snapshot(let error): self = ActivityBus.busError(error)
        case .editSession(let failure): self = ActivityBus.busError(failure)
        case .failed(let message): self = .failed(message)
        }
    }
}

/// Runs a typed activities call for a D-Bus method, its `ActivityFailure` as the D-Bus error.
func mappingActivityFailures<T>(_ body: () async throws(ActivityFailure) -> T) async throws(DBusError) -> T {
    do { return try await body() } catch { throw DBusError(error) }
}

extension ActivityBus {
    static func busError(_ error: SnapshotError) -> DBusError {
        switch error {
        case .payloadTooLarge(let limit, let actual):
            .payloadTooLarge("the document is \(actual) bytes or more, the limit left is \(limit)")
        case .diskFull: .baton(BatonErrorName.diskFull, "no space left for the snapshot; the previous one is kept")
        case .notARegularFile: .invalidArguments("the snapshot must be a regular file")
        case .notReadable: .invalidArguments("the snapshot must be a descriptor opened for reading")
        case .digestMismatch, .invalidName: .failed("snapshot refused")
        case .io(let operation, let code): .failed("snapshot \(operation) failed (errno \(code))")
        case .pullInProgress: .failed("another transfer of this document is running")
        }
    }

    static func busError(_ failure: EditSessionFailure) -> DBusError {
        switch failure {
        case .session(.notOwner): .baton(BatonErrorName.editSessionNotOwned, "another machine owns this document's edit session")
        case .session(.conflict): .baton(BatonErrorName.documentConflict, "the document changed on both machines; this copy is kept")
        case .session(.tooManyDocuments(let limit)): .baton(BatonErrorName.limitExceeded, "at most \(limit) of your documents in use have edit sessions")
        case .tooManyClaims(let limit): .baton(BatonErrorName.limitExceeded, "at most \(limit) claims are pending")
        case .refused(.sessionBusy), .claimPendingElsewhere: .baton(BatonErrorName.editSessionBusy, "the edit session was not released")
        case .refused(.documentConflict): .baton(BatonErrorName.documentConflict, "the document changed on both machines; this copy is kept")
        case .store(let error):
            if case .io(_, _, let code) = error, code == ENOSPC || code == EDQUOT { .baton(BatonErrorName.diskFull, "no space left to record the edit session; nothing changed") }
            else { .failed("the edit session could not be recorded; nothing changed") }
        default: .failed("edit session: \(failure)")
        }
    }
}
