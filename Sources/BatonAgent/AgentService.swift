// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonDBus

/// org.baton.Agent1 at /org/baton/Agent: what the agent offers the daemon and tools in the user's
/// session. Launch starts a handler app for a type (the daemon's "no running handler" case
/// belongs here, where the session's environment is). Served twice: on the session bus under
/// org.baton.Agent, and on the agent's connection to batond's bus, registered with
/// Manager1.RegisterAgent, where only batond may call it.
public enum AgentService {
    public static let busName = BatonBusName.agent
    public static let path = BatonObjectPath.agent
    public static let interface = BatonInterface.agent

    /// Exports Agent1 on `connection` and takes the name; false when another agent already has it.
    @discardableResult
    public static func export(on connection: DBusConnection, launcher: DesktopAppLauncher = DesktopAppLauncher(),
                              logger: any AgentLog) async throws -> Bool {
        try await connection.export([agentInterface(launcher: launcher, logger: logger, admit: { _ in })], at: path)
        return try await connection.requestName(busName, flags: [.doNotQueue]) == .primaryOwner
    }

    /// Exports Agent1 on the connection to batond (callable by batond only) and registers it
    /// (Manager1.RegisterAgent). Call again when batond restarts.
    public static func register(with daemon: BatonConnection, launcher: DesktopAppLauncher = DesktopAppLauncher(),
                                logger: any AgentLog) async throws {
        // Exported afresh each time: a restarted batond is a new caller to admit.
        let interface = agentInterface(launcher: launcher, logger: logger) { call throws(DBusError) in try await daemon.requireDaemon(call) }
        try await daemon.serveAgent(interface)
    }

    static func agentInterface(launcher: DesktopAppLauncher, logger: any AgentLog,
                               admit: @escaping @Sendable (DBusMethodCall) async throws(DBusError) -> Void) -> DBusInterface {
        let launch = DBusMethod(OrgBaton.Agent1.launch) { call in
            try await admit(call)
            guard let type = call.arguments.first?.stringValue, !type.isEmpty else {
                throw DBusError(name: BatonErrorName.invalidArguments.rawValue, message: "Launch needs an activity type")
            }
            let id: String
            do throws(LaunchError) {
                id = try launcher.launch(activityType: type)
            } catch {
                throw DBusError(name: BatonErrorName.failed.rawValue, message: error.message)
            }
            logger.log("launched \(id) for \(type)")
            return [.string(id)]
        }
        let handlers = DBusMethod(OrgBaton.Agent1.getHandlers) { call in
            try await admit(call)
            guard let type = call.arguments.first?.stringValue else {
                throw DBusError(name: BatonErrorName.invalidArguments.rawValue, message: "GetHandlers needs an activity type")
            }
            return [.stringArray(launcher.handlers(for: type).map(\.id))]
        }
        return DBusInterface(interface, methods: [launch, handlers])
    }
}
