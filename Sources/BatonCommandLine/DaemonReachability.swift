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

    /// "batond is not running on the system bus: start it with ..." for a call to a name nobody
    /// owns; nil for every other failure.
    public static func explanation(for error: BatonClientError, options: GlobalOptions) -> String? {
        guard notRunningNames.contains(error.name) else { return nil }
        return "batond is not running on \(busDescription(options.bus))" + ownerNote(options)
            + ": start it with " + startAdvice(options)
    }

    /// What a person reads for a failed command: what happened, why and the fix. The bus's own
    /// errors (org.freedesktop.DBus.Error.*: a policy's "Rejected send message, 2 matched rules",
    /// "No such object path", a connection refused) are put in words; batond's documented errors
    /// (org.baton.Error.*) are batond's message, written for people (NotPermitted says who may and
    /// what to do: join group baton, use the active desktop session, authenticate as an
    /// administrator, start polkit), then the error's short name in brackets for scripts and bug
    /// reports ("(NotPermitted)"), not the D-Bus name.
    public static func sentence(for error: BatonClientError, options: GlobalOptions, command: String) -> String {
        if let explanation = explanation(for: error, options: options) { return explanation }
        if error.name == busUnreachableName { return error.message }
        if error.code != nil { return "\(error.message) (\(shortName(error.name)))" }
        switch error.name {
        case DBusError.accessDeniedName:
            // The shipped policy lets every user through to batond, which decides (group baton, else
            // polkit: NotPermitted with its own sentence); a refusal by the bus is an older policy.
            return "not permitted: the bus policy installed here lets only root and members of group `baton` \(privilegedAction(command)) "
                + "(an older org.baton.conf, or this user may not use batond at all). Fix: reinstall baton, whose policy lets batond "
                + "and polkit decide (the active desktop session may continue); or `sudo adduser $USER baton`, then log out and in "
                + "again (or run the command with sudo)"
        case DBusError.unknownObjectName, DBusError.unknownInterfaceName, DBusError.unknownMethodName:
            return "batond has no such \(objectKind(command)) (it went away, was never there, or batond restarted since): "
                + "\(listAdvice(command))"
        case DBusError.noReplyName, "org.freedesktop.DBus.Error.Timeout", "org.freedesktop.DBus.Error.TimedOut":
            return "batond did not answer in time (busy or stuck): `systemctl status batond` shows its state and "
                + "`sudo systemctl restart batond` restarts it"
        case DBusError.disconnectedName:
            return "the connection to \(busDescription(options.bus)) was closed while waiting for batond: try again; "
                + "`systemctl status batond dbus` shows whether either stopped"
        case DBusError.limitsExceededName, DBusError.noMemoryName:
            return "\(busDescription(options.bus)) refused the call (it is at a limit: too many connections or messages); try again later"
        default:
            return "the call to batond failed on \(busDescription(options.bus)) (\(shortName(error.name))); "
                + "`baton doctor` checks what batond needs"
        }
    }

    /// Why a connection to the bus itself failed, with what to do.
    public static func connectionFailure(_ error: BatonClientError, options: GlobalOptions) -> BatonClientError {
        let bus = busDescription(options.bus)
        let why: String
        switch (error.name, options.bus) {
        case ("org.freedesktop.DBus.Error.NoServer", .system), ("org.freedesktop.DBus.Error.FileNotFound", .system):
            why = "\(bus) is not running (no dbus-daemon listens), so batond cannot be reached either: "
                + "`sudo systemctl start dbus`, then " + startAdvice(options)
        case ("org.freedesktop.DBus.Error.NoServer", _), ("org.freedesktop.DBus.Error.FileNotFound", _):
            why = "nothing listens on \(bus), so batond cannot be reached there: start a bus and batond with " + startAdvice(options)
        case (DBusError.accessDeniedName, _), ("org.freedesktop.DBus.Error.AuthFailed", _):
            why = "\(bus) does not let this user connect: check its socket's permissions, or run as a user it accepts"
        default:
            why = "cannot connect to \(bus), so batond cannot be reached there: start a bus and batond with " + startAdvice(options)
        }
        return BatonClientError(name: busUnreachableName, message: why)
    }

    /// The name of `connectionFailure`'s errors: their message is the whole sentence.
    public static let busUnreachableName = "org.baton.CommandLine.BusUnreachable"

    static func privilegedAction(_ command: String) -> String {
        switch command {
        case "continue": "continue a suggestion"
        case "accept", "with": "pair this machine"
        case "remove": "remove a member from the ring"
        default: "do that"
        }
    }

    static func objectKind(_ command: String) -> String {
        switch command {
        case "continue": "suggestion"
        case "remove": "device"
        default: "activity, suggestion or device"
        }
    }

    static func listAdvice(_ command: String) -> String {
        switch command {
        case "continue": "`baton suggestions` lists those there are"
        case "remove", "list": "`bt-pair list` lists the ring's members"
        default: "`baton list` and `baton suggestions` list what there is"
        }
    }

    /// "AccessDenied" for "org.freedesktop.DBus.Error.AccessDenied".
    static func shortName(_ name: String) -> String {
        name.split(separator: ".").last.map(String.init) ?? name
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
