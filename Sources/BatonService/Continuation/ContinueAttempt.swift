// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Synchronization

/// A Continue's failure before the bus edge, typed: the caller's words are written from it once
/// (`ContinuationService.failure(of:)`), and nothing is parsed back.
enum ContinueError: Error, Equatable, Sendable {
    /// The fetch (or a request before it) failed.
    case transfer(TransferError)
    /// The activity's document could not be pulled (what arrived is kept, so a retry resumes).
    case document(DocumentPullError)
    /// The document's edit session was not handed over (busy, conflict, claim not answered); a
    /// journalled claim is replayed by the next Continue.
    case session(EditSessionClaimError)
}

/// The Continue state machine of the core with the service's outcome and failure.
typealias ContinueRun = ContinueMachine<DeliveryOutcome, ContinueError>
/// How a Continue ended (the handler's answer, or why there was none).
typealias ContinueEnd = ContinueRun.End

/// One running Continue of a suggestion, which Dismiss (or its caller's task being cancelled) may
/// cancel: the caller gets "cancelled" at once, the work's task is cancelled (the document pull
/// closes its connection and partial file and ends), and a record that arrives afterwards is not
/// delivered. Once delivery began, cancelling has no effect (the handler already has it).
final class ContinueAttempt: Sendable {
    enum Result: Sendable {
        case finished(ContinueEnd)
        case cancelled
    }

    private enum Phase {
        case fetching
        case delivering
        case cancelled
    }

    private struct State {
        var phase = Phase.fetching
        var waiter: CheckedContinuation<Result, Never>?
        var early: Result?
        var work: Task<Void, Never>?
    }

    private let state = Mutex(State())
    /// Runs between cancelling the work and answering the caller (tests hold the cancel there).
    private let afterCancellingWork: @Sendable () -> Void

    init(afterCancellingWork: @escaping @Sendable () -> Void = {}) {
        self.afterCancellingWork = afterCancellingWork
    }

    /// Runs `work` in its own task and returns its result, or `.cancelled` as soon as `cancel()` is called.
    func run(_ work: @escaping @Sendable () async -> ContinueEnd) async -> Result {
        let task = Task {
            let end = await work()
            self.resume(.finished(end))
        }
        let cancelledEarly = state.withLock { state -> Bool in
            state.work = task
            return state.phase == .cancelled
        }
        if cancelledEarly { task.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Result? in
                    if let early = state.early { return early }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            self.cancel()
        }
    }

    /// Cancels unless delivery already began: the caller is answered and the work stops.
    func cancel() {
        let taken = state.withLock { state -> (work: Task<Void, Never>?, waiter: CheckedContinuation<Result, Never>?)? in
            guard state.phase == .fetching else { return nil }
            state.phase = .cancelled
            // The answer is settled before the work hears of the cancel: work that then ends at once
            // (a sleep or a pull that throws) answered first before, and the caller heard "finished".
            guard state.early == nil else { return (state.work, nil) }
            state.early = .cancelled
            defer { state.waiter = nil }
            return (state.work, state.waiter)
        }
        guard let taken else { return }
        taken.work?.cancel()
        afterCancellingWork()
        taken.waiter?.resume(returning: .cancelled)
    }

    /// Called before the record goes to a handler: false when cancelled (then nothing is delivered).
    func beginDelivery() -> Bool {
        state.withLock { state in
            guard state.phase == .fetching else { return false }
            state.phase = .delivering
            return true
        }
    }

    private func resume(_ result: Result) {
        let waiter = state.withLock { state -> CheckedContinuation<Result, Never>? in
            guard state.early == nil else { return nil }
            state.early = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }
}
