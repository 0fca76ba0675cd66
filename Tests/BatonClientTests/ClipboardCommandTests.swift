// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCommandLine
import BatonPublishers
import BatonSway
import BatonTestBus
import BatonWaylandFakes
import Foundation
import Testing

/// `baton clipboard enable|disable|status` and doctor's clipboard line, run as the installed
/// program would be, in sessions of each kind (docs/clipboard.md).
@Suite("baton clipboard", .serialized)
struct ClipboardCommandTests {
    /// A user's environment: its own config and runtime directories, and the session's variables.
    func environment(_ session: [String: String]) throws -> (environment: [String: String], home: URL) {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("clipboard-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home.appendingPathComponent("run"), withIntermediateDirectories: true)
        var environment = ProcessInfo.processInfo.environment
        for key in ["DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE"] { environment[key] = nil }
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent("config").path
        environment["XDG_RUNTIME_DIR"] = home.appendingPathComponent("run").path
        environment.merge(session) { $1 }
        return (environment, home)
    }

    @Test("enable and disable write publishers.conf; status says what is on, in words and in JSON")
    func enableDisableStatus() async throws {
        let (environment, home) = try environment(["DISPLAY": ":7"])
        defer { try? FileManager.default.removeItem(at: home) }
        let baton = try Built.executable("baton")
        func run(_ arguments: [String]) async throws -> ToolResult { try await runTool(baton, arguments, environment: environment) }

        var result = try await run(["clipboard"])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("clipboard: off (baton clipboard enable turns it on)\n"), "\(result.stdout)")
        #expect(result.stdout.contains("session clipboard: X11 display :7"))
        #expect(!result.stdout.contains("offered to the ring"))

        result = try await run(["clipboard", "enable"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("clipboard: on"))
        // No agent runs for this made-up user: said, with the command that starts it.
        #expect(result.stdout.contains("agent: baton-agent does not run in this session; start it (systemctl --user enable --now baton-agent)"))
        #expect(result.stdout.contains("offered to the ring: nothing"))
        let file = home.appendingPathComponent("config/baton/publishers.conf")
        #expect(try String(contentsOf: file, encoding: .utf8).contains("clipboard = on\n"))
        #expect(try await run(["publishers"]).stdout.contains("clipboard on\n"))

        // An agent's status file. A process of this account named baton-agent stands for a running
        // agent (sleep, started through a link of that name): the status is believed only for it.
        let agentLink = home.appendingPathComponent("baton-agent")
        try FileManager.default.createSymbolicLink(atPath: agentLink.path, withDestinationPath: "/bin/sleep")
        let standIn = Process()
        standIn.executableURL = agentLink
        standIn.arguments = ["600"]
        standIn.standardOutput = FileHandle.nullDevice
        standIn.standardError = FileHandle.nullDevice
        try launch(standIn)
        defer {
            // SIGKILL: a child of the test process may inherit SIGTERM blocked.
            kill(standIn.processIdentifier, SIGKILL)
            standIn.waitUntilExit()
        }
        let status = ClipboardAgentStatus(pid: standIn.processIdentifier, sessionClipboard: "X11 display :7", registered: true,
                                          offer: "text: text/plain;charset=utf-8 12 bytes", taken: nil)
        #expect(status.save(environment: environment))
        let mode = try FileManager.default.attributesOfItem(atPath: home.appendingPathComponent("run/baton/clipboard-agent").path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        result = try await run(["clipboard", "status"])
        #expect(result.stdout.contains("agent: baton-agent runs (pid \(standIn.processIdentifier)), sharing with batond"), "\(result.stdout)")
        #expect(result.stdout.contains("offered to the ring: text: text/plain;charset=utf-8 12 bytes"))
        result = try await run(["--json", "clipboard"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["Enabled"] as? Bool == true && json["AgentRunning"] as? Bool == true && json["Registered"] as? Bool == true)
        #expect(json["SessionClipboard"] as? String == "X11 display :7")
        #expect(json["Offer"] as? String == "text: text/plain;charset=utf-8 12 bytes")
        #expect(json["Taken"] is NSNull && json["Problem"] is NSNull && json["Note"] is NSNull)
        // Why the last copy was not offered.
        var refused = status
        refused.note = "the last copy was not offered: report is a folder; folders are not shared, copy the files in it"
        #expect(refused.save(environment: environment))
        result = try await run(["clipboard"])
        #expect(result.stdout.contains("note: the last copy was not offered: report is a folder"), "\(result.stdout)")
        let noted = try #require(try JSONSerialization.jsonObject(with: Data(try await run(["--json", "clipboard"]).stdout.utf8)) as? [String: Any])
        #expect((noted["Note"] as? String)?.hasPrefix("the last copy was not offered") == true)
        #expect(status.save(environment: environment))

        // The file of an agent that is gone is not believed, nor one naming another process (this
        // test's own, init).
        for other in [Int32.max - 1, getpid(), 1] {
            var dead = status
            dead.pid = other
            #expect(dead.save(environment: environment))
            #expect(try await run(["clipboard"]).stdout.contains("agent: baton-agent does not run in this session"), "pid \(other)")
        }

        result = try await run(["clipboard", "disable"])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("clipboard: off"))
        #expect(try String(contentsOf: file, encoding: .utf8).contains("clipboard = off\n"))
        for bad in [["clipboard", "on"], ["clipboard", "enable", "extra"]] {
            #expect(try await run(bad).status == 64, "\(bad)")
        }
    }

    @Test("in a Wayland session: the compositor is asked; GNOME's goes through XWayland (DISPLAY), another without data control cannot, and status and doctor say why and what to do")
    func waylandSessions() async throws {
        let empty = try TestBus()
        defer { empty.stop() }
        let baton = try Built.executable("baton")
        func doctorLine(_ environment: [String: String]) async throws -> [String: String] {
            let result = try await runTool(baton, ["--bus", empty.address, "--json", "doctor", "--bluez-bus", empty.address,
                                                   "--session-bus", empty.address], environment: environment)
            let findings = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: String]])
            return try #require(findings.first { $0["Check"] == "clipboard" })
        }

