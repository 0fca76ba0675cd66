// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonDBus

/// The polkit actions of dbus/org.baton.policy (docs/security.md, "Who may continue and pair").
public enum PolkitAction: String, Sendable, CaseIterable {
    /// Continue and dismiss suggestions (Suggestion1, Ring1.Continue): the active local session.
    case continueSuggestions = "org.baton.continue"
    /// Pair, remove, list introduced members, discover (Pairing1): an administrator, kept for a while.
    case pair = "org.baton.pair"

    /// Whether batond lets polkit ask the person (an authentication agent's password prompt).
    public var allowsInteraction: Bool { self == .pair }

    /// What the action lets a person do, in words ("continue or dismiss suggestions").
    public var doing: String {
        switch self {
        case .continueSuggestions: "continue or dismiss suggestions"
        case .pair: "pair or remove machines"
        }
    }
}

/// polkit's answer to one CheckAuthorization, as batond and `baton doctor` read it.
public enum PolkitAnswer: Sendable, Equatable {
    /// is_authorized.
    case authorized
    /// Not authorized, but would be after authenticating (is_challenge: an administrator's password).
    case challenge
    /// Not authorized (also: the password prompt was not answered).
    case notAuthorized
    /// The person dismissed the authentication prompt (details "polkit.dismissed").
    case dismissed
    /// polkitd does not run on this bus (nothing owns org.freedesktop.PolicyKit1 and nothing starts it).
    case unavailable
    /// polkitd did not answer in time.
    case timedOut
    /// polkitd does not know the action: dbus/org.baton.policy is not installed.
    case unknownAction
    /// Any other failure of the call; the detail is for logs, never shown as is.
    case failed(String)
}

/// org.freedesktop.PolicyKit1.Authority.CheckAuthorization, as a value: its arguments and its reply.
public enum Polkit {
    public static let busName = "org.freedesktop.PolicyKit1"
    public static let authorityPath = "/org/freedesktop/PolicyKit1/Authority"
    public static let authorityInterface = "org.freedesktop.PolicyKit1.Authority"
    /// CheckAuthorizationFlags.AllowUserInteraction.
    public static let allowUserInteraction: UInt32 = 1

    /// The arguments of CheckAuthorization((sa{sv}) subject, s action_id, a{ss} details, u flags,
    /// s cancellation_id) for the bus connection `uniqueName`, no details, no cancellation id.
    public static func checkArguments(subject uniqueName: String, action: PolkitAction, interactive: Bool) -> [DBusValue] {
        [
            .structure([.string("system-bus-name"), .propertyDictionary(["name": .string(uniqueName)])]),
            .string(action.rawValue),
            .dictionary(keySignature: "s", valueSignature: "s", [:]),
            .uint32(interactive ? allowUserInteraction : 0),
            .string(""),
        ]
    }

    /// The answer in a CheckAuthorization reply ((bba{ss}) result); nil for a reply of another shape.
    public static func answer(reply: [DBusValue]) -> PolkitAnswer? {
        guard reply.count == 1, let fields = reply[0].structValue, fields.count == 3,
              let authorized = fields[0].boolValue, let challenge = fields[1].boolValue,
              let details = fields[2].dictionaryValue else { return nil }
        if authorized { return .authorized }
        if details[.string("polkit.dismissed")]?.stringValue == "true" { return .dismissed }
        return challenge ? .challenge : .notAuthorized
    }

    /// The answer a failed CheckAuthorization stands for.
    public static func answer(error: DBusError) -> PolkitAnswer {
        switch error.name {
        case DBusError.serviceUnknownName, DBusError.nameHasNoOwnerName, "org.freedesktop.DBus.Error.Spawn.ServiceNotFound":
            return .unavailable
        case DBusError.noReplyName, "org.freedesktop.DBus.Error.Timeout", "org.freedesktop.DBus.Error.TimedOut":
            return .timedOut
        case "org.freedesktop.PolicyKit1.Error.Failed" where error.message.contains("is not registered"):
            return .unknownAction
        case "org.freedesktop.PolicyKit1.Error.Cancelled":
            return .dismissed
        default:
            return .failed(String(error.name.prefix(120)))
        }
    }
}
