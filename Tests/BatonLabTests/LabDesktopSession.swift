// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation

/// beta's desktop session in the lab: Xvfb on a display of its own, dunst drawing on it and serving
/// org.freedesktop.Notifications on the lab bus (which doubles as the session bus), and the session
/// environment the agent and test programs get. Both servers log to the lab directory; dunst is
/// started again (up to 3 times) when it ends or does not answer, and every attempt is in the
/// timeline and the failure message.
final class LabDesktopSession: @unchecked Sendable {
    let environment: [String: String]
    private let lab: DaemonPair
    private var processes: [Process] = []
    private(set) var problems: [String] = []

    init(lab: DaemonPair) async throws {
        self.lab = lab
        let display = ":\(Int.random(in: 300...9000))"
        environment = ["DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": lab.address, "HOME": lab.directory.path, "PATH": "/usr/bin:/bin",
                       "XDG_DATA_DIRS": lab.directory.appendingPathComponent("data").path,
                       "XDG_DATA_HOME": lab.directory.appendingPathComponent("no-home").path,
                       "XDG_CONFIG_HOME": lab.directory.appendingPathComponent("config").path]
        let xvfbLog = lab.directory.appendingPathComponent("xvfb.log").path
        _ = try spawn("/usr/bin/Xvfb", [display, "-screen", "0", "800x600x24", "-nolisten", "tcp"], log: xvfbLog)
        if !(await lab.eventually(10) { FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X" + display.dropFirst()) }) {
            problems.append("Xvfb made no socket for \(display) in 10 s; its log:\n\(Self.read(xvfbLog))")
        }
        let configuration = lab.directory.appendingPathComponent("dunstrc")
        try "[global]\n    font = Monospace 8\n".write(to: configuration, atomically: true, encoding: .utf8)
        for attempt in 1...3 {
            let log = lab.directory.appendingPathComponent("dunst-\(attempt).log").path
            let dunst = try spawn("/usr/bin/dunst", ["-conf", configuration.path], log: log)
            if await lab.eventually(10, { await self.dunstctl(["count", "displayed"]) == "0" }) {
                answering = true
                if !problems.isEmpty { print("LAB the notification server needed \(attempt) starts:\n\(problems.joined(separator: "\n"))") }
                return
            }
            let state = dunst.isRunning ? "still running, not answering" : "ended with status \(dunst.terminationStatus)"
            problems.append("dunst (attempt \(attempt)) \(state); its log:\n\(Self.read(log))")
            lab.mark("dunst attempt \(attempt) failed: \(state)")
            if dunst.isRunning { kill(dunst.processIdentifier, SIGKILL); dunst.waitUntilExit() }
        }
        problems.append("Xvfb's log:\n\(Self.read(xvfbLog))")
    }

    /// Whether dunst answers; when not, `problems` says what each attempt saw.
    private(set) var answering = false

    func dunstctl(_ arguments: [String]) async -> String {
        ((try? await runTool("/usr/bin/env", environment.map { "\($0.key)=\($0.value)" } + ["/usr/bin/dunstctl"] + arguments))?.1 ?? "")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts a program in this session (its environment), logging its stderr to `log`.
    func spawn(_ path: String, _ arguments: [String], log: String? = nil) throws -> Process {
        let process = try TwoDaemonsLabTests().spawn(path, arguments, environment: environment, log: log)
        processes.append(process)
        return process
    }

    func stop() {
        for process in processes.reversed() where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    private static func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(none)" }
}
