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
                  completion: @escaping (Result<[DBusValue], any Error>) -> Void) -> UInt32? {
        do throws(DBusError) {
            guard !isClosed else { throw .disconnected() }
            if let destination { try DBusValidate.busName(destination) }
            try DBusValidate.path(path)
            if let interface { try DBusValidate.interface(interface) }
            try DBusValidate.member(method)
            var message = DBusMessage.methodCall(destination: destination, path: path, interface: interface, member: method)
            let serial = try send(&message, body: arguments)
            let reply = PendingReply(completion: completion)
            replies.awaitReply(to: serial, sentTo: destination, reply)
            // Reading paused for a full outbox goes on while a reply is awaited (calls read are held).
            if outboxIsFull { queue.async { [weak self] in self?.resumeForReplies() } }
            if timeoutMilliseconds != Int32.max {
                let timer = DispatchSource.makeTimerSource(queue: queue)
                let milliseconds = timeoutMilliseconds < 0 ? ConnectionCore.defaultTimeoutMilliseconds : Int(timeoutMilliseconds)
                timer.schedule(deadline: .now() + .milliseconds(milliseconds))
                timer.setEventHandler { [weak self] in
                    self?.replies.remove(serial)?.finish(.failure(DBusError(name: DBusError.noReplyName, message: ConnectionCore.noReplyText)))
                }
                timer.activate()
                reply.timer = timer
            }
            return serial
        } catch {
            completion(.failure(error))
            return nil
        }
    }

    /// What a call waits for its reply when the caller gives no timeout (libdbus's and sd-bus's 25 s).
    static let defaultTimeoutMilliseconds = 25_000
    static let noReplyText = "Did not receive a reply. Possible causes include: the remote application did not send a reply, "
        + "the message bus security policy blocked the reply, the reply timeout expired, or the network connection was broken."

    /// Must run on the queue.
    func cancel(_ serial: UInt32) {
        replies.remove(serial)?.finish(.failure(CancellationError()))
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
        guard routes.wants(signal) else { return }
        // Malformed or oversized signals are dropped rather than delivered half-read.
        guard let arguments = try? message.arguments(budget: .standard) else { return }
        // No subscriber takes a descriptor from a signal (anyone may send one to this connection).
        signal.arguments = arguments.map { $0.closingDescriptors() }
        for handler in routes.handlers(for: signal) { handler(signal) }
    }

    // MARK: - Subscriptions

    /// Must run on the queue.
    func unsubscribeOnQueue(_ id: UInt64) {
        guard !isClosed, let subscription = routes.remove(id) else { return }
        // Sent without waiting for (or asking for) a reply.
        var removal = DBusMessage.busCall("RemoveMatch", flags: DBusMessage.noReplyExpectedFlag)
        _ = try? send(&removal, body: [.string(subscription.rule.ruleString)])
        if subscription.rule.tracksOwner, let sender = subscription.rule.sender {
            releaseOwnerTracking(sender)
        }
        subscription.onClose?()
    }

    /// Must run on the queue.
    func releaseOwnerTracking(_ name: String) {
        guard let released = routes.releaseOwner(name) else { return }
        for waiter in released.waiters { waiter.resume() }
        if let id = released.subscriptionID { unsubscribeOnQueue(id) }
    }
}
