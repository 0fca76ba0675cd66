// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A real `baton-agent` process: it serves Agent1 to the daemon (Manager1.RegisterAgent) and
/// launches apps through GIO from `dataDirectory`'s applications/ (its XDG_DATA_DIRS). The same
/// private bus is batond's bus and the session bus, as in a `--session` setup.
final class SessionAgentProcess {
    private let process = Process()

    /// `configDirectory`: XDG_CONFIG_HOME (mimeapps.list chooses the default browser).
    init(busAddress: String, daemonBusName: String = "org.baton", dataDirectory: String, configDirectory: String? = nil) throws {
        let bundle = Bundle.main.bundleURL.deletingLastPathComponent()
        let candidates = [bundle.appendingPathComponent("baton-agent").path, packageRoot.appendingPathComponent(".build/debug/baton-agent").path]
        let executable = try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0) }, "build baton-agent first")
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--bus", busAddress, "--bus-name", daemonBusName]
        process.environment = ["DBUS_SESSION_BUS_ADDRESS": busAddress, "XDG_DATA_DIRS": dataDirectory,
                               "XDG_DATA_HOME": dataDirectory + "/no-home", "PATH": "/usr/bin:/bin", "HOME": dataDirectory,
                               "XDG_CONFIG_HOME": configDirectory ?? dataDirectory + "/no-config"]
        process.standardError = FileHandle.nullDevice
        try launch(process)
    }

    deinit { stop() }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
