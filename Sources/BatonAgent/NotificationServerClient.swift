// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus

/// The org.freedesktop.Notifications server on the session bus (GNOME Shell, Plasma, dunst, ...).
public struct NotificationServerClient: Sendable {
    public static let busName = "org.freedesktop.Notifications"
    public static let path = "/org/freedesktop/Notifications"
    public static let interface = "org.freedesktop.Notifications"

    public let connection: DBusConnection

    public init(connection: DBusConnection) { self.connection = connection }

    /// Calling it D-Bus-activates a server that is installed but not running (dunst ships a .service file).
    public func capabilities() async throws -> [String] {
        let reply = try await call("GetCapabilities")
        guard let capabilities = reply.first?.stringArrayValue else { throw DBusError.failed("GetCapabilities returned \(reply.map(\.signature))") }
        return capabilities
    }

    public func notify(_ request: NotificationRequest) async throws -> UInt32 {
        let reply = try await call("Notify", [
            .string(NotificationRequest.appName), .uint32(request.replacesID), .string(NotificationRequest.icon),
            .string(request.summary), .string(request.body), .stringArray(request.actions),
            .dictionary(keySignature: "s", valueSignature: "v",
                        Dictionary(uniqueKeysWithValues: request.hints.map { (DBusValue.string($0.key), DBusValue.variant($0.value)) })),
            .int32(request.timeout),
        ])
        guard let id = reply.first?.uint32Value else { throw DBusError.failed("Notify returned \(reply.map(\.signature))") }
        return id
    }

    public func close(id: UInt32) async throws {
        _ = try await call("CloseNotification", [.uint32(id)])
    }

    /// ActionInvoked and NotificationClosed from the server's current owner, as agent events.
    public func events() async throws -> AsyncStream<AgentEvent> {
        let signals = try await connection.signals(matching: DBusMatchRule(sender: Self.busName, interface: Self.interface,
                                                                           path: Self.path))
        return AsyncStream { continuation in
            let task = Task {
                for await signal in signals {
                    if let event = Self.event(from: signal) { continuation.yield(event) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Nil for other signals and for ones with the wrong argument types (untrusted input).
    static func event(from signal: DBusSignal) -> AgentEvent? {
        switch signal.member {
        case "ActionInvoked":
            guard signal.arguments.count >= 2, let id = signal.arguments[0].uint32Value,
                  let key = signal.arguments[1].stringValue else { return nil }
            return .actionInvoked(id: id, key: key)
        case "NotificationClosed":
            guard signal.arguments.count >= 2, let id = signal.arguments[0].uint32Value,
                  let reason = signal.arguments[1].uint32Value else { return nil }
            return .notificationClosed(id: id, reason: reason)
        default:
            return nil
        }
    }

    private func call(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await connection.call(destination: Self.busName, path: Self.path, interface: Self.interface, method: method,
                                  arguments: arguments, timeout: .seconds(10))
    }
}
