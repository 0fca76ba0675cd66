import BatonCore
import Synchronization

/// The document side of Continue: progress for the caller, and what a failed pull means to it.
extension ContinuationService {
    /// At most this many progress signals a second, besides the first and the last.
    static let progressInterval = Duration.milliseconds(100)

    func progressRelay(to caller: String?) -> ProgressRelay {
        ProgressRelay(caller: caller, board: board, interval: Self.progressInterval)
    }

    /// A document that could not be pulled, in the categories of "Continuation failures"
    /// (docs/dbus-api.md): a break is `interrupted` and retryable (the bytes received are kept).
    static func documentFailure(_ error: DocumentPullError) -> ServiceFailure {
        switch error {
        case .interrupted(let why): .continuation(.interrupted, "the document transfer broke (a retry resumes it): \(why)")
        case .refused(let frame): Self.failure(.remote(frame))
        case .protocolError(let why): .failed("protocol error in the document transfer: \(why)")
        case .digestMismatch: .failed("the document did not match its digest")
        case .store(.diskFull): .failed("no space left for the document")
        case .store(let error): .failed("the document cannot be stored: \(error)")
        }
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
