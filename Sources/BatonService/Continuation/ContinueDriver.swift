// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonStore
import Synchronization

// One Continue run: its typed failure, the cancel handle Dismiss holds (`ContinueAttempt`), the
// driver of the core's machine (`runContinue`) and the relay of a document's progress to the caller.

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

/// Drives the core's Continue machine (`ContinueMachine`): performs each action it returns and
/// feeds what came of it back as the next event, until it finishes. The path runs one way:
/// Continuation asks the activities (WillContinue, versions, inbox, delivery, FailedToContinue)
/// and the transfer (one fetch whose channel it holds, the document on it, the report on it);
/// neither calls back.
extension ContinuationService {
    /// At most this many progress signals a second, besides the first and the last.
    static let progressInterval = Duration.milliseconds(100)

    func progressRelay(to caller: String?) -> ProgressRelay {
        ProgressRelay(caller: caller, board: board, interval: Self.progressInterval)
    }

    /// Where the activity of a Continue comes from.
    enum ContinueSource {
        /// Fetched now: FetchActivity(h, revision), or FetchActivityOfVersions with the accepting handler's versions.
        case fetch(revision: UInt32)
        /// Held (prefetched) for suggestion `number`, with its document pulled already; the report
        /// goes on a new connection without holding up the delivery.
        case held(ActivityRecord, document: PulledDocument?, number: Int, typeHash: TypeHash)
    }

