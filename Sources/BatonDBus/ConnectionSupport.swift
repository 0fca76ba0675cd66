// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch
import Glibc

// Helpers of ConnectionCore: what it keeps per call awaiting a reply, per subscription and per
// handler waiting to start. All of them are confined to the connection queue.

/// The connection's signal routes; a subscriber waiting for a name's owner waits on a continuation.
typealias ConnectionRoutes = SignalRoutes<CheckedContinuation<Void, Never>>

/// A result to send back for one incoming call.
typealias CallOutcome = Result<[DBusValue], DBusError>

/// What the connection keeps for one of its calls awaiting a reply (`ReplyBook` decides which
/// reply ends it). Touched only on the connection queue.
final class PendingReply {
    /// Fires the NoReply error when the reply is late; cancelled when the call finishes.
    var timer: (any DispatchSourceTimer)?
    var completion: ((Result<[DBusValue], any Error>) -> Void)?

    init(completion: @escaping (Result<[DBusValue], any Error>) -> Void) { self.completion = completion }

    /// Delivers the result once; later calls are ignored.
    func finish(_ result: Result<[DBusValue], any Error>) {
        guard let completion else { return }
        self.completion = nil
        timer?.cancel()
        timer = nil
        completion(result)
    }
}

/// Lets `call` cancel a request whose send may or may not have happened yet. Queue-confined.
final class CallCancellation: @unchecked Sendable {
    var cancelled = false
    /// The serial of the call, once sent.
    var serial: UInt32?
}

struct Subscription {
    let rule: DBusMatchRule
    /// Runs on the connection queue, inside dispatch; must not block.
    let handler: @Sendable (DBusSignal) -> Void
    let onClose: (@Sendable () -> Void)?
    let isInternal: Bool
}

/// A call's handler, waiting for its caller's earlier calls (DBusConnectionConfiguration.runningPerSender).
struct PendingHandler {
    let address: ReplyAddress
    let expectedSignature: String?
    let work: @Sendable () async throws -> [DBusValue]
    /// Runs instead of `work` when the connection closes first (closes the descriptors lent to it).
    let discard: @Sendable () -> Void
}

/// Which replies may end a call (pure; `ReplyBook` applies it to every reply, oversized and
/// malformed ones included). A reply must come from whom the call went to when that is known (the bus
/// itself, or a unique name called directly): on a session bus any client of the same user can send
/// one with a guessed serial. An error from the bus itself also ends a call: the bus answers for a
/// callee that is gone, disconnected mid-call, or that policy or limits keep the call from (only the
/// bus can send as its own name).
enum ReplyMatch {
    static func accepts(expectedSender: String?, sender: String?, isError: Bool) -> Bool {
        expectedSender == nil || sender == expectedSender || (isError && sender == busName)
    }

    /// Who must answer a call to `destination`, when that is known.
    static func expectedSender(forCallTo destination: String?) -> String? {
        guard let destination, destination == busName || destination.hasPrefix(":") else { return nil }
        return destination
    }
}

extension DBusMessage {
    /// A reply or error message as the caller sees it (its arguments read within the standard budget).
    var callResult: Result<[DBusValue], any Error> {
        let arguments: [DBusValue]
        do {
            arguments = try self.arguments(budget: .standard)
        } catch {
            return .failure(error)
        }
        if kind == .error {
            for value in arguments { if case .unixFD(let descriptor) = value { DescriptorNumbers.close(descriptor) } }
            return .failure(DBusError(name: errorName ?? DBusError.failedName, message: arguments.first?.stringValue ?? ""))
        }
        return .success(arguments)
    }
}
