// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonDBus

/// Why a ring, pairing or continuation request was refused. The actors throw these; the D-Bus
/// glue maps them to org.baton.Error.* names here, in one place.
public enum ServiceFailure: Error, Sendable, Equatable {
    case invalidArguments(String)
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

extension DBusError {
    init(_ failure: ServiceFailure) {
        let name: BatonErrorName = switch failure {
        case .invalidArguments: .invalidArguments
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
        self.init(name: name, message: String(failure.message.prefix(ServiceFailure.maxMessageCharacters)))
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