    /// One Continue: WillContinue first (nothing is fetched for nobody), then one TLS session:
    /// the fetch with the versions of the handler that accepted, the type and version checks, the
    /// document (FetchDocument on the same channel, §6.5), its edit session, delivery,
    /// ActivityContinued when delivered. The handler that accepted hears FailedToContinue with the
    /// category of every way it ends without the activity.
    func runContinue(from member: RosterMember, type: String, source: ContinueSource, uid: UInt32, caller: String?,
                     attempt: ContinueAttempt? = nil) async -> ContinueEnd {
        let held: (record: ActivityRecord, document: PulledDocument?, number: Int)?
        let revision: UInt32
        let typeHash: TypeHash
        // A held record's document was pulled already: only a fetch reports progress.
        let relay: ProgressRelay?
        switch source {
        case .fetch(let wanted):
            held = nil
            revision = wanted
            // The type hash is keyed with the sender's secret (§3).
            typeHash = self.typeHash(type, of: member)
            relay = progressRelay(to: caller)
        case .held(let record, let document, let number, let hash):
            held = (record, document, number)
            revision = record.revision
            typeHash = hash
            relay = nil
        }
        defer { relay?.finish() }
        let progress: @Sendable (UInt64, UInt64) -> Void
        if let relay { progress = relay.report(activityType: type) } else { progress = { _, _ in } }
        var machine = ContinueRun(activityType: type, heldVersion: held?.record.version)
        var ticket: HandlerTicket?
        var fetched: FetchedActivity?
        var inbox: DocumentInbox?
        var sessions: EditSessions?
        var document = held?.document
        defer { fetched?.close() }
        var pending = machine.handle(.start)
        while !pending.isEmpty {
            let action = pending.removeFirst()
            var event: ContinueRun.Event?
            switch action {
            case .askHandler:
                switch await activities.willContinue(type: type, from: member.name, uid: uid) {
                case .refused(let outcome): event = .handlerRefused(outcome)
                case .accepted(let accepted):
                    ticket = accepted
                    // That handler's declaration, not the user's newest: one registered since
                    // WillContinue does not decide for the one that gets the activity.
                    event = .handlerAccepted(versions: await activities.versionDeclarations(of: accepted))
                }
            case .fetch(let versions):
                inbox = await activities.documentInbox(uid: uid)
                do throws(TransferError) {
                    let answer = try await transfer.fetchForContinue(member: member.deviceID, typeHash: typeHash, revision: revision, versions: versions)
                    fetched = answer
                    event = .fetched(type: answer.record.activityType, version: answer.record.version)
                } catch {
                    let (category, detail) = Self.handlerCategory(of: error)
                    event = .fetchFailed(category, detail: detail, .transfer(error))
                }
            case .pullDocument:
                // The document arrives whole and checked before the handler gets anything.
                guard let fetched, let inbox else {
                    event = .documentPulled(needsClaim: false)
                    break
                }
                do throws(DocumentPullError) {
                    document = try await fetched.document.pull(into: inbox, progress: progress)
                    if document != nil { sessions = await activities.editSessionsForContinue() }
                    event = .documentPulled(needsClaim: sessions != nil)
                } catch {
                    event = .documentFailed(Self.handlerCategory(of: error), detail: Self.documentFailure(error).message, .document(error))
                }
            case .claimSession:
                // The document's edit session moves here before any handler sees the document.
                guard let pulled = document, let inbox, let sessions else { break }
                switch await claimEditSession(of: pulled, from: member.deviceID, activityType: type, uid: uid, typeHash: typeHash,
                                              inbox: inbox, sessions: sessions, progress: progress) {
                case .success(let granted):
                    document = granted
                    event = .sessionClaimed
                case .failure(let error):
                    event = .sessionRefused(Self.handlerCategory(of: error), detail: Self.claimFailure(error).message, .session(error))
                }
            case .checkRing:
                // Removed here, or a new identity here, while it was fetched (§7.4, §7.5): the ring
                // left delivers nothing (ResetIdentityAttackTests).
                if let fetched, !fetched.document.stillInRing() {
                    event = .memberLeft
                } else if !(attempt?.beginDelivery() ?? true) {
                    // Cancelled while fetching: nothing reaches a handler, nothing is reported.
                    event = .cancelled
                } else {
                    event = .stillInRing
                }
            case .deliver:
                guard let ticket, let record = held?.record ?? fetched?.record else { break }
                let outcome = await activities.deliver(activity: record, document: document, from: member.name, to: ticket)
                event = .delivered(outcome, handed: outcome == .delivered)
            case .report:
                if let fetched {
                    await fetched.reportContinued()
                } else if let held {
                    await carry(book.settle(number: held.number))
                    let transfer = self.transfer, log = self.log, device = member.deviceID
                    // The source hears WasContinued as for a cold Continue, without holding up the delivery.
                    Task {
                        do { try await transfer.sendContinued(member: device, typeHash: typeHash, revision: revision) } catch {
                            log("batond: ActivityContinued to \(device.shortForm) after a prefetch failed: \(error)")
                        }
                    }
                }
                event = .reported
            case .fail(let category, let detail):
                // The channel closes before the handler hears (as the source sees it end).
                fetched?.close()
                if let ticket { await activities.failedToContinue(ticket, category, detail: detail) }
            case .finish(let end):
                fetched?.close()
                return end
            }
            if let event { pending += machine.handle(event) }
        }
        // Only when an action could not be performed (a precondition of the machine's own order broken).
        return .failed(.transfer(.protocolError("the continue stopped before it finished")))
    }
}

/// Relays a pull's progress to the Continue caller in order, rate-limited: the first and the
/// last report always go, others at most one per `interval`. Reports come from the puller
/// synchronously; one task sends them, so they arrive in order.
final class ProgressRelay: Sendable {
    private let continuation: AsyncStream<DocumentProgress>.Continuation
    private let interval: Duration
    private let last = Mutex<ContinuousClock.Instant?>(nil)

    init(caller: String?, board: (any SuggestionBoard)?, interval: Duration) {
        let (stream, continuation) = AsyncStream.makeStream(of: DocumentProgress.self, bufferingPolicy: .bufferingNewest(16))
        self.continuation = continuation
        self.interval = interval
        guard let caller, let board else {
            continuation.finish()
            return
        }
        Task {
            for await progress in stream { await board.documentProgress(progress, to: caller) }
        }
    }

    /// The puller's progress callback.
    func report(activityType: String) -> @Sendable (UInt64, UInt64) -> Void {
        { [self] received, total in
            let now = ContinuousClock.now
            let due = last.withLock { last -> Bool in
                guard received == total || last.map({ now - $0 >= interval }) ?? true else { return false }
                last = now
                return true
            }
            if due { continuation.yield(DocumentProgress(activityType: activityType, received: received, total: total)) }
        }
    }

    func finish() { continuation.finish() }
}