        // GNOME's Mutter offers no data control: a stand-in compositor that announces only what Mutter
        // does (gtk_shell1 tells it). The agent uses XWayland's DISPLAY there; without DISPLAY it cannot.
        let mutter = try FakeCompositor(globals: [("wl_seat", 7), ("wl_data_device_manager", 3), ("gtk_shell1", 5)])
        defer { mutter.stop() }
        let wayland = mutter.runtimeDirectory + "/" + mutter.display
        let (noDisplay, noDisplayHome) = try environment(["WAYLAND_DISPLAY": wayland])
        defer { try? FileManager.default.removeItem(at: noDisplayHome) }
        var result = try await runTool(baton, ["clipboard", "enable"], environment: noDisplay)
        #expect(result.stdout.contains("session clipboard: Wayland display \(wayland)\n"), "\(result.stdout)")
        #expect(result.stdout.contains("problem: GNOME's Wayland compositor (Mutter) lets no Wayland program watch or set the clipboard"), "\(result.stdout)")
        #expect(result.stdout.contains("systemctl --user import-environment DISPLAY XAUTHORITY"))
        var line = try await doctorLine(noDisplay)
        #expect(line["Result"] == "warning")
        #expect(line["Detail"]?.contains("DISPLAY is not set") == true, "\(line)")
        #expect(line["Fix"]?.contains("import-environment DISPLAY XAUTHORITY") == true && line["Fix"]?.contains("baton clipboard disable") == true, "\(line)")

        let (environment, home) = try environment(["WAYLAND_DISPLAY": wayland, "DISPLAY": ":0", "XAUTHORITY": "/nonexistent"])
        defer { try? FileManager.default.removeItem(at: home) }
        result = try await runTool(baton, ["clipboard", "enable"], environment: environment)
        #expect(result.stdout.contains("session clipboard: X11 display :0 (XWayland in GNOME's Wayland session)\n"), "\(result.stdout)")
        // No agent runs for this made-up user, but nothing stands in the session's way.
        #expect(!result.stdout.contains("problem:"), "\(result.stdout)")
        #expect(try await runTool(baton, ["clipboard", "disable"], environment: environment).status == 0)
        line = try await doctorLine(environment)
        #expect(line["Result"] == "ok")
        #expect(line["Detail"] == "the clipboard can be shared here (X11 display :0 (XWayland in GNOME's Wayland session)); it is off (baton clipboard enable turns it on)",
                "\(line)")

        // Another compositor without data control: it cannot, and which compositors can.
        let other = try FakeCompositor(globals: [("wl_seat", 7), ("wl_data_device_manager", 3)])
        defer { other.stop() }
        let (otherEnvironment, otherHome) = try self.environment(["WAYLAND_DISPLAY": other.runtimeDirectory + "/" + other.display, "DISPLAY": ":0"])
        defer { try? FileManager.default.removeItem(at: otherHome) }
        result = try await runTool(baton, ["clipboard", "enable"], environment: otherEnvironment)
        #expect(result.stdout.contains("problem: this Wayland compositor lets no other program watch or set the clipboard"), "\(result.stdout)")
        line = try await doctorLine(otherEnvironment)
        #expect(line["Result"] == "warning")
        #expect(line["Fix"]?.contains("sway") == true && line["Fix"]?.contains("GNOME through XWayland") == true, "\(line)")

        // A compositor with data control (headless sway offers wlr-data-control): it works there.
        let sway = try await HeadlessSway.start()
        defer { sway.stop() }
        let (swayEnvironment, swayHome) = try self.environment(["WAYLAND_DISPLAY": sway.runtimeDirectory + "/" + sway.display])
        defer { try? FileManager.default.removeItem(at: swayHome) }
        result = try await runTool(baton, ["clipboard"], environment: swayEnvironment)
        #expect(result.stdout.contains("session clipboard: Wayland display \(sway.runtimeDirectory)/\(sway.display) (zwlr_data_control_manager_v1)"),
                "\(result.stdout)")
        line = try await doctorLine(swayEnvironment)
        #expect(line["Result"] == "ok")
        #expect(line["Detail"]?.hasPrefix("the clipboard can be shared here (Wayland display") == true, "\(line)")

        // In an X11 session, with the clipboard off: it can work here, and how to turn it on.
        let (x11, x11Home) = try self.environment(["DISPLAY": ":3"])
        defer { try? FileManager.default.removeItem(at: x11Home) }
        let x11Line = try await doctorLine(x11)
        #expect(x11Line["Result"] == "ok")
        #expect(x11Line["Detail"] == "the clipboard can be shared here (X11 display :3); it is off (baton clipboard enable turns it on)")
    }
}
