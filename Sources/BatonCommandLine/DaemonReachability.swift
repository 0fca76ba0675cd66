// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonDBus

/// Words for the one failure every command shares: batond cannot be reached. The bus's own text
/// ("The name org.baton was not provided by any .service files") says neither what is missing
/// nor how to start it.
public enum DaemonReachability {
    /// The bus's answers when nothing owns the daemon's name.
    static let notRunningNames: Set<String> = [
        "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
    ]

    /// "batond is not running on the system bus: start it with ... [ServiceUnknown's name]" for a
    /// call to a name nobody owns (the error name stays, for scripts); nil for every other failure.
    public static func explanation(for error: BatonClientError, options: GlobalOptions) -> String? {
        guard notRunningNames.contains(error.name) else { return nil }
        return "batond is not running on \(busDescription(options.bus))" + ownerNote(options)
            + ": start it with " + startAdvice(options) + " [\(error.name)]"
    }

    /// Why a connection to the bus itself failed, with what to do.
    public static func connectionFailure(_ error: BatonClientError, options: GlobalOptions) -> BatonClientError {
        BatonClientError(name: error.name, message: "cannot connect to \(busDescription(options.bus)) (\(error.message)), so batond "
                         + "cannot be reached there; start a bus and batond with " + startAdvice(options))
    }

    public static func busDescription(_ bus: DBusBusKind) -> String {
        switch bus {
        case .system: "the system bus"
        case .session: "the session bus"
        case .address(let address): "the bus at \(address)"
        }
    }

    static func ownerNote(_ options: GlobalOptions) -> String {
        options.busName == BatonConnection.defaultBusName ? "" : " (nothing owns \(options.busName))"
    }

    public static func startAdvice(_ options: GlobalOptions) -> String {
        let name = options.busName == BatonConnection.defaultBusName ? "" : " --bus-name \(options.busName)"
        switch options.bus {
        case .system:
            let unit = name.isEmpty ? "`systemctl start batond`" : "`batond --system\(name)`"
            return "\(unit), or run `batond --session --state-dir DIR` for a per-user daemon and pass --bus session"
        case .session:
            return "`batond --session --state-dir DIR\(name)` (a per-user daemon)"
        case .address(let address):
            return "`batond --bus-address \(address) --state-dir DIR\(name)`"
        }
    }
}
