// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTestBus
import BatonDBus
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// Records the sleeps the alarm asks for and moves the fake clock by them (or by a scripted step).
final class FakeSleeper: Sendable {
    let clock: FakeWallClock
    private let slept = Mutex<[Int64]>([])
    /// Clock steps applied during the next sleeps instead of the requested duration.
    private let steps = Mutex<[Int64]>([])

    init(clock: FakeWallClock, steps: [Int64] = []) {
        self.clock = clock
        self.steps.withLock { $0 = steps }
    }

    var sleeps: [Int64] { slept.withLock { $0 } }

    func sleep(_ seconds: Int64) async {
        slept.withLock { $0.append(seconds) }
        let step = steps.withLock { $0.isEmpty ? seconds : $0.removeFirst() }
        clock.advance(step)
        await Task.yield()
    }
}

@Suite("BatonServiceTests: a quiet daemon (issue 12)")
struct QuietDaemonTests {
    @Test func nextWakeIsTheNextEpochBoundary() {
        let epoch = Protocol.epochSeconds
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: 0) == epoch)
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: 1) == epoch - 1)
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: epoch - 1) == 1)
        // On the boundary itself the rotation just happened: the next one is a whole epoch away.
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: 7 * epoch) == epoch)
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: 7 * epoch + 100) == epoch - 100)
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: -5) == 5)
    }

    @Test func anEarlierRetryComesFirstButNeverSpins() {
        let now: Int64 = 10 * Protocol.epochSeconds + 10
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: now, retryAt: now + 30) == 30)
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: now, retryAt: now + 5_000) == Protocol.epochSeconds - 10)
        // A retry already due (or a clock stepped back past it) waits one second, not zero.
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: now, retryAt: now - 100) == 1)
        #expect(EpochAlarm.secondsUntilWake(nowSeconds: now, retryAt: now) == 1)
    }

    /// A simulated hour on a fake clock: four epoch boundaries, four wakes, nothing in between.
    @Test func anIdleHourWakesOncePerEpoch() async {
        let clock = FakeWallClock()
        let sleeper = FakeSleeper(clock: clock)
        let fires = Mutex(0)
        let start = clock.unixSeconds()
        let alarm = Task {
            await EpochAlarm.run(clock: clock, retryAt: { nil }, sleep: { await sleeper.sleep($0) }, fire: {
                if fires.withLock({ $0 += 1; return $0 }) == 4 { withUnsafeCurrentTask { $0?.cancel() } }
            })
        }
        await alarm.value
        #expect(fires.withLock { $0 } == 4)
        #expect(sleeper.sleeps.count == 4)
        #expect(clock.unixSeconds() - start <= 3_600)
        #expect(clock.unixSeconds() % Protocol.epochSeconds == 0)
    }

    /// A wall clock stepped back while asleep: no rotation into the past, the alarm sleeps again
    /// until the boundary as the clock now sees it; a step forward past a boundary fires at once.
    @Test func clockStepsOnlyMoveTheNextWake() async {
        let clock = FakeWallClock()
        let toBoundary = EpochAlarm.secondsUntilWake(nowSeconds: clock.unixSeconds())
        // Sleep 1 lands an hour early (clock stepped back); sleep 2 reaches the boundary; sleep 3
        // is overtaken by a step of two epochs forward.
        let sleeper = FakeSleeper(clock: clock, steps: [toBoundary - 3_600, 3_600, 2 * Protocol.epochSeconds + 7])
        let epochs = Mutex<[UInt64]>([])
        let alarm = Task {
            await EpochAlarm.run(clock: clock, retryAt: { nil }, sleep: { await sleeper.sleep($0) }, fire: {
                let count = epochs.withLock { $0.append(Protocol.epoch(unixSeconds: clock.unixSeconds())); return $0.count }
                if count == 2 { withUnsafeCurrentTask { $0?.cancel() } }
            })
        }
        await alarm.value
        let fired = epochs.withLock { $0 }
        #expect(sleeper.sleeps.count == 3)
        #expect(sleeper.sleeps[1] == 3_600)
        #expect(fired.count == 2 && fired[1] == fired[0] + 2)
    }

    @Test func aDueRetryFiresBetweenBoundaries() async {
        let clock = FakeWallClock()
        let sleeper = FakeSleeper(clock: clock)
        let retry = clock.unixSeconds() + 1
        let fires = Mutex(0)
        let alarm = Task {
            await EpochAlarm.run(clock: clock, retryAt: { fires.withLock { $0 } == 0 ? retry : nil },
                                 sleep: { await sleeper.sleep($0) }, fire: {
                fires.withLock { $0 += 1 }
                withUnsafeCurrentTask { $0?.cancel() }
            })
        }
        await alarm.value
        #expect(sleeper.sleeps == [1])
        #expect(fires.withLock { $0 } == 1)
    }

    /// The whole process, idle on a private bus with the radio and Avahi off: its threads sleep.
    /// Generous bound: libdispatch's own worker-pool monitor wakes every process that uses it once a
    /// second (4 here); the old 5 s tick and 500 ms bus poll made it about 37 in this window.
    @Test func anIdleBatondHardlyWakes() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let daemon = try await RunningBatond.start(on: bus)
        defer { daemon.stop() }
        try await Task.sleep(for: .seconds(1))
        let before = try #require(voluntarySwitches(daemon.pid))
        try await Task.sleep(for: .seconds(4))
        let after = try #require(voluntarySwitches(daemon.pid))
        let woke = wakes(from: before, to: after)
        #expect(woke <= 12, "woke \(woke) times in 4 s")
    }
}

/// Voluntary context switches per thread of `pid` (each is the thread going to sleep again).
func voluntarySwitches(_ pid: Int32) -> [String: Int]? {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
    var result: [String: Int] = [:]
    for task in tasks {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { continue }
        for line in text.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") {
            result[task] = Int(line.split(separator: "\t").last.map(String.init) ?? "")
        }
    }
    return result
}

/// Wakes between two samples, over the threads alive in both (idle Dispatch workers exit meanwhile)
/// plus every switch of threads that appeared.
func wakes(from before: [String: Int], to after: [String: Int]) -> Int {
    after.reduce(0) { total, entry in total + entry.value - (before[entry.key] ?? 0) }
}

@Suite("BatonServiceTests: the hidden benchmark option")
struct SimulatedEpochsOptionTests {
    @Test func parsesOnlyACountInRangeAndStaysOutOfTheUsage() throws {
        guard case .run(let options) = try DaemonOptions.parse(["--session", "--state-dir", "/tmp/s", "--simulate-epochs", "4"],
                                                               environment: [:]) else {
            Issue.record("expected a run command")
            return
        }
        #expect(options.simulatedEpochs == 4)
        guard case .run(let plain) = try DaemonOptions.parse(["--session", "--state-dir", "/tmp/s"], environment: [:]) else { return }
        #expect(plain.simulatedEpochs == 0)
        for bad in ["-1", "x", "100001"] {
            #expect(throws: DaemonOptions.UsageError.self) {
                try DaemonOptions.parse(["--session", "--state-dir", "/tmp/s", "--simulate-epochs", bad], environment: [:])
            }
        }
        #expect(!DaemonOptions.usage.contains("simulate"))
    }
}
