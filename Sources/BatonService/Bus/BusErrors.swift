// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonDBus

/// Why a request was refused. The actors throw these (the activity registry's `RegistryError`
/// becomes one); the D-Bus glue maps them to org.baton.Error.* names (BatonAPI's `BatonErrorName`)
/// here, in one table: `errorName`.
public enum ServiceFailure: Error, Sendable, Equatable {
    case invalidArguments(String)
    /// A value over its size limit (userInfo, title, a document's media type...).
    case payloadTooLarge(String)
    case notPermitted(String)
    case notReady(String)
    case failed(String)
    case unknownObject(String)
    case unknownDevice(String)
    case unknownActivity(String)
    case limitExceeded(String)
    /// A continued document's edit session was not released (§6.6); the message starts with a category.
    case editSessionBusy(String)
    /// A continued document changed on both machines (§6.6): refused, this copy kept.
    case documentConflict(String)
}

extension ServiceFailure {
    /// The daemon's one table of failures to documented error names.
    var errorName: BatonErrorName {
        switch self {
        case .invalidArguments: .invalidArguments
        case .payloadTooLarge: .payloadTooLarge
        case .notPermitted: .notPermitted
        case .notReady: .notReady
        case .failed: .failed
        case .unknownObject: .unknownObject
        case .unknownDevice: .unknownDevice
        case .unknownActivity: .unknownActivity
        case .limitExceeded: .limitExceeded
        case .editSessionBusy: .editSessionBusy
        case .documentConflict: .documentConflict
        }
    }

    /// A registry refusal (the registry names fields, never the caller's text).
    init(_ error: RegistryError) {
        self = switch error {
        case .invalidArguments(let message): .invalidArguments(message)
        case .payloadTooLarge(let message): .payloadTooLarge(message)
        case .unknownActivity: .unknownActivity("no such activity")
        case .notPermitted: .notPermitted("the activity belongs to another user")
        case .limitExceeded(let message): .limitExceeded(message)
        }
    }
}

extension DBusError {
    init(_ failure: ServiceFailure) {
        self.init(name: failure.errorName, message: String(failure.message.prefix(ServiceFailure.maxMessageCharacters)))
    }

    /// A registry refusal, through the same table (its messages are the registry's own, whole).
    init(_ error: RegistryError) {
        let failure = ServiceFailure(error)
        self.init(name: failure.errorName, message: failure.message)
    }
}

/// Runs a typed actor call for a D-Bus method, turning its `ServiceFailure` into the D-Bus error.
func mappingFailures<T>(_ body: () async throws(ServiceFailure) -> T) async throws(DBusError) -> T {
    do { return try await body() } catch { throw DBusError(error) }
}

extension ServiceFailure {
    /// A continuation that did not complete: the category's D-Bus error with "category: detail"
    /// as the message (docs/dbus-api.md, "Continuation failures").
    static func continuation(_ category: ContinuationFailure, _ detail: String = "") -> ServiceFailure {
        let message = category.message(detail)
        return switch category.errorName {
        case .unknownActivity: .unknownActivity(message)
        case .notReady: .notReady(message)
        default: .failed(message)
        }
    }

    /// The continuation category this failure carries, if any.
    var continuationFailure: ContinuationFailure? { ContinuationFailure(errorMessage: message) }
}
