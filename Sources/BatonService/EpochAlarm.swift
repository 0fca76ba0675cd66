// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonCore
import Synchronization

/// When the daemon next needs the clock: the next epoch boundary (advert rotation, matcher window,
/// DNS-SD name), or earlier when a part asks for a retry. Pure, so the schedule is tested without waiting.
public enum EpochAlarm {
    /// Seconds from `now` until the next wake: the next multiple of the epoch length strictly after
    /// `now` and after the start of `lastEpoch` (the last one rotated to: after a clock step back the
    /// daemon waits until time passes it again), or `retryAt` when it comes first. Never less than 1,
    /// so a retry that is already due cannot spin.
    public static func secondsUntilWake(nowSeconds now: Int64, lastEpoch: UInt64? = nil, retryAt: Int64? = nil,
                                        epochSeconds: Int64 = Protocol.epochSeconds) -> Int64 {
        var boundary = now < 0 ? 0 : (now / epochSeconds + 1) * epochSeconds
        if let lastEpoch, lastEpoch < UInt64(Int64.max / epochSeconds) {
            boundary = max(boundary, (Int64(lastEpoch) + 1) * epochSeconds)
        }
        let wake = min(boundary, retryAt ?? boundary)
        return max(wake - now, 1)
    }

    /// Runs `fire` at every wake until cancelled. Sleeps on a monotonic clock but re-reads the
    /// wall clock after each sleep: a clock stepped while asleep only moves the next wake (a step
    /// forward past a boundary fires at once, a step back sleeps again until the real boundary).
    /// `sleep` and `retryAt` are injected so tests count wakes on a fake clock.
    public static func run(clock: any WallClock, retryAt: @escaping @Sendable () async -> Int64?,
                           sleep: @escaping @Sendable (Int64) async -> Void = { seconds in try? await Task.sleep(for: .seconds(seconds)) },
                           fire: @escaping @Sendable () async -> Void) async {
        var lastEpoch = Protocol.epoch(unixSeconds: clock.unixSeconds())
        while !Task.isCancelled {
            let pending = await retryAt()
            await sleep(secondsUntilWake(nowSeconds: clock.unixSeconds(), lastEpoch: lastEpoch, retryAt: pending))
            if Task.isCancelled { return }
            let now = clock.unixSeconds()
            let epoch = Protocol.epoch(unixSeconds: now)
            // A wake with neither a new epoch nor a due retry follows a clock step backwards:
            // nothing to do, sleep again.
            // Only forwards: a step back into an earlier epoch must not rotate to it.
            guard epoch > lastEpoch || (pending.map { now >= $0 } ?? false) else { continue }
            lastEpoch = max(epoch, lastEpoch)
            await fire()
        }
    }
}

/// The system clock plus an offset that only `--simulate-epochs` moves: a benchmark runs an hour
/// of epochs in a moment. Without that option the offset stays 0 and this reads `time()`.
final class ShiftableWallClock: WallClock {
    private let offset = Atomic<Int64>(0)
    func unixSeconds() -> Int64 { Int64(time(nil)) + offset.load(ordering: .relaxed) }
    func advance(_ seconds: Int64) { offset.add(seconds, ordering: .relaxed) }
}
