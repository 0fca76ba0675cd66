// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// An idle batond must not wake periodically (issue 12): no timer between epoch boundaries.
@Suite("BatonServiceTests: an idle batond sleeps", .serialized)
struct BatondIdleWakeupTests {
    /// Voluntary context switches per thread: a thread that blocks again after waking counts one, so a
    /// timer firing or a poll returning shows up; being preempted on a loaded machine does not.
    private static func voluntarySwitches(of pid: Int32) -> [String: Int] {
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

    @Test func anIdleDaemonHasNoTimerFiringBetweenEpochs() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let daemon = try await RunningBatond.start(on: bus, ["--save-timeout", "0.2"])
        defer { daemon.stop() }
        // Some work first, so every pool the daemon uses has started its threads.
        let path = try await daemon.client.createActivity(title: "idle check")
        _ = try await daemon.client.activity(path, "BecomeCurrent")
        try await Task.sleep(for: .seconds(2))
        try await Self.expectNoPeriodicWakeups(daemon)
    }

    /// The same with the radio on (a fake bluetoothd on a private system bus): once the adapter is
    /// ready the status reads its LE privacy from the kernel (KernelPrivacyReader; on this host the
    /// socket fails, the read still runs). That read used to go through DispatchQueue.global(), which
    /// starts libdispatch's 1 s worker-pool monitor for good: the lab's idle batond woke every second.
    @Test func anIdleDaemonWithItsRadioReadyHasNoTimerFiringBetweenEpochs() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let system = try TestBus()
        defer { system.stop() }
        let bluez = try await FakeBlueZ(bus: system, instances: 4)
        defer { bluez.connection.close() }
        let daemon = try await RunningBatond.start(on: bus, ["--save-timeout", "0.2", "--adapter", "hci0"], systemBus: system.address)
        defer { daemon.stop() }
        let privacyRead = try await eventually(timeout: .seconds(120)) {
            let status = try await daemon.client.manager("GetStatus").first?.asDictionary
            return status?["LEPrivacy"] != nil
        }
        #expect(privacyRead, "the radio never became ready on the fake bluetoothd (no LEPrivacy in GetStatus)")
        guard privacyRead else { return }
        let path = try await daemon.client.createActivity(title: "idle check")
        _ = try await daemon.client.activity(path, "BecomeCurrent")
        try await Task.sleep(for: .seconds(2))
        try await Self.expectNoPeriodicWakeups(daemon)
    }

    private static func expectNoPeriodicWakeups(_ daemon: RunningBatond) async throws {
        // Up to three 4 s windows: a periodic timer (libdispatch's 1 s worker-pool monitor, the old
        // 5 s tick) wakes the daemon in every one of them (4 or more each); late work from the start on
        // a loaded machine spills into the first only. One wakeup is allowed: an epoch boundary (every
        // 15 minutes) may fall inside a window.
        let window = 4.0
        var counts: [Int] = []
        for _ in 0..<3 {
            let before = Self.voluntarySwitches(of: daemon.pid)
            try await Task.sleep(for: .seconds(window))
            let after = Self.voluntarySwitches(of: daemon.pid)
            // Threads that appeared count in full; threads that exited (idle Dispatch workers) do not.
            counts.append(after.reduce(0) { total, entry in total + entry.value - (before[entry.key] ?? 0) })
            if counts.last! <= 1 { break }
        }
        #expect(counts.min()! <= 1, "wakeups per \(window) s idle window: \(counts)")
    }
}
