// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch
import Glibc

let busName = "org.freedesktop.DBus"
let busPath = "/org/freedesktop/DBus"
let busInterface = "org.freedesktop.DBus"

extension ConnectionCore {
    // MARK: - Outgoing method calls

    /// Sends a method call; `completion` runs on the queue, in reply order with incoming signals.
    /// Must run on the queue.
    @discardableResult
    func sendCall(destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue],
                  timeoutMilliseconds: Int32,
                  completion: @escaping (Result<[DBusValue], any Error>) -> Void) -> PendingReply? {
        do throws(DBusError) {
            guard !isClosed else { throw .disconnected() }
            if let destination { try DBusValidate.busName(destination) }
            try DBusValidate.path(path)
            if let interface { try DBusValidate.interface(interface) }
            try DBusValidate.member(method)
            var message = DBusMessage.methodCall(destination: destination, path: path, interface: interface, member: method)
            let serial = try send(&message, body: arguments)
            let reply = PendingReply(completion: completion)
            reply.expectedSender = ReplyMatch.expectedSender(forCallTo: destination)
            inflight[serial] = reply
            reply.onFinish = { [weak self] in self?.inflight[serial] = nil }
            // Reading paused for a full outbox goes on while a reply is awaited (calls read are held).
            if outboxIsFull { queue.async { [weak self] in self?.resumeForReplies() } }
            if timeoutMilliseconds != Int32.max {
                let timer = DispatchSource.makeTimerSource(queue: queue)
                let milliseconds = timeoutMilliseconds < 0 ? ConnectionCore.defaultTimeoutMilliseconds : Int(timeoutMilliseconds)
                timer.schedule(deadline: .now() + .milliseconds(milliseconds))
                timer.setEventHandler { [weak reply] in
                    reply?.finish(.failure(DBusError(name: DBusError.noReplyName, message: ConnectionCore.noReplyText)))
                }
                timer.activate()
                reply.timer = timer
            }
            return reply
        } catch {
            completion(.failure(error))
            return nil
        }
    }

    /// What a call waits for its reply when the caller gives no timeout (libdbus's and sd-bus's 25 s).
    static let defaultTimeoutMilliseconds = 25_000
    static let noReplyText = "Did not receive a reply. Possible causes include: the remote application did not send a reply, "
        + "the message bus security policy blocked the reply, the reply timeout expired, or the network connection was broken."

    /// A reply or error message as the caller sees it.
    static func result(of message: DBusMessage) -> Result<[DBusValue], any Error> {
        let arguments: [DBusValue]
        do {
            arguments = try message.arguments(budget: .standard)
        } catch {
            return .failure(error)
        }
        if message.kind == .error {
            for value in arguments { if case .unixFD(let descriptor) = value { _ = close(descriptor) } }
            return .failure(DBusError(name: message.errorName ?? DBusError.failedName, message: arguments.first?.stringValue ?? ""))
        }
        return .success(arguments)
    }

    func cancel(_ reply: PendingReply) {
        reply.finish(.failure(CancellationError()))
    }

    func call(destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue],
              timeout: Duration?) async throws -> [DBusValue] {
        let milliseconds = ConnectionCore.milliseconds(timeout)
        let cancellation = CallCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[DBusValue], any Error>) in
                queue.async {
                    guard !cancellation.cancelled else {
                        continuation.resume(throwing: CancellationError())
                        return
                    }
                    cancellation.reply = self.sendCall(
                        destination: destination, path: path, interface: interface, method: method,
                        arguments: arguments, timeoutMilliseconds: milliseconds
                    ) { result in continuation.resume(with: result) }
                }
            }
        } onCancel: {
            queue.async {
                cancellation.cancelled = true
                if let reply = cancellation.reply { self.cancel(reply) }
            }
        }
    }

    static func milliseconds(_ timeout: Duration?) -> Int32 {
        guard let timeout else { return -1 }  // the default (25 s)
        let (seconds, attoseconds) = timeout.components
        guard seconds >= 0 else { return 0 }
        let total = seconds.multipliedReportingOverflow(by: 1000)
        guard !total.overflow else { return Int32.max }
        return Int32(clamping: total.partialValue + attoseconds / 1_000_000_000_000_000)
    }

    func callBus(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await call(destination: busName, path: busPath, interface: busInterface, method: method,
                       arguments: arguments, timeout: nil)
    }

    // MARK: - Signals out

    /// Must run on the queue.
    func emitSignalOnQueue(path: String, interface: String, name: String, arguments: [DBusValue],
                           destination: String?) throws(DBusError) {
        guard !isClosed else { throw .disconnected() }
        try DBusValidate.path(path)
        try DBusValidate.interface(interface)
        try DBusValidate.member(name)
        if let destination { try DBusValidate.busName(destination) }
        var message = DBusMessage.signal(path: path, interface: interface, member: name, destination: destination)
        try send(&message, body: arguments)
    }

    // MARK: - Incoming messages

    /// Sees every incoming signal on the queue during dispatch.
    func filter(_ message: DBusMessage) {
        var signal = DBusSignal(
            sender: message.sender ?? "", path: message.path ?? "", interface: message.interface ?? "",
            member: message.member ?? "", destination: message.destination, arguments: [])
        // Anyone may send a signal to this connection: read it only when a subscription wants it.
        guard subscriptions.values.contains(where: {
            $0.rule.matchesIgnoringSender(signal, checkingArguments: false) && senderMatches($0.rule.sender, signal.sender)
        }) else { return }
        // Malformed or oversized signals are dropped rather than delivered half-read.
        guard let arguments = try? message.arguments(budget: .standard) else { return }
        // No subscriber takes a descriptor from a signal (anyone may send one to this connection).
        signal.arguments = arguments.map { $0.closingDescriptors() }
        // Snapshot: handlers may subscribe or unsubscribe.
        let current = subscriptions.sorted { $0.key < $1.key }
        for (_, subscription) in current where subscription.rule.matchesIgnoringSender(signal) && senderMatches(subscription.rule.sender, signal.sender) {
            subscription.handler(signal)
        }
    }

    private func senderMatches(_ expected: String?, _ actual: String) -> Bool {
        guard let expected else { return true }
        if expected == actual { return true }
        if expected.hasPrefix(":") { return false }
        return wellKnownOwners[expected] == actual
    }

    // MARK: - Subscriptions

    func subscribe(_ rule: DBusMatchRule, isInternal: Bool = false, onClose: (@Sendable () -> Void)? = nil,
                   handler: @escaping @Sendable (DBusSignal) -> Void) async throws -> DBusSubscription {
        try rule.validate()
        let tracksOwner = rule.sender.map { !$0.hasPrefix(":") && $0 != busName } ?? false
        if tracksOwner, let sender = rule.sender { try await retainOwnerTracking(sender) }
        // Registered locally before AddMatch so nothing delivered after the match is active is missed.
        let id = try onQueue { () throws(DBusError) -> UInt64 in
            guard !isClosed else { throw .disconnected() }
            let id = makeID()
            subscriptions[id] = Subscription(rule: rule, handler: handler, onClose: onClose, isInternal: isInternal)
            return id
        }
        do {
            _ = try await callBus("AddMatch", [.string(rule.ruleString)])
        } catch {
            onQueue {
                subscriptions[id] = nil
                if tracksOwner, let sender = rule.sender { releaseOwnerTracking(sender) }
            }
            throw error
        }
        return DBusSubscription(id: id)
    }

    /// Must run on the queue.
    func unsubscribeOnQueue(_ id: UInt64) {
        guard !isClosed, let subscription = subscriptions.removeValue(forKey: id) else { return }
        // Sent without waiting for (or asking for) a reply.
        var removal = DBusMessage.busCall("RemoveMatch", flags: DBusMessage.noReplyExpectedFlag)
        _ = try? send(&removal, body: [.string(subscription.rule.ruleString)])
        if let sender = subscription.rule.sender, !sender.hasPrefix(":"), sender != busName {
            releaseOwnerTracking(sender)
        }
        subscription.onClose?()
    }

    static func nameOwnerChangedRule(for name: String?) -> DBusMatchRule {
        DBusMatchRule(sender: busName, interface: busInterface, member: "NameOwnerChanged", path: busPath,
                      stringArguments: name.map { [0: $0] } ?? [:])
    }

    static func nameOwnerChange(from signal: DBusSignal) -> DBusNameOwnerChange? {
        guard signal.arguments.count == 3, let name = signal.arguments[0].stringValue,
            let old = signal.arguments[1].stringValue, let new = signal.arguments[2].stringValue
        else { return nil }
        return DBusNameOwnerChange(name: name, oldOwner: old.isEmpty ? nil : old, newOwner: new.isEmpty ? nil : new)
    }

    /// Keeps `wellKnownOwners[name]` current while any subscription names `name` as its sender.
    private func retainOwnerTracking(_ name: String) async throws {
        let mustSetUp = try onQueue { () throws(DBusError) -> Bool in
            guard !isClosed else { throw .disconnected() }
            if var tracking = ownerTracking[name] {
                tracking.count += 1
                ownerTracking[name] = tracking
                return false
            }
            ownerTracking[name] = OwnerTracking(count: 1)
            return true
        }
        if !mustSetUp {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                queue.async {
                    if let tracking = self.ownerTracking[name], !tracking.ready {
                        self.ownerTracking[name]?.waiters.append(continuation)
                    } else {
                        continuation.resume()
                    }
                }
            }
            return
        }
        let id = try onQueue { () throws(DBusError) -> UInt64 in
            guard !isClosed else { throw .disconnected() }
            let id = makeID()
            subscriptions[id] = Subscription(
                rule: ConnectionCore.nameOwnerChangedRule(for: name),
                handler: { [weak self] signal in
                    // Runs on the queue.
                    guard let self, let change = ConnectionCore.nameOwnerChange(from: signal) else { return }
                    self.wellKnownOwners[change.name] = change.newOwner
                },
                onClose: nil, isInternal: true)
            ownerTracking[name]?.subscriptionID = id
            return id
        }
        do {
            _ = try await callBus("AddMatch", [.string(ConnectionCore.nameOwnerChangedRule(for: name).ruleString)])
            // The owner is recorded in the completion, which runs in order with NameOwnerChanged signals.
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                queue.async {
                    self.sendCall(destination: busName, path: busPath, interface: busInterface, method: "GetNameOwner",
                                  arguments: [.string(name)], timeoutMilliseconds: -1) { result in
                        switch result {
                        case .success(let values):
                            self.wellKnownOwners[name] = values.first?.stringValue
                            continuation.resume()
                        case .failure(let error as DBusError) where error.name == DBusError.nameHasNoOwnerName:
                            continuation.resume()
                        case .failure(let error):
                            continuation.resume(throwing: error)
                        }
                    }
                }
            }
        } catch {
            onQueue {
                subscriptions[id] = nil
                releaseOwnerTracking(name)
            }
            throw error
        }
        onQueue {
            guard var tracking = ownerTracking[name] else { return }
            tracking.ready = true
            let waiters = tracking.waiters
            tracking.waiters = []
            ownerTracking[name] = tracking
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Must run on the queue.
    private func releaseOwnerTracking(_ name: String) {
        guard var tracking = ownerTracking[name] else { return }
        tracking.count -= 1
        if tracking.count > 0 {
            ownerTracking[name] = tracking
            return
        }
        ownerTracking[name] = nil
        wellKnownOwners[name] = nil
        for waiter in tracking.waiters { waiter.resume() }
        if let id = tracking.subscriptionID { unsubscribeOnQueue(id) }
    }
}
