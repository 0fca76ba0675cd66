// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonAPI
import BatonDBus

/// A failure reported by the daemon (an `org.baton.Error.*` name), by the bus (an
/// `org.freedesktop.DBus.Error.*` name, e.g. when no daemon owns the bus name), or by this library
/// when the daemon's reply has an unexpected shape (`org.baton.Error.Failed`).
public struct BatonClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The documented org.baton error names (one table, in BatonAPI).
    public typealias Code = BatonErrorName
    /// The continuation failure categories (one table, in BatonAPI).
    public typealias ContinuationCategory = ContinuationFailure

    /// The D-Bus error name, e.g. `org.baton.Error.UnknownActivity`.
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public init(_ code: Code, _ message: String) {
        self.init(name: code.rawValue, message: message)
    }

    /// A refused value or an unexpected reply, as the shared API decoding reports it.
    public init(_ error: BatonAPIError) {
        self.init(name: error.name.rawValue, message: error.message)
    }

    /// The documented daemon error, or nil for bus-level and other errors.
    public var code: Code? { Code(rawValue: name) }

    /// Why a Continue failed (cancelled, unreachable, interrupted, versionUnsupported,
    /// noLongerCurrent, timedOut), from the daemon's error; nil for other errors.
    public var continuationFailure: ContinuationCategory? {
        guard let code, ContinuationFailure.errorNames.contains(code) else { return nil }
        return ContinuationFailure(errorMessage: message)
    }

    public var description: String { message.isEmpty ? name : "\(name): \(message)" }

    static func unexpectedReply(_ what: String) -> BatonClientError {
        BatonClientError(.failed, "unexpected reply from the daemon: \(what)")
    }

    /// The reply an exported object sends for this error.
    var dbusError: DBusError { DBusError(name: name, message: message) }
}

extension BatonClientError {
    /// Converts any error thrown by BatonDBus into the client's error type.
    static func from(_ error: any Error) -> BatonClientError {
        switch error {
        case let error as BatonClientError: error
        case let error as DBusError: BatonClientError(name: error.name, message: error.message)
        case let error as BatonAPIError: BatonClientError(error)
        case is CancellationError: BatonClientError(.failed, "cancelled")
        default: BatonClientError(.failed, String(describing: error))
        }
    }
}

/// Runs a bus operation, rethrowing its failure as `BatonClientError`.
func translatingErrors<T>(_ body: () async throws -> T) async throws(BatonClientError) -> T {
    do {
        return try await body()
    } catch {
        throw BatonClientError.from(error)
    }
}

/// The typed arguments of a call into an object this library exports; a wrong shape is answered
/// with InvalidArguments ("WillContinue expects (ss)").
func decodedArguments<Arguments, Reply>(_ method: MethodContract<Arguments, Reply>, _ call: DBusMethodCall) throws(DBusError) -> Arguments {
    do {
        return try method.decodeArguments(call.arguments)
    } catch {
        throw error.dbusError
    }
}

/// Runs a shared API decoding step, rethrowing its refusal as `BatonClientError`.
func decoding<T>(_ body: () throws(BatonAPIError) -> T) throws(BatonClientError) -> T {
    do {
        return try body()
    } catch {
        throw BatonClientError(error)
    }
}
