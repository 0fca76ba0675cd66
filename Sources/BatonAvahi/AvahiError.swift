// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus

/// Errors from Avahi and from the bus on the way to it. `org.freedesktop.Avahi.*` error names map
/// to the cases below; anything unrecognised keeps its name.
public enum AvahiError: Error, Sendable, Hashable, CustomStringConvertible {
    /// avahi-daemon is not on the bus (not running, restarting, or the connection is gone).
    case daemonUnavailable
    /// The name is taken on the network; pick another name and publish again.
    case collision
    case invalidServiceName
    case invalidServiceType
    case invalidPort
    case invalidRecord
    case invalidArgument
    case badState
    case timeout
    case notFound
    case noNetwork
    case accessDenied
    case tooManyClients
    case tooManyObjects
    case tooManyEntries
    /// Another `org.freedesktop.Avahi.*` error.
    case avahi(name: String, message: String)
    /// A bus error that is not Avahi's own.
    case bus(DBusError)
    /// Avahi answered with values of the wrong shape.
    case malformedReply(String)
    /// Rejected before reaching Avahi (names, TXT records and ports are checked locally).
    case invalidInput(String)

    static let prefix = "org.freedesktop.Avahi."

    /// Maps an Avahi error name (as in D-Bus error replies and `Failure`/`StateChanged` signals).
    public init(avahiErrorName name: String, message: String = "") {
        switch name {
        case Self.prefix + "CollisionError": self = .collision
        case Self.prefix + "InvalidServiceNameError": self = .invalidServiceName
        case Self.prefix + "InvalidServiceTypeError": self = .invalidServiceType
        case Self.prefix + "InvalidPortError": self = .invalidPort
        case Self.prefix + "InvalidRecordError", Self.prefix + "InvalidKeyError": self = .invalidRecord
        case Self.prefix + "InvalidArgumentError", Self.prefix + "InvalidFlagsError",
             Self.prefix + "InvalidInterfaceError", Self.prefix + "InvalidInterfaceProtocolError",
             Self.prefix + "InvalidDomainNameError", Self.prefix + "InvalidHostNameError":
            self = .invalidArgument
        case Self.prefix + "BadStateError": self = .badState
        case Self.prefix + "TimeoutError": self = .timeout
        case Self.prefix + "NotFoundError": self = .notFound
        case Self.prefix + "NoNetworkError": self = .noNetwork
        case Self.prefix + "AccessDeniedError", Self.prefix + "NotPermittedError": self = .accessDenied
        case Self.prefix + "TooManyClientsError": self = .tooManyClients
        case Self.prefix + "TooManyObjectsError": self = .tooManyObjects
        case Self.prefix + "TooManyEntriesError": self = .tooManyEntries
        case Self.prefix + "NoDaemonError", Self.prefix + "DisconnectedError": self = .daemonUnavailable
        default: self = .avahi(name: name, message: message)
        }
    }

    /// Maps a bus error: Avahi's own names as above, "nobody owns org.freedesktop.Avahi" as
    /// `daemonUnavailable`, everything else wrapped.
    public init(_ error: DBusError) {
        if error.name.hasPrefix(Self.prefix) {
            self.init(avahiErrorName: error.name, message: error.message)
            return
        }
        switch error.name {
        case DBusError.serviceUnknownName, DBusError.nameHasNoOwnerName, DBusError.disconnectedName:
            self = .daemonUnavailable
        default:
            self = .bus(error)
        }
    }

    public var description: String {
        switch self {
        case .daemonUnavailable: "avahi-daemon is not available"
        case .collision: "name collision"
        case .invalidServiceName: "invalid service name"
        case .invalidServiceType: "invalid service type"
        case .invalidPort: "invalid port"
        case .invalidRecord: "invalid TXT record"
        case .invalidArgument: "invalid argument"
        case .badState: "bad state"
        case .timeout: "timed out"
        case .notFound: "not found"
        case .noNetwork: "no network"
        case .accessDenied: "access denied"
        case .tooManyClients: "too many clients"
        case .tooManyObjects: "too many objects"
        case .tooManyEntries: "too many entries"
        case .avahi(let name, let message): message.isEmpty ? name : "\(name): \(message)"
        case .bus(let error): error.description
        case .malformedReply(let what): "malformed reply from avahi-daemon: \(what)"
        case .invalidInput(let what): "invalid input: \(what)"
        }
    }
}

/// Runs a bus call, translating `DBusError` into `AvahiError`.
func avahiCall<T>(isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as DBusError {
        throw AvahiError(error)
    }
}
