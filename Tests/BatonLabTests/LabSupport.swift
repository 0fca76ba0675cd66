// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore
import BatonTestBus
import Foundation
import Testing

/// Lab tests need the QEMU lab (scripts/lab/run); on the host they are skipped.
enum Lab {
    static let isInside = ProcessInfo.processInfo.environment["LAB_VM"] == "1"
    static var controllers: Int { Int(ProcessInfo.processInfo.environment["LAB_CONTROLLERS"] ?? "") ?? 2 }
    static let companyID = Protocol.defaultCompanyID
    /// A fixed wall-clock time: epochs are injected, the VM clock does not matter.
    static let startSeconds: Int64 = 1_800_000_000 / 900 * 900 + 60

    /// Runs a guest helper (scripts/lab/guest is on PATH inside the lab) and returns its exit status.
    @discardableResult
    static func runHelper(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        try launch(process)
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// The ACL links of every lab controller (`hcitool con`: peer, handle, role): printed when a
    /// connect fails, since a leftover link changes what the kernel will dial.
    static func links() async -> String {
        var report = ""
        for index in 0..<controllers {
            let output = (try? await runTool("/usr/bin/hcitool", ["-i", "hci\(index)", "con"]))?.1 ?? "hcitool failed\n"
            report += "hci\(index): " + output.replacingOccurrences(of: "Connections:\n", with: "").trimmingCharacters(in: .whitespacesAndNewlines) + "\n"
        }
        return report
    }

    /// Drops every LE link of the lab controllers (`hcitool ledc`) and says which there were.
    /// bluetoothd keeps a link up after the sockets that made it close (its ATT channel holds it)
    /// and btvirt's links never time out, so a test would inherit the links of the tests before
    /// it: a CI run's pairing dial, carried over such a link, was refused (ECONNREFUSED in 0.0 s)
    /// or went unanswered (two 15 s timeouts). Each two-daemon test starts without them.
    static func dropLinks() -> String {
        var dropped: [String] = []
        for index in 0..<controllers {
            let listing = runSync("/usr/bin/hcitool", ["-i", "hci\(index)", "con"])
            for line in listing.split(separator: "\n") where line.contains(" LE ") {
                let words = line.split(separator: " ")
                guard let at = words.firstIndex(of: "handle"), at + 1 < words.count else { continue }
                _ = runSync("/usr/bin/hcitool", ["-i", "hci\(index)", "ledc", String(words[at + 1])])
                dropped.append("hci\(index): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        // The disconnections end asynchronously: the test starts once no controller lists a link.
        if !dropped.isEmpty {
            for _ in 0..<50 {
                let left = (0..<controllers).contains { runSync("/usr/bin/hcitool", ["-i", "hci\($0)", "con"]).contains(" LE ") }
                if !left { break }
                usleep(100_000)
            }
        }
        return dropped.isEmpty ? "none" : dropped.joined(separator: "; ")
    }

    /// The guest kernel's BUG, oops and warning reports so far, with their call traces (empty when
    /// there are none): after one, the Bluetooth stack hangs with the task that hit it.
    static func kernelProblems() -> String {
        let log = runSync("/bin/dmesg", [])
        guard log.range(of: #"kernel BUG at|BUG: |Oops: |general protection fault|list_(del|add) corruption|WARNING: CPU: "#,
                        options: .regularExpression) != nil else { return "" }
        let lines = log.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.firstIndex(where: {
            $0.range(of: #"kernel BUG at|BUG: |Oops: |general protection fault|list_(del|add) corruption|WARNING: CPU: "#, options: .regularExpression) != nil
        }) else { return "" }
        return lines[first..<min(lines.count, first + 40)].joined(separator: "\n")
    }

    /// Where each thread of a process is, for a daemon that stopped answering: the kernel's view
    /// (state, wait channel, the system call it is in and its kernel stack, from /proc) and then
    /// gdb's backtraces (the lab runs as root). Printed by a failing test, never asserted on.
    static func threadReport(pid: Int32) async -> String {
        var report = "threads of pid \(pid):\n"
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))?.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) } ?? []
        func read(_ path: String) -> String {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        for task in tasks {
            let base = "/proc/\(pid)/task/\(task)"
            let state = read("\(base)/stat").split(separator: " ").dropFirst(2).first.map(String.init) ?? "?"
            report += "- \(task) \(read("\(base)/comm")) state \(state) wchan \(read("\(base)/wchan")) syscall \(read("\(base)/syscall"))\n"
            report += read("\(base)/stack").split(separator: "\n").map { "    " + $0 }.joined(separator: "\n") + "\n"
        }
        let gdb = (try? await runTool("/usr/bin/timeout", ["120", "/usr/bin/gdb", "-p", "\(pid)", "-batch", "-nx",
                                                           "-ex", "set pagination off", "-ex", "thread apply all bt 30"]))
        report += "gdb:\n" + (gdb?.1 ?? "gdb did not run") + (gdb?.2.suffix(2_000) ?? "")
        return report
    }

    /// Runs a short program to its end and returns its standard output (at the start of a test).
    static func runSync(_ path: String, _ arguments: [String]) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let out = ChildPipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        guard (try? launch(process)) != nil else { return "" }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    static func secret(_ byte: UInt8, generation: UInt32 = 1) throws -> AdvertisingSecret {
        try AdvertisingSecret(bytes: [UInt8](repeating: byte, count: 32), generation: generation)
    }

    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

/// Records every event of one radio with the time it arrived, so tests can wait for an event
/// that came after a given point. The only consumer of the radio's event stream.
actor EventRecorder {
    struct Entry: Sendable {
        let index: Int
        let time: ContinuousClock.Instant
        let event: RadioEvent
    }

    private var entries: [Entry] = []

    init(_ radio: BlueZRadio) {
        let stream = radio.events()
        Task { await self.consume(stream) }
    }

    private func consume(_ stream: AsyncStream<RadioEvent>) async {
        for await event in stream {
            entries.append(Entry(index: entries.count, time: .now, event: event))
        }
    }

    var count: Int { entries.count }

    func events(from start: Int = 0) -> [Entry] { Array(entries[min(start, entries.count)...]) }

    /// The first event at or after `start` that satisfies `predicate`, waiting up to `timeout`.
    func first(from start: Int, within timeout: Duration, where predicate: @Sendable (RadioEvent) -> Bool) async -> Entry? {
        let deadline = ContinuousClock.now + timeout
        var next = start
        while true {
            while next < entries.count {
                if predicate(entries[next].event) { return entries[next] }
                next += 1
            }
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    func notices(from start: Int) -> [String] {
        events(from: start).compactMap { if case .notice(let text) = $0.event { text } else { nil } }
    }
}

extension RadioEvent {
    var report: AdvertisementReport? { if case .report(let report) = self { report } else { nil } }

    func carries(_ advert: [UInt8], companyID: UInt16 = Lab.companyID) -> Bool {
        report?.manufacturerData[companyID] == advert
    }
}

extension AdvertSender {
    /// The bytes of the last advertise action.
    static func advert(in actions: [Action]) -> [UInt8]? {
        for action in actions.reversed() { if case .advertise(let bytes) = action { return bytes } }
        return nil
    }
}

/// Today's key day (§3.1): the lab runs on the real clock.
let labKeyDay: UInt64 = AdvertisingSecret.day(ofEpoch: Protocol.epoch(unixSeconds: Int64(Date().timeIntervalSince1970)) - 1)

extension Lab {
    /// The lab's bluetoothd was started with scripts/lab/main-privacy.conf (LE privacy on).
    static var privacyConfigured: Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return false }
        for pid in entries where pid.allSatisfy(\.isNumber) {
            guard let cmdline = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                  let text = String(data: cmdline, encoding: .utf8), text.contains("bluetoothd") else { continue }
            if text.contains("main-privacy.conf") { return true }
        }
        return false
    }
}
