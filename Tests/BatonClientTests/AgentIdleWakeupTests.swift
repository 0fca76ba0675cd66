// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

/// Voluntary context switches per thread of `pid`: a thread that blocks again after waking counts
/// one, so a timer firing or a poll returning shows up; being preempted on a loaded machine does not.
private func voluntarySwitches(of pid: Int32) -> [String: Int] {
    let taskDirectory = "/proc/\(pid)/task"
    var switches: [String: Int] = [:]
    for thread in (try? FileManager.default.contentsOfDirectory(atPath: taskDirectory)) ?? [] {
        guard let status = try? String(contentsOfFile: "\(taskDirectory)/\(thread)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("voluntary_ctxt_switches:") }),
              let count = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) else { continue }
        switches[thread] = count
    }
    return switches
}

/// Wakeups of `pid`'s threads over `seconds` (threads that appeared count in full, ones that exited not at all).
private func wakeups(of pid: Int32, over seconds: Double) async throws -> Int {
    let before = voluntarySwitches(of: pid)
    try await Task.sleep(for: .seconds(seconds))
    return voluntarySwitches(of: pid).reduce(0) { total, entry in total + entry.value - (before[entry.key] ?? 0) }
}

/// A desktop agent must not wake periodically (issue 16): with the recent publisher on it sleeps
/// until the recently-used list or publishers.conf changes.
@Suite("baton-agent sleeps while nothing happens", .serialized)
struct AgentIdleWakeupTests {
    @Test("an idle agent with recent = on has no timer; a rewrite of the list wakes it")
    func idleAgentSleeps() async throws {
        try await withDaemon { daemon in
            let home = daemon.bus.directory.appendingPathComponent("agent-home")
            let config = home.appendingPathComponent("config"), data = home.appendingPathComponent("data")
            try FileManager.default.createDirectory(at: config.appendingPathComponent("baton"), withIntermediateDirectories: true)
            try "recent = on\n".write(to: config.appendingPathComponent("baton/publishers.conf"), atomically: true, encoding: .utf8)
            let log = daemon.bus.directory.appendingPathComponent("agent.log")
            FileManager.default.createFile(atPath: log.path, contents: nil)
            let agent = Process()
            agent.executableURL = URL(fileURLWithPath: try Built.executable("baton-agent"))
            agent.arguments = ["--bus", daemon.bus.address, "--bus-name", daemon.busName]
            agent.environment = ["DBUS_SESSION_BUS_ADDRESS": daemon.bus.address, "HOME": home.path, "XDG_CONFIG_HOME": config.path,
                                 "XDG_DATA_HOME": data.path, "XDG_DATA_DIRS": data.path, "PATH": "/usr/bin:/bin"]
            agent.standardError = try FileHandle(forWritingTo: log)
            try launch(agent)
            defer { kill(agent.processIdentifier, SIGKILL); agent.waitUntilExit() }
            try await eventually(timeout: .seconds(20), "the agent started") {
                ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains("for suggestions")
            }
            let started = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            // Without an inotify instance (a per-user limit) the agent goes on without the publisher.
            try #require(!started.contains("not following the recently-used list"), "\(started)")
            try await Task.sleep(for: .seconds(2))

            // Up to three 4 s windows: a periodic timer (the old once-a-second stat, libdispatch's 1 s
            // worker-pool monitor) wakes the agent 4 or more times in every one; late start-up work on a
            // loaded machine spills into the first only.
            var counts: [Int] = []
            for _ in 0..<3 {
                counts.append(try await wakeups(of: agent.processIdentifier, over: 4))
                if counts.last! <= 1 { break }
            }
            #expect(counts.min()! <= 1, "wakeups per 4 s idle window: \(counts)")

            // The control: GTK's rewrite of the list (a temporary file renamed over it) does wake it.
            let before = voluntarySwitches(of: agent.processIdentifier)
            let temporary = data.appendingPathComponent("recently-used.xbel.TMP123")
            try Data("<xbel version=\"1.0\"/>".utf8).write(to: temporary)
            #expect(rename(temporary.path, data.appendingPathComponent("recently-used.xbel").path) == 0)
            try await eventually(timeout: .seconds(10), "the agent woke for the list") {
                voluntarySwitches(of: agent.processIdentifier).reduce(0) { $0 + $1.value - (before[$1.key] ?? 0) } > 0
            }
        }
    }
}
