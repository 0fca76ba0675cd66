// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// One logind session of an ordinary user in the lab's systemd boot (`scripts/lab/run --init
/// systemd`): getty's autologin logged `baton-desk` in on tty1 and `baton-other` on tty2, and each
/// login shell runs scripts/lab/guest/desk-session, which runs each job this test writes to
/// ~/lab/TTY/ inside that session (so polkit and logind see the processes where a person's desktop
/// programs would be).
struct DeskSession: Sendable {
    let user: String
    let home: String
    let tty: String
    let spool: URL
    /// logind's session id (XDG_SESSION_ID of the login shell).
    let id: String

    static func home(of user: String) -> String {
        guard let entry = getpwnam(user), let directory = entry.pointee.pw_dir else { return "/home/\(user)" }
        return String(cString: directory)
    }

    /// Waits until the session's runner listens (autologin happens while the lab starts BlueZ).
    static func open(tty: String, user: String) async throws -> DeskSession {
        let home = home(of: user)
        let spool = URL(fileURLWithPath: home).appendingPathComponent("lab/\(tty)")
        let ready = spool.appendingPathComponent("ready").path
        for _ in 0..<600 {
            if let id = try? String(contentsOfFile: ready, encoding: .utf8) {
                return DeskSession(user: user, home: home, tty: tty, spool: spool, id: id.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let units = (try? await runTool("/bin/systemctl", ["--no-pager", "status", "getty@\(tty).service"]))?.1 ?? ""
        let sessions = (try? await runTool("/bin/loginctl", ["--no-pager", "list-sessions"]))?.1 ?? ""
        throw DeskSessionError.noSession("no session runner on \(tty) after 120 s\n\(units)\n\(sessions)")
    }

    private static let counter = Mutex(0)

    private func submit(_ label: String, _ script: String) throws -> URL {
        let number = Self.counter.withLock { value -> Int in value += 1; return value }
        let base = spool.appendingPathComponent("\(number)-\(label)")
        let staging = base.appendingPathExtension("partial")
        try ("set -u\n" + script + "\n").write(to: staging, atomically: false, encoding: .utf8)
        chmod(staging.path, 0o644)
        guard rename(staging.path, base.appendingPathExtension("cmd").path) == 0 else { throw DeskSessionError.noSession("cannot queue \(label)") }
        return base
    }

    /// Runs `script` in the session to its end: (status, stdout, stderr).
    func run(_ label: String, _ script: String, timeout seconds: Int = 120) async throws -> (Int32, String, String) {
        let base = try submit(label, script)
        for _ in 0..<(seconds * 10) {
            if let status = try? String(contentsOfFile: base.path + ".status", encoding: .utf8) {
                return (Int32(status.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1, Self.read(base.path + ".out"), Self.read(base.path + ".err"))
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw DeskSessionError.noSession("\(label) on \(tty) did not end in \(seconds) s: \(Self.read(base.path + ".err"))")
    }

    /// Starts a long-running program in the session (`command` is exec'd); its output is `log(job)`.
    func start(_ label: String, _ command: String, environment: [String: String] = [:]) async throws -> Job {
        let exports = environment.sorted { $0.key < $1.key }.map { "export \($0.key)=\(Self.quote($0.value))" }.joined(separator: "\n")
        let base = try submit(label, "echo $$ > \(Self.quote(spool.path))/$(basename \"$0\" .sh).pid\n\(exports)\nexec \(command)")
        for _ in 0..<600 {
            if let pid = (try? String(contentsOfFile: base.path + ".pid", encoding: .utf8)).flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) {
                return Job(label: label, base: base.path, pid: pid)
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw DeskSessionError.noSession("\(label) did not start on \(tty): \(Self.read(base.path + ".err"))")
    }

    struct Job: Sendable {
        let label: String
        let base: String
        let pid: Int32
        var output: String { DeskSession.read(base + ".out") }
        var log: String { "\(label) stdout:\n\(output)\n\(label) stderr:\n\(DeskSession.read(base + ".err"))" }
        var isRunning: Bool { kill(pid, 0) == 0 }
        func stop() { kill(pid, SIGTERM) }
        /// The logind session the process belongs to (from its cgroup: session-ID.scope).
        var sessionScope: String {
            let cgroup = DeskSession.read("/proc/\(pid)/cgroup").trimmingCharacters(in: .whitespacesAndNewlines)
            return cgroup.split(separator: "/").first { $0.hasPrefix("session-") && $0.hasSuffix(".scope") }.map(String.init) ?? "none in \(cgroup)"
        }
    }

    /// logind's view of the session (`loginctl show-session`).
    func properties() async throws -> [String: String] {
        let (_, out, _) = try await runTool("/bin/loginctl", ["show-session", id, "-p", "Active", "-p", "Seat", "-p", "Type", "-p", "Remote",
                                                             "-p", "Name", "-p", "Class", "-p", "VTNr", "-p", "State", "-p", "TTY"])
        return Self.parse(out)
    }

    /// logind's view of the session's user (`loginctl show-user`): State is what polkit reads.
    func userProperties() async throws -> [String: String] {
        let (_, out, _) = try await runTool("/bin/loginctl", ["show-user", user, "-p", "State", "-p", "Display", "-p", "Sessions"])
        return Self.parse(out)
    }

    static func parse(_ out: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in out.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { values[parts[0]] = parts[1] }
        }
        return values
    }

    static func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}

enum DeskSessionError: Error, CustomStringConvertible {
    case noSession(String)
    var description: String { if case .noSession(let text) = self { text } else { "" } }
}

/// Issue 26's last proof: the desktop test as a person runs it. In the lab's systemd boot an
/// ordinary user, baton-desk (not root, not in group baton), is logged in on tty1, the active
/// session, and another, baton-other, on tty2, a session that is not active; batond runs as root on
/// the system bus with the shipped bus policy, polkitd with the shipped actions. In tty1's session:
/// Xvfb, dunst, baton-agent and a handler app (examples/python/reader.py); alpha publishes over the
/// air, the notification appears in dunst, `dunstctl action 0` clicks Continue and the handler gets
/// the activity. The control: the same click in tty2's session (its own Xvfb, dunst and agent) is
/// refused by polkit, and that agent says so in a notification. (Not a second session of
/// baton-desk: polkit counts a session active when any session of its user is.)
/// Alone: `scripts/lab/test --init systemd -- --filter DesktopSessionLabTests`.
@Suite(.serialized, .enabled(if: Lab.isInside && ProcessInfo.processInfo.environment["LAB_INIT"] == "systemd",
                             "needs the lab's systemd boot (scripts/lab/run --init systemd)"))
struct DesktopSessionLabTests {
    static let systemBus = "unix:path=/run/dbus/system_bus_socket"

    /// A desktop in `session`: Xvfb on `display`, dunst on the user's session bus.
    func desktop(in session: DeskSession, display: Int, lab: DaemonPair) async throws -> [DeskSession.Job] {
        let xvfb = try await session.start("xvfb", "/usr/bin/Xvfb :\(display) -screen 0 800x600x24 -nolisten tcp")
        #expect(await lab.eventually(30) { FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(display)") }, "\(xvfb.log)")
        let configuration = session.home + "/lab/dunstrc"
        try "[global]\n    font = Monospace 8\n".write(toFile: configuration, atomically: true, encoding: .utf8)
        chmod(configuration, 0o644)
        let dunst = try await session.start("dunst", "/usr/bin/dunst -conf \(configuration)", environment: ["DISPLAY": ":\(display)"])
        #expect(await lab.eventually(30) { await dunstctl(session, "count displayed") == "0" }, "\(dunst.log)")
        return [xvfb, dunst]
    }

    func dunstctl(_ session: DeskSession, _ arguments: String) async -> String {
        ((try? await session.run("dunstctl", "/usr/bin/dunstctl \(arguments)"))?.1 ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(.enabled(if: TwoDaemonsLabTests.desktopAvailable, "needs dunst, dunstctl and Xvfb (scripts/install-deps)"))
    func anOrdinaryUserInTheActiveSessionContinuesByClickingTheNotification() async throws {
        // The two sessions, as logind sees them (and polkit asks it).
        let active = try await DeskSession.open(tty: "tty1", user: "baton-desk")
        let inactive = try await DeskSession.open(tty: "tty2", user: "baton-other")
        let activeState = try await active.properties(), inactiveState = try await inactive.properties()
        #expect(activeState["Active"] == "yes" && activeState["Seat"] == "seat0" && activeState["Remote"] == "no"
                && activeState["Name"] == "baton-desk" && activeState["Type"] == "tty", "\(activeState)")
        #expect(inactiveState["Active"] == "no" && inactiveState["Seat"] == "seat0" && inactiveState["Name"] == "baton-other",
                "\(inactiveState)")
        #expect(try await active.userProperties()["State"] == "active")
        #expect(try await inactive.userProperties()["State"] == "online")
        for session in [active, inactive] {
            let (_, identity, _) = try await session.run("id", "id -u; id -Gn")
            let lines = identity.split(separator: "\n").map(String.init)
            let groups = (lines.last ?? "").split(separator: " ")
            #expect(lines.first != "0" && !groups.contains("baton") && !groups.contains("sudo"), "\(session.user) must be ordinary: \(identity)")
        }

        // Two batond on the system bus, as root (as batond.service runs it): beta as org.baton.
        let lab = try DaemonPair(systemBus: Self.systemBus, busNames: ["beta": "org.baton"])
        defer { lab.stop() }
        try lab.start(name: "alpha", adapter: "hci0", extraArguments: ["--port", "47321"])
        try lab.start(name: "beta", adapter: "hci1", extraArguments: ["--away-after", "300"])
        #expect(await lab.eventually(20) { (try? await lab.cli("bt-pair", "beta", ["list"]))?.0 == 0 }, "\(lab.log("beta"))")
        try await TwoDaemonsLabTests().pairOverTCP(lab)

        // tty1's desktop: Xvfb, dunst on the user's session bus, baton-agent, the app.
        var jobs = try await desktop(in: active, display: 5, lab: lab)
        let agent = try await active.start("agent", product("baton-agent"))
        let reader = FileManager.default.currentDirectoryPath + "/examples/python/reader.py"
        let handler = try await active.start("reader", "/usr/bin/python3 -u \(reader) --bus system --bus-name org.baton --handler-only")
        jobs += [agent, handler]
        defer { for job in jobs { job.stop() } }
        #expect(await lab.eventually(30) { handler.output.contains("handler /org/example/Reader/handler") }, "\(handler.log)")
        // Both belong to tty1's logind session.
        #expect(agent.sessionScope == "session-\(active.id).scope" && handler.sessionScope == "session-\(active.id).scope",
                "\(agent.sessionScope) \(handler.sessionScope)")
        let logs = { "beta:\n\(lab.log("beta"))\n\(agent.log)\n\(handler.log)" }

        // alpha's app (root, on the system bus) publishes the book the user reads.
        let continued = Mutex<[String]>([])
        let source = try DBusConnection(bus: .address(Self.systemBus))
        defer { source.close() }
        try await source.export([DBusInterface("org.baton.ActivitySource1", methods: [
            DBusMethod("WillSave", in: [.init("activity", "o")], out: [.init("changes", "a{sv}")]) { _ in [.propertyDictionary([:])] },
            DBusMethod("WasContinued", in: [.init("activity", "o"), .init("device", "s")]) { call in
                continued.withLock { $0.append(call.arguments[1].stringValue ?? "") }
                return []
            },
        ])], at: "/source")
        let userInfo: [String: DBusValue] = ["page": .int64(2), "book": .string("Dune"), "position": .double(0.25)]
        func publish(_ title: String) async throws -> String {
            let options: [String: DBusValue] = ["Version": .int64(1), "Source": .objectPath("/source"), "NeedsSave": .boolean(true)]
            let reply = try await source.call(destination: "org.baton.alpha", path: "/org/baton", interface: "org.baton.Manager1", method: "CreateActivity",
                                              arguments: [.string("org.example.Reader.reading"), .string(title), .propertyDictionary(userInfo),
                                                          .propertyDictionary(options)], timeout: .seconds(10))
            let path = try #require(reply.first?.objectPathValue)
            _ = try await source.call(destination: "org.baton.alpha", path: path, interface: "org.baton.Activity1", method: "BecomeCurrent", timeout: .seconds(10))
            return path
        }
        func continues() -> [Substring] { handler.output.split(separator: "\n").filter { $0.hasPrefix("Continue ") } }

        // 1. The active session: the notification appears on beta's dunst, the user clicks Continue.
        let first = try await publish("Dune, page 2")
        #expect(await lab.eventually(40) { await dunstctl(active, "count displayed") == "1" }, "\(logs())")
        _ = await dunstctl(active, "action 0")
        #expect(await lab.eventually(30) { continues().count == 1 }, "\(logs())")
        let delivered = String(continues().first ?? "")
        #expect(delivered.hasPrefix("Continue org.example.Reader.reading 'Dune, page 2' {") && delivered.contains("'book': 'Dune'")
                && delivered.contains("'page': 2") && delivered.contains("'position': 0.25"), "\(delivered)")
        #expect(await lab.eventually(20) { continued.withLock { $0 } == ["beta"] }, "\(logs())")
        #expect(await lab.eventually(20) { await dunstctl(active, "count displayed") == "0" }, "\(logs())")
        #expect(!(await dunstctl(active, "history")).contains("Could not continue here"))
        _ = try await source.call(destination: "org.baton.alpha", path: first, interface: "org.baton.Activity1", method: "Invalidate", timeout: .seconds(10))

        // 2. The control: tty2's session is not active. Its agent shows the next activity on its own
        //    dunst and its user clicks Continue; polkit refuses org.baton.continue, nothing reaches
        //    the app, and the agent says why in a notification.
        jobs += try await desktop(in: inactive, display: 6, lab: lab)
        let outsider = try await inactive.start("agent", product("baton-agent"))
        jobs.append(outsider)
        #expect(outsider.sessionScope == "session-\(inactive.id).scope", "\(outsider.sessionScope)")
        _ = try await publish("Dune, page 3")
        #expect(await lab.eventually(40) { await dunstctl(inactive, "count displayed") == "1" }, "\(logs())\n\(outsider.log)")
        _ = await dunstctl(inactive, "action 0")
        var history = ""
        #expect(await lab.eventually(30) {
            _ = await dunstctl(inactive, "close-all")
            history = await dunstctl(inactive, "history")
            return history.contains("Could not continue here")
        }, "\(history)\n\(logs())\n\(outsider.log)")
        #expect(history.contains("Not permitted: only root, group baton and the active local desktop session may continue")
                && history.contains("org.baton.continue"), "\(history)")
        try await Task.sleep(for: .seconds(2))
        #expect(continues().count == 1, "\(handler.log)")
        #expect(continued.withLock { $0 } == ["beta"])
    }
}
