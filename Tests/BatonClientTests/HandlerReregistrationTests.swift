// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonClient
import BatonDBus
import Foundation
import Testing

/// Issue 26: batond restarted under a running baton-agent and baton-browser-host (an upgrade,
/// Restart=on-failure, `systemctl restart batond`): both register their handled types again when
/// batond's bus name gets its new owner, instead of leaving `baton handled-types` empty; and the
/// agent registers itself again as this user's session agent (`baton status`: "Agent").
@Suite("handlers survive a restart of batond", .serialized)
struct HandlerReregistrationTests {
    @Test func agentAndBrowserHostRegisterAgainWhenBatondRestarts() async throws {
        try await withDaemon { daemon in
            let home = daemon.bus.directory.appendingPathComponent("home")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            let environment = ["DBUS_SESSION_BUS_ADDRESS": daemon.bus.address, "HOME": home.path, "PATH": "/usr/bin:/bin",
                               "XDG_DATA_HOME": home.appendingPathComponent("data").path,
                               "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
                               "BATON_BUS": daemon.bus.address, "BATON_BUS_NAME": daemon.busName]
            let agent = Process()
            agent.executableURL = URL(fileURLWithPath: try Built.executable("baton-agent"))
            agent.arguments = ["--bus", daemon.bus.address, "--bus-name", daemon.busName]
            agent.environment = environment
            agent.standardError = FileHandle.nullDevice
            try launch(agent)
            defer { kill(agent.processIdentifier, SIGKILL) }
            // The browser host lives while its stdin (the browser) stays open.
            let browserInput = Pipe()
            let host = Process()
            host.executableURL = URL(fileURLWithPath: try Built.executable("baton-browser-host"))
            host.arguments = ["chrome-extension://test/"]
            host.environment = environment
            host.standardInput = browserInput
            host.standardOutput = FileHandle.nullDevice
            host.standardError = FileHandle.nullDevice
            try launch(host)
            defer { kill(host.processIdentifier, SIGKILL) }

            let client = try daemon.connect()
            defer { client.close() }
            var before: [String] = []
            // The agent handles recent documents and media, the browser host web pages: all three,
            // not the first two to arrive (the agent registers its two one after the other).
            let expected: Set<String> = ["org.baton.media", "org.baton.recent-document", "org.baton.web-browsing"]
            try await eventually(timeout: .seconds(120), "the agent and the browser host register") {
                before = (try? await client.handledTypes()) ?? []
                return Set(before) == expected
            }
            try await eventually(timeout: .seconds(120), "batond sees the session agent") {
                (try? await client.status().sessionAgent) == true
            }

            // Kill batond and start another one on the same bus and name: it knows no handlers.
            let bus = try daemon.rawConnection()
            defer { bus.close() }
            let reply = try await bus.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                           method: "GetConnectionUnixProcessID", arguments: [.string(daemon.busName)], timeout: .seconds(10))
            guard case .uint32(let pid)? = reply.first else {
                Issue.record("no process id for \(daemon.busName): \(reply)")
                return
            }
            kill(pid_t(pid), SIGKILL)
            try await eventually(timeout: .seconds(120), "batond's name is released") { try await !bus.nameHasOwner(daemon.busName) }
            let restarted = Process()
            restarted.executableURL = URL(fileURLWithPath: try Built.executable("batond"))
            restarted.arguments = ["--bus-address", daemon.bus.address, "--bus-name", daemon.busName, "--state-dir", daemon.stateDirectory,
                                   "--no-avahi", "--no-radio"]
            var daemonEnvironment = ProcessInfo.processInfo.environment
            daemonEnvironment["XDG_DATA_HOME"] = daemon.bus.directory.appendingPathComponent("data").path
            daemonEnvironment["XDG_DATA_DIRS"] = daemon.bus.directory.appendingPathComponent("data-dirs").path
            restarted.environment = daemonEnvironment
            restarted.standardOutput = FileHandle.nullDevice
            restarted.standardError = FileHandle.nullDevice
            try launch(restarted)
            defer { kill(restarted.processIdentifier, SIGKILL) }
            try await eventually(timeout: .seconds(120), "the new batond owns its name") { try await bus.nameHasOwner(daemon.busName) }

            var after: [String] = []
            do {
                try await eventually(timeout: .seconds(120), "the handled types come back") {
                    after = (try? await client.handledTypes()) ?? []
                    return Set(after) == Set(before)
                }
            } catch {
                Issue.record("after the restart batond knows \(after), before \(before)")
            }
            // The new batond knew no agent either: baton-agent's RegisterAgent came again.
            var agentSeen: Bool?
            do {
                try await eventually(timeout: .seconds(120), "the session agent comes back") {
                    agentSeen = try? await client.status().sessionAgent
                    return agentSeen == true
                }
            } catch {
                Issue.record("after the restart batond's status says SessionAgent \(agentSeen.map(String.init) ?? "absent")")
            }
            try? browserInput.fileHandleForWriting.close()
        }
    }
}
