// SPDX-License-Identifier: GPL-2.0-or-later
import Synchronization

/// Mutual exclusion across suspension points: one frame is written (or read) at a time per channel,
/// even when several tasks send, because TLS records of two frames must not interleave.
/// Waiters are served in arrival order.
final class AsyncLock: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func lock() async {
        let acquired = state.withLock { state in
            if state.locked { return false }
            state.locked = true
            return true
        }
        if acquired { return }
        await withCheckedContinuation { continuation in
            let acquiredMeanwhile = state.withLock { state in
                if !state.locked {
                    state.locked = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if acquiredMeanwhile { continuation.resume() }
        }
    }

    /// Hands the lock to the oldest waiter, if any.
    func unlock() {
        let next: CheckedContinuation<Void, Never>? = state.withLock { state in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }

    func withLock<Result: Sendable, Failure: Error>(
        _ body: () async throws(Failure) -> Result
    ) async throws(Failure) -> Result {
        await lock()
        defer { unlock() }
        return try await body()
    }
}
