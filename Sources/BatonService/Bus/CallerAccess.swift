// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonDBus

/// Asks polkit whether the bus connection `caller` may do `action` (docs/security.md, "Who may
/// continue and pair"). The daemon's adapter is PolkitAuthorizer; it never throws: every failure is
/// an answer, and a call that is not answered in time is `.timedOut`.
public protocol Authorizer: Sendable {
    func check(_ action: PolkitAction, caller: String) async -> PolkitAnswer
}

/// Who may do what, decided per call: root, the daemon's user and group baton (PrivilegePolicy)
/// without asking anyone; every other caller as polkit answers. Pure: the answer comes in.
public enum CallerAccess: Sendable, Equatable {
    case allowed(Grant)
    /// Refused; the message (for org.baton.Error.NotPermitted) says why and what to do.
    case refused(String)

    public enum Grant: Sendable, Equatable {
        /// Root, the daemon's own user or group baton.
        case privilege
        /// polkit said yes (the active session, an administrator's password, a local rule).
        case polkit
    }

    /// Whether the caller must be asked about through polkit: only when PrivilegePolicy does not allow it.
    public static func needsPolkit(privileged: Bool) -> Bool { !privileged }

    /// The decision for a caller PrivilegePolicy allows (`privileged`), else for polkit's `answer`.
    public static func decide(_ action: PolkitAction, privileged: Bool, polkit answer: PolkitAnswer?,
                              group: String = "baton") -> CallerAccess {
        if privileged { return .allowed(.privilege) }
        let join = "or join group \(group) (`sudo adduser $USER \(group)`, then log in again)"
        switch (action, answer) {
        case (_, .authorized?):
            return .allowed(.polkit)
        case (.continueSuggestions, .notAuthorized?), (.continueSuggestions, .challenge?), (.continueSuggestions, .dismissed?):
            return .refused("only root, group \(group) and the active local desktop session may continue or dismiss suggestions "
                            + "(polkit action org.baton.continue): run it from the desktop session you are logged in at, \(join)")
        case (.pair, .notAuthorized?), (.pair, .challenge?):
            return .refused("pairing and removal need root, group \(group) or an administrator's password (polkit action "
                            + "org.baton.pair), and no polkit agent asked for it here: run it in a desktop session, with sudo, \(join)")
        case (.pair, .dismissed?):
            return .refused("the administrator's password was not given (the polkit prompt was dismissed), so pairing and removal "
                            + "were refused: try again and authenticate, run it with sudo, \(join)")
        case (_, .unavailable?), (_, nil):
            return .refused("polkit is not running on this machine, so only root and group \(group) may \(action.doing): "
                            + "start polkit (`sudo systemctl start polkit`, package polkitd), run it with sudo, \(join)")
        case (_, .timedOut?):
            return .refused("polkit did not answer in time, so this was refused (only root and group \(group) need no polkit): "
                            + "try again; `systemctl status polkit` shows its state; or run it with sudo, \(join)")
        case (_, .unknownAction?):
            return .refused("polkit does not know the action \(action.rawValue) (org.baton.policy is not installed in "
                            + "/usr/share/polkit-1/actions), so only root and group \(group) may \(action.doing): reinstall baton, \(join)")
        case (_, .failed?):
            return .refused("polkit could not decide, so only root and group \(group) may \(action.doing) now: "
                            + "`journalctl -u polkit` says why; run it with sudo, \(join)")
        }
    }
}

/// The Authorizer of batond: CheckAuthorization on org.freedesktop.PolicyKit1 on the daemon's own
/// bus (the callers' bus: a system-bus-name subject names a connection there). Nothing is cached:
/// each call asks once, and the bus library bounds how many calls a caller has in flight.
public struct PolkitAuthorizer: Authorizer {
    let connection: DBusConnection
    /// How long a question without a password prompt may take (org.baton.continue).
    public let timeout: Duration
    /// How long polkit may take when it asks for a password (org.baton.pair): a person types it,
    /// within the 25 s a D-Bus client waits by default for its own call.
    public let interactiveTimeout: Duration

    public init(connection: DBusConnection, timeout: Duration = .seconds(5), interactiveTimeout: Duration = .seconds(20)) {
        self.connection = connection
        self.timeout = timeout
        self.interactiveTimeout = interactiveTimeout
    }

    public func check(_ action: PolkitAction, caller: String) async -> PolkitAnswer {
        do {
            let reply = try await connection.call(destination: Polkit.busName, path: Polkit.authorityPath,
                                                  interface: Polkit.authorityInterface, method: "CheckAuthorization",
                                                  arguments: Polkit.checkArguments(subject: caller, action: action,
                                                                                   interactive: action.allowsInteraction),
                                                  timeout: action.allowsInteraction ? interactiveTimeout : timeout)
            return Polkit.answer(reply: reply) ?? .failed("unexpected CheckAuthorization reply")
        } catch let error as DBusError {
            return Polkit.answer(error: error)
        } catch {
            return .failed("CheckAuthorization was cancelled")
        }
    }
}
