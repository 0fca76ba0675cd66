// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonDBus

// Who may call: PrivilegePolicy (root, the daemon's user, group baton) without asking anyone, every
// other caller as polkit answers (CallerAccess).

/// Who may pair and remove: root, the daemon's own user (session-bus daemons) and members of
/// group `baton`. Listing needs no privilege.
public struct PrivilegePolicy: Sendable {
    public var group: String
    public init(group: String = "baton") { self.group = group }

    /// Whether `uid` may: root, this process's user, or a member of `group` (primary or
    /// supplementary, as the user database lists it). Called for many callers at once (every
    /// guarded D-Bus call, on any executor thread), so it reads the user and group databases only
    /// through the reentrant `getpwuid_r`/`getgrnam_r` into buffers of its own: `getpwuid` and
    /// `getgrnam` return one static record per process, and a second caller's lookup overwrote the
    /// first caller's name between its two lookups (nobody's call was then judged as a group
    /// member's: BusAttackTests' flood got one UnknownDevice in 400 answers on dbus-broker).
    public func allows(uid: UInt32) -> Bool {
        if uid == 0 || uid == geteuid() { return true }
        guard let account = Self.account(uid), let wanted = Self.groupID(group) else { return false }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(account.name, account.gid, &groups, &count) < 0 {
            // More groups than the first guess: count now says how many.
            guard count > 0, count <= 65_536 else { return false }
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(account.name, account.gid, &groups, &count) >= 0 else { return false }
        }
        return groups.prefix(Int(count)).contains(wanted)
    }

    /// The user's name and primary group, read with `getpwuid_r` into a buffer of this call's own.
    static func account(_ uid: uid_t) -> (name: String, gid: gid_t)? {
        var size = 4_096
        while size <= 1 << 20 {
            var record = passwd()
            var result: UnsafeMutablePointer<passwd>?
            var buffer = [CChar](repeating: 0, count: size)
            let found: (String, gid_t)?? = buffer.withUnsafeMutableBufferPointer { bytes in
                guard let base = bytes.baseAddress else { return .some(nil) }
                let status = getpwuid_r(uid, &record, base, bytes.count, &result)
                if status == ERANGE { return .none }
                guard status == 0, result != nil, let name = record.pw_name else { return .some(nil) }
                return .some((String(cString: name), record.pw_gid))
            }
            if let found { return found }
            size *= 4
        }
        return nil
    }

    /// The group's id, read with `getgrnam_r` into a buffer of this call's own.
    static func groupID(_ name: String) -> gid_t? {
        var size = 4_096
        while size <= 1 << 22 {
            var record = Glibc.group()
            var result: UnsafeMutablePointer<Glibc.group>?
            var buffer = [CChar](repeating: 0, count: size)
            let found: gid_t?? = buffer.withUnsafeMutableBufferPointer { bytes in
                guard let base = bytes.baseAddress else { return .some(nil) }
                let status = getgrnam_r(name, &record, base, bytes.count, &result)
                if status == ERANGE { return .none }
                guard status == 0, result != nil else { return .some(nil) }
                return .some(record.gr_gid)
            }
            if let found { return found }
            size *= 4
        }
        return nil
    }
}

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

/// The questions batond has out to polkit, counted by the Unix user they are about (pure; RingBus
/// keeps one under a lock). Each question holds one of batond's handlers until polkit answers (up to
/// 20 s) and one of the replies the bus lets batond wait for (dbus-daemon: 128, shared with its
/// calls to BlueZ, Avahi and apps). Without a bound, a flood of guarded calls from many connections
/// of one account held every handler, and everyone's calls, group baton and root included, waited
/// behind it (BusAttackTests). Beyond the bound a call is refused at once (`busy`), not queued.
public struct PolkitQuestions: Sendable, Equatable {
    /// Questions about one user's calls at once.
    public let perUser: Int
    /// Questions at once in all.
    public let inAll: Int
    public private(set) var waiting: [UInt32: Int] = [:]

    public init(perUser: Int = 16, inAll: Int = 64) {
        self.perUser = max(1, perUser)
        self.inAll = max(self.perUser, inAll)
    }

    public var total: Int { waiting.values.reduce(0, +) }

    /// Takes a place for a question about a call of `uid`; false, taking nothing, when that user
    /// or everyone has as many out as allowed.
    public mutating func take(uid: UInt32) -> Bool {
        guard waiting[uid, default: 0] < perUser, total < inAll else { return false }
        waiting[uid, default: 0] += 1
        return true
    }

    /// Gives back the place of a question about a call of `uid` that polkit answered (or that failed).
    public mutating func give(uid: UInt32) {
        guard let count = waiting[uid] else { return }
        waiting[uid] = count > 1 ? count - 1 : nil
    }

    /// The refusal when no place is free.
    public static func busy(group: String = "baton") -> String {
        "too many of this account's calls (or of everyone's) are waiting for polkit's answer, so this one was refused: "
            + "try again in a few seconds; root and group \(group) need no polkit (`sudo adduser $USER \(group)`, then log in again)"
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
        let limit = action.allowsInteraction ? interactiveTimeout : timeout
        do {
            // Asked by polkit's unique name, not org.freedesktop.PolicyKit1: the bus library takes a
            // reply only from the connection a call went to when that is a unique name, while a
            // reply to a call to a well-known name could come from any connection the bus lets send
            // one (a local user forging "authorized" with the serial of this call).
            let owner = try await polkitOwner(timeout: limit)
            let reply = try await connection.call(destination: owner, path: Polkit.authorityPath,
                                                  interface: Polkit.authorityInterface, method: "CheckAuthorization",
                                                  arguments: Polkit.checkArguments(subject: caller, action: action,
                                                                                   interactive: action.allowsInteraction),
                                                  timeout: limit)
            return Polkit.answer(reply: reply) ?? .failed("unexpected CheckAuthorization reply")
        } catch let error as DBusError {
            return Polkit.answer(error: error)
        } catch {
            return .failed("CheckAuthorization was cancelled")
        }
    }

    /// The unique name owning org.freedesktop.PolicyKit1, started through the bus (D-Bus
    /// activation, as a call to the name would) when nothing owns it; NameHasNoOwner or
    /// ServiceUnknown when nothing can.
    func polkitOwner(timeout: Duration) async throws -> String {
        do {
            return try await connection.nameOwner(Polkit.busName)
        } catch let error as DBusError where error.name == DBusError.nameHasNoOwnerName {
            _ = try await connection.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                          interface: "org.freedesktop.DBus", method: "StartServiceByName",
                                          arguments: [.string(Polkit.busName), .uint32(0)], timeout: timeout)
            return try await connection.nameOwner(Polkit.busName)
        }
    }
}
