// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonDBus

/// The daemon's well-known bus name (several daemons on one bus pick others, e.g. in tests).
public enum BatonBusName {
    public static let daemon = "org.baton"
    /// baton-agent's name on the session bus (one agent per session).
    public static let agent = "org.baton.Agent"
}

/// Interface names of docs/dbus-api.md; dbus/<name>.xml describes each one.
public enum BatonInterface {
    public static let manager = "org.baton.Manager1"
    public static let activity = "org.baton.Activity1"
    public static let suggestion = "org.baton.Suggestion1"
    public static let source = "org.baton.ActivitySource1"
    public static let handler = "org.baton.ActivityHandler1"
    public static let ring = "org.baton.Ring1"
    public static let pairing = "org.baton.Pairing1"
    public static let pairingSession = "org.baton.PairingSession1"
    /// Served by baton-agent (session bus, and on its connection to batond's bus after RegisterAgent).
    public static let agent = "org.baton.Agent1"
    /// The universal clipboard, served by batond at /org/baton.
    public static let clipboard = "org.baton.Clipboard1"
    /// Served by baton-agent on its connection to batond's bus after Clipboard1.RegisterAgent.
    public static let clipboardAgent = "org.baton.ClipboardAgent1"

    /// Every org.baton interface, daemon side, application side and the session agent's.
    public static let all = [manager, activity, suggestion, source, handler, ring, pairing, pairingSession, agent, clipboard, clipboardAgent]

    /// Standard freedesktop interfaces the client calls.
    public static let properties = "org.freedesktop.DBus.Properties"
    public static let objectManager = "org.freedesktop.DBus.ObjectManager"
}

/// Object paths and path prefixes of docs/dbus-api.md.
public enum BatonObjectPath {
    /// Manager1 and the ObjectManager.
    public static let manager = "/org/baton"
    /// The universal clipboard's Clipboard1 (its own object: /org/baton is Manager1's).
    public static let clipboard = "/org/baton/clipboard"
    /// Ring1 and Pairing1.
    public static let ring = "/org/baton/ring"
    /// Activity1 objects: `/org/baton/activity/u{uid}_{n}`.
    public static let activityPrefix = "/org/baton/activity/"
    /// Suggestion1 objects: `/org/baton/suggestion/{n}`.
    public static let suggestionPrefix = "/org/baton/suggestion"
    /// PairingSession1 objects: `/org/baton/ring/pairing/{n}`.
    public static let pairingSessionPrefix = "/org/baton/ring/pairing"
    /// baton-agent's Agent1 object.
    public static let agent = "/org/baton/Agent"
    /// Where the client library exports its own objects (handlers, sources) on an app's connection.
    public static let clientExportRoot = "/org/baton/client"
    /// The D-Bus way of saying "no object" (Manager1.GetCurrentActivity with no current activity).
    public static let none = "/"
}

/// Every org.baton.Error.* name the daemon or the client library sends (docs/dbus-api.md, "Errors").
public enum BatonErrorName: String, Sendable, Hashable, CaseIterable {
    case invalidArguments = "org.baton.Error.InvalidArguments"
    case payloadTooLarge = "org.baton.Error.PayloadTooLarge"
    case unknownActivity = "org.baton.Error.UnknownActivity"
    case notPermitted = "org.baton.Error.NotPermitted"
    case limitExceeded = "org.baton.Error.LimitExceeded"
    case alreadyExists = "org.baton.Error.AlreadyExists"
    case notReady = "org.baton.Error.NotReady"
    case failed = "org.baton.Error.Failed"
    case unknownObject = "org.baton.Error.UnknownObject"
    case unknownDevice = "org.baton.Error.UnknownDevice"
    case diskFull = "org.baton.Error.DiskFull"
    case documentConflict = "org.baton.Error.DocumentConflict"
    case editSessionBusy = "org.baton.Error.EditSessionBusy"
    case editSessionNotOwned = "org.baton.Error.EditSessionNotOwned"
}

extension DBusError {
    /// A documented org.baton error.
    public init(name: BatonErrorName, message: String) {
        self.init(name: name.rawValue, message: message)
    }

    /// The documented org.baton error this is, or nil for bus-level and other errors.
    public var batonName: BatonErrorName? { BatonErrorName(rawValue: name) }
}

/// A D-Bus value that does not have the shape the API documents: a refused argument (named
/// `invalidArguments`) or an unexpected reply (named `failed`).
public struct BatonAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    public var name: BatonErrorName
    public var message: String

    public init(_ name: BatonErrorName, _ message: String) {
        self.name = name
        self.message = message
    }

    static func unexpectedReply(_ what: String) -> BatonAPIError {
        BatonAPIError(.failed, "unexpected reply from the daemon: \(what)")
    }

    public var description: String { "\(name.rawValue): \(message)" }
    public var dbusError: DBusError { DBusError(name: name, message: message) }
}
