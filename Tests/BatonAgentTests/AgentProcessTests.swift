// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonDBus
import BatonTestBus
import Foundation
import Testing

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

private func agentExecutable() throws -> String {
    let bundle = Bundle.main.bundleURL.deletingLastPathComponent()
    let candidates = [bundle.appendingPathComponent("baton-agent").path, packageRoot.appendingPathComponent(".build/debug/baton-agent").path]
    return try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0) }, "build baton-agent first")
}

private func installed(_ tool: String) -> Bool { FileManager.default.isExecutableFile(atPath: tool) }

@Suite("BatonAgentTests: the baton-agent executable and the files that start it", .serialized)
struct AgentProcessTests {
    /// Agent1.Launch finds a handler through GIO in the session's XDG_DATA_DIRS and starts it with
    /// its Exec line (field codes expanded by GIO, not by us).
    @Test func agent1LaunchStartsTheHandlerAppFromItsDesktopFile() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let data = bus.directory.appendingPathComponent("data")
        let applications = data.appendingPathComponent("applications")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        let marker = bus.directory.appendingPathComponent("launched").path
        let script = bus.directory.appendingPathComponent("reader.sh")
        try "#!/bin/sh\necho \"reader started with $# arguments\" > \(marker)\n".write(to: script, atomically: true, encoding: .utf8)
        chmod(script.path, 0o755)
        try """
            [Desktop Entry]
            Type=Application
            Name=Test Reader
            Exec=\(script.path) %U
            X-Baton-ActivityTypes=org.example.Reader.reading;org.example.Reader.listening;
            NoDisplay=true
            """.write(to: applications.appendingPathComponent("org.example.TestReader.desktop"), atomically: true, encoding: .utf8)
        let environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address, "XDG_DATA_DIRS": data.path,
                           "XDG_DATA_HOME": bus.directory.appendingPathComponent("home").path, "PATH": "/usr/bin:/bin",
                           "HOME": bus.directory.path]
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: try agentExecutable())
        // No batond on this bus: the agent logs that and still serves Agent1.
        agent.arguments = ["--bus", bus.address, "--bus-name", "org.baton.test.absent"]
        agent.environment = environment
        agent.standardError = FileHandle.nullDevice
        try launch(agent)
        defer { kill(agent.processIdentifier, SIGKILL) }
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        #expect(await eventually(timeout: .seconds(15)) { (try? await client.nameHasOwner(AgentService.busName)) == true })

        func call(_ method: String, _ type: String) async throws -> [DBusValue] {
            try await client.call(destination: AgentService.busName, path: AgentService.path, interface: AgentService.interface,
                                  method: method, arguments: [.string(type)], timeout: .seconds(10))
        }
        #expect(try await call("GetHandlers", "org.example.Reader.listening") == [.stringArray(["org.example.TestReader.desktop"])])
        #expect(try await call("GetHandlers", "org.example.Other") == [.stringArray([])])
        #expect(try await call("Launch", "org.example.Reader.reading") == [.string("org.example.TestReader.desktop")])
        #expect(await eventually(timeout: .seconds(10)) { (try? String(contentsOfFile: marker, encoding: .utf8)) == "reader started with 0 arguments\n" })
        do {
            _ = try await call("Launch", "org.example.Other")
            Issue.record("Launch of an unhandled type succeeded")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.Failed")
        }

        // A second agent in the same session leaves the first one alone.
        let second = try await runProgram(try agentExecutable(), ["--bus", bus.address, "--bus-name", "org.baton.test.absent"],
                                          environment: environment)
        #expect(second.status == 0)
        #expect(second.stderr.contains("another baton-agent already runs"))
        let usage = try await runProgram(try agentExecutable(), ["--bogus"], environment: environment)
        // Issue 26: 64 like every tool, one line and where help is, no Swift debug text.
        #expect(usage.status == 64)
        #expect(usage.stderr == "baton-agent: unknown option --bogus\nTry 'baton-agent --help'.\n", "\(usage.stderr)")
    }

    @Test(.enabled(if: installed("/usr/bin/desktop-file-validate")))
    func theAutostartFileIsAValidHiddenDesktopEntry() async throws {
        let file = packageRoot.appendingPathComponent("desktop/baton-agent.desktop").path
        let result = try await runProgram("/usr/bin/desktop-file-validate", [file], mergeStandardError: true)
        #expect(result.status == 0 && result.stdout.isEmpty, "\(result.stdout)")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        for line in ["Exec=baton-agent", "NoDisplay=true", "Type=Application"] { #expect(text.contains("\n" + line + "\n"), "\(line)") }
        #expect(!text.contains("OnlyShowIn"))
        // Issue 26: the entry the notifications name (desktop-entry=baton-agent) is this one, in
        // share/applications; the autostart entry stays out of systemd-managed sessions (the unit runs there).
        #expect(text.contains("\nX-GNOME-UsesNotifications=true\n"))
        let autostart = packageRoot.appendingPathComponent("desktop/autostart/baton-agent.desktop").path
        let checked = try await runProgram("/usr/bin/desktop-file-validate", [autostart], mergeStandardError: true)
        #expect(checked.status == 0 && checked.stdout.isEmpty, "\(checked.stdout)")
        let autostartText = try String(contentsOfFile: autostart, encoding: .utf8)
        for line in ["Exec=baton-agent", "NoDisplay=true", "X-GNOME-HiddenUnderSystemd=true", "X-systemd-skip=true"] {
            #expect(autostartText.contains("\n" + line + "\n"), "\(line)")
        }
    }

    @Test(.enabled(if: installed("/usr/bin/systemd-analyze")))
    func theUserUnitVerifies() async throws {
        let text = try String(contentsOfFile: packageRoot.appendingPathComponent("desktop/baton-agent.service").path, encoding: .utf8)
        for line in ["PartOf=graphical-session.target", "After=graphical-session.target", "WantedBy=graphical-session.target",
                     "Restart=on-failure", "ExecStart=/usr/bin/baton-agent"] {
            #expect(text.contains("\n" + line + "\n"), "\(line)")
        }
        // Verified as installed, with the built binary standing in for /usr/bin/baton-agent.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-agent-unit-\(UUID().uuidString)")
        let runtime = directory.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        chmod(runtime.path, 0o700)
        let unit = directory.appendingPathComponent("baton-agent.service")
        try text.replacingOccurrences(of: "/usr/bin/baton-agent", with: try agentExecutable()).write(to: unit, atomically: true, encoding: .utf8)
        let result = try await runProgram("/usr/bin/systemd-analyze", ["verify", "--user", unit.path],
                                          environment: ["XDG_RUNTIME_DIR": runtime.path, "PATH": "/usr/bin:/bin"], mergeStandardError: true)
        // systemd-analyze exits 0 on mere warnings: any output is a finding.
        #expect(result.status == 0 && result.stdout.isEmpty, "\(result.stdout)")
    }
}
