// SPDX-License-Identifier: LGPL-2.1-or-later
@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
import Glibc

/// A global executor for Swift concurrency whose idle threads sleep until there is work.
///
/// Why: on Linux the default global executor is libdispatch's global (non-overcommit) queues, and
/// the first worker thread of such a queue starts libdispatch's worker-pool monitor, a 1 s timer that
/// runs for the life of the process. An idle daemon then wakes 60 times a minute for nothing
/// (issue 12). Here idle workers block in `pthread_cond_wait` with no timeout; only a delayed job
/// (`Task.sleep`) makes them wait with a deadline, the earliest one pending.
///
/// Jobs run in arrival order (priorities are not ordered); `threadCount` workers, started on first use.
final class QuietExecutor: TaskExecutor, SchedulingExecutor, @unchecked Sendable {
    private struct DelayedJob {
        var deadline: timespec
        var job: UnownedJob
    }

    private let threadCount: Int
    private var mutex = pthread_mutex_t()
    private var workAvailable = pthread_cond_t()
    // Guarded by `mutex`.
    private var ready: [UnownedJob] = []
    private var readyHead = 0
    private var delayed: [DelayedJob] = []  // sorted by deadline, earliest last
    private var started = false

    init(threadCount: Int) {
        self.threadCount = max(1, threadCount)
        pthread_mutex_init(&mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)  // deadlines ignore wall-clock steps
        pthread_cond_init(&workAvailable, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        pthread_mutex_lock(&mutex)
        startWorkersIfNeeded()
        ready.append(unowned)
        pthread_cond_signal(&workAvailable)
        pthread_mutex_unlock(&mutex)
    }

    func enqueue<C: Clock>(_ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C) {
        let unowned = UnownedJob(job)
        let deadline = Self.monotonicDeadline(after: Self.nanoseconds(in: delay))
        pthread_mutex_lock(&mutex)
        startWorkersIfNeeded()
        let index = delayed.firstIndex { Self.isEarlier($0.deadline, than: deadline) } ?? delayed.endIndex
        delayed.insert(DelayedJob(deadline: deadline, job: unowned), at: index)
        // The new job may be due before the deadline the waiting workers sleep towards.
        pthread_cond_broadcast(&workAvailable)
        pthread_mutex_unlock(&mutex)
    }

    func enqueue<C: Clock>(_ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C) {
        enqueue(job, after: clock.now.duration(to: instant), tolerance: tolerance, clock: clock)
    }

    /// Must hold `mutex`.
    private func startWorkersIfNeeded() {
        guard !started else { return }
        started = true
        for _ in 0..<threadCount {
            let box = Unmanaged.passRetained(self)
            var thread = pthread_t()
            let result = pthread_create(&thread, nil, { context in
                let executor = Unmanaged<QuietExecutor>.fromOpaque(context!).takeRetainedValue()
                executor.workLoop()  // never returns: the pool lives as long as the process
            }, box.toOpaque())
            if result == 0 { pthread_detach(thread) } else { box.release() }
        }
    }

    private func workLoop() -> Never {
        pthread_mutex_lock(&mutex)
        while true {
            moveDueJobs()
            if readyHead < ready.count {
                let job = ready[readyHead]
                readyHead += 1
                if readyHead == ready.count {
                    ready.removeAll(keepingCapacity: true)
                    readyHead = 0
                }
                pthread_mutex_unlock(&mutex)
                job.runSynchronously(on: asUnownedTaskExecutor())
                pthread_mutex_lock(&mutex)
            } else if var deadline = delayed.last?.deadline {
                _ = pthread_cond_timedwait(&workAvailable, &mutex, &deadline)
            } else {
                pthread_cond_wait(&workAvailable, &mutex)
            }
        }
    }

    /// Must hold `mutex`.
    private func moveDueJobs() {
        guard let earliest = delayed.last else { return }
        let now = Self.monotonicDeadline(after: 0)
        guard !Self.isEarlier(now, than: earliest.deadline) else { return }
        while let last = delayed.last, !Self.isEarlier(now, than: last.deadline) {
            ready.append(delayed.removeLast().job)
        }
    }

    private static func nanoseconds<D: DurationProtocol>(in duration: D) -> Int64 {
        guard let swiftDuration = duration as? Duration else { return 0 }
        let (seconds, attoseconds) = swiftDuration.components
        guard seconds > 0 || (seconds == 0 && attoseconds > 0) else { return 0 }
        let capped = min(seconds, Int64.max / 1_000_000_000 - 1)
        return capped * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    private static func monotonicDeadline(after nanoseconds: Int64) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let total = Int64(now.tv_nsec) + nanoseconds % 1_000_000_000
        now.tv_sec += Int(nanoseconds / 1_000_000_000 + total / 1_000_000_000)
        now.tv_nsec = Int(total % 1_000_000_000)
        return now
    }

    private static func isEarlier(_ left: timespec, than right: timespec) -> Bool {
        left.tv_sec != right.tv_sec ? left.tv_sec < right.tv_sec : left.tv_nsec < right.tv_nsec
    }
}

/// Installs `QuietExecutor` as the process's global executor; call first thing in `main`, before any
/// task starts. The main executor stays the platform's (Dispatch's main queue, which has no monitor).
/// The executor protocols are still SPI in Swift 6.3, so they stay internal to this module.
public func installQuietGlobalExecutor() {
    _createExecutors(factory: QuietExecutorFactory.self)
}

enum QuietExecutorFactory: ExecutorFactory {
    static var mainExecutor: any MainExecutor { PlatformExecutorFactory.mainExecutor }
    static let defaultExecutor: any TaskExecutor = QuietExecutor(
        threadCount: max(2, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
}
