import BatonDBus

/// org.baton.Agent1 on the session bus at /org/baton/Agent: what the agent offers the daemon and
/// tools in the user's session. Launch starts a handler app for a type (the daemon's "no running
/// handler" case belongs here, where the session's environment is).
public enum AgentService {
    public static let busName = "org.baton.Agent"
    public static let path = "/org/baton/Agent"
    public static let interface = "org.baton.Agent1"

    /// Exports Agent1 on `connection` and takes the name; false when another agent already has it.
    @discardableResult
    public static func export(on connection: DBusConnection, launcher: DesktopAppLauncher = DesktopAppLauncher(),
                              logger: any AgentLog) async throws -> Bool {
        let launch = DBusMethod("Launch", in: [DBusArgument("activity_type", "s")], out: [DBusArgument("desktop_id", "s")]) { call in
            guard let type = call.arguments.first?.stringValue, !type.isEmpty else {
                throw DBusError(name: "org.baton.Error.InvalidArguments", message: "Launch needs an activity type")
            }
            let id: String
            do throws(LaunchError) {
                id = try launcher.launch(activityType: type)
            } catch {
                throw DBusError(name: "org.baton.Error.Failed", message: error.message)
            }
            logger.log("launched \(id) for \(type)")
            return [.string(id)]
        }
        let handlers = DBusMethod("GetHandlers", in: [DBusArgument("activity_type", "s")], out: [DBusArgument("desktop_ids", "as")]) { call in
            guard let type = call.arguments.first?.stringValue else {
                throw DBusError(name: "org.baton.Error.InvalidArguments", message: "GetHandlers needs an activity type")
            }
            return [.stringArray(launcher.handlers(for: type).map(\.id))]
        }
        try await connection.export([DBusInterface(interface, methods: [launch, handlers])], at: path)
        return try await connection.requestName(busName, flags: [.doNotQueue]) == .primaryOwner
    }
}
