// SPDX-License-Identifier: LGPL-2.1-or-later
/// A D-Bus error: received from a peer, raised locally (connection or marshalling problems),
/// or thrown by an exported method handler to reply with that error.
public struct DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A D-Bus error name such as `org.freedesktop.DBus.Error.InvalidArgs`.
    public var name: String
    public var message: String

    public init(name: String, message: String = "") {
        self.name = name
        self.message = message
    }

    public var description: String { message.isEmpty ? name : "\(name): \(message)" }
}

extension DBusError {
    public static let failedName = "org.freedesktop.DBus.Error.Failed"
    public static let invalidArgsName = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let unknownMethodName = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownObjectName = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownInterfaceName = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownPropertyName = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnlyName = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let accessDeniedName = "org.freedesktop.DBus.Error.AccessDenied"
    public static let disconnectedName = "org.freedesktop.DBus.Error.Disconnected"
    public static let noReplyName = "org.freedesktop.DBus.Error.NoReply"
    public static let nameHasNoOwnerName = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let serviceUnknownName = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let noMemoryName = "org.freedesktop.DBus.Error.NoMemory"
    public static let limitsExceededName = "org.freedesktop.DBus.Error.LimitsExceeded"
    /// Thrown by `call` (never sent on the bus) when the reply was over the connection's
    /// `maxReplyBytes`: it was dropped unread and the call failed at once.
    public static let replyTooLargeName = "org.baton.DBus.Error.ReplyTooLarge"

    public static func failed(_ message: String) -> DBusError { DBusError(name: failedName, message: message) }
    public static func invalidArgs(_ message: String) -> DBusError { DBusError(name: invalidArgsName, message: message) }
    public static func unknownMethod(_ message: String) -> DBusError { DBusError(name: unknownMethodName, message: message) }
    public static func unknownObject(_ message: String) -> DBusError { DBusError(name: unknownObjectName, message: message) }
    public static func unknownInterface(_ message: String) -> DBusError { DBusError(name: unknownInterfaceName, message: message) }
    public static func unknownProperty(_ message: String) -> DBusError { DBusError(name: unknownPropertyName, message: message) }
    public static func propertyReadOnly(_ message: String) -> DBusError { DBusError(name: propertyReadOnlyName, message: message) }
    public static func accessDenied(_ message: String) -> DBusError { DBusError(name: accessDeniedName, message: message) }
    public static func disconnected(_ message: String = "connection is closed") -> DBusError {
        DBusError(name: disconnectedName, message: message)
    }
    public static func noMemory() -> DBusError { DBusError(name: noMemoryName, message: "out of memory") }
}
