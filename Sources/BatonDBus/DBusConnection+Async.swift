// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch

// The async steps of DBusConnection: each waits (without blocking a thread) for what runs on the
// connection's queue (ConnectionCore) to answer.

extension DBusConnection {
    /// Sends the call on the queue and waits for `ReplyBook` to hand its reply (or the timeout, or
    /// the disconnect) back; task cancellation ends the call with `CancellationError`.
    func performCall(destination: String?, path: String, interface: String?, method: String, arguments: [DBusValue],
                     timeout: Duration?) async throws -> [DBusValue] {
        let core = self.core
        let milliseconds = DBusConnection.milliseconds(timeout)
        let cancellation = CallCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[DBusValue], any Error>) in
                core.queue.async {
                    guard !cancellation.cancelled else {
                        continuation.resume(throwing: CancellationError())
                        return
                    }
                    cancellation.serial = core.sendCall(
                        destination: destination, path: path, interface: interface, method: method,
                        arguments: arguments, timeoutMilliseconds: milliseconds
                    ) { result in continuation.resume(with: result) }
                }
            }
        } onCancel: {
            core.queue.async {
                cancellation.cancelled = true
                if let serial = cancellation.serial { core.cancel(serial) }
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

    func callBus(_ method: String, _ arguments: [DBusValue], timeout: Duration? = nil) async throws -> [DBusValue] {
        try await performCall(destination: busName, path: busPath, interface: busInterface, method: method,
                              arguments: arguments, timeout: timeout)
    }

    /// Registers the subscription locally, then adds its match rule on the bus (and tracks the
    /// owner of a well-known sender first).
    func addSubscription(_ rule: DBusMatchRule, isInternal: Bool = false, onClose: (@Sendable () -> Void)? = nil,
                         handler: @escaping @Sendable (DBusSignal) -> Void) async throws -> DBusSubscription {
        let core = self.core
        try rule.validate()
        let tracksOwner = rule.tracksOwner
        if tracksOwner, let sender = rule.sender { try await retainOwnerTracking(sender) }
        // Registered locally before AddMatch so nothing delivered after the match is active is missed.
        let id = try core.onQueue { () throws(DBusError) -> UInt64 in
            guard !core.isClosed else { throw .disconnected() }
            return core.routes.add(Subscription(rule: rule, handler: handler, onClose: onClose, isInternal: isInternal))
        }
        do {
            _ = try await callBus("AddMatch", [.string(rule.ruleString)])
        } catch {
            core.onQueue {
                _ = core.routes.remove(id)
                if tracksOwner, let sender = rule.sender { core.releaseOwnerTracking(sender) }
            }
            throw error
        }
        return DBusSubscription(id: id)
    }

    /// Keeps the owner of `name` current (`SignalRoutes`) while any subscription names it as its sender.
    private func retainOwnerTracking(_ name: String) async throws {
        let core = self.core
        let retain = try core.onQueue { () throws(DBusError) -> ConnectionRoutes.Retain in
            guard !core.isClosed else { throw .disconnected() }
            return core.routes.retainOwner(name)
        }
        guard retain == .setUp else {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                core.queue.async {
                    if !core.routes.waitForOwner(name, continuation) { continuation.resume() }
                }
            }
            return
        }
        let id = try core.onQueue { () throws(DBusError) -> UInt64 in
            guard !core.isClosed else { throw .disconnected() }
            let id = core.routes.add(Subscription(
                rule: DBusMatchRule.nameOwnerChanged(for: name),
                handler: { [weak core] signal in
                    // Runs on the queue.
                    guard let core, let change = DBusNameOwnerChange(signal) else { return }
                    core.routes.ownerChanged(change.name, to: change.newOwner)
                },
                onClose: nil, isInternal: true))
            core.routes.setOwnerSubscription(name, id)
            return id
        }
        do {
            _ = try await callBus("AddMatch", [.string(DBusMatchRule.nameOwnerChanged(for: name).ruleString)])
            // The owner is recorded in the completion, which runs in order with NameOwnerChanged signals.
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                core.queue.async {
                    core.sendCall(destination: busName, path: busPath, interface: busInterface, method: "GetNameOwner",
                                  arguments: [.string(name)], timeoutMilliseconds: -1) { result in
                        switch result {
                        case .success(let values):
                            core.routes.ownerChanged(name, to: values.first?.stringValue)
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
            core.onQueue {
                _ = core.routes.remove(id)
                core.releaseOwnerTracking(name)
            }
            throw error
        }
        core.onQueue { for waiter in core.routes.ownerKnown(name) { waiter.resume() } }
    }

    /// Exports the object on the queue, then announces it (its properties read off the queue) to
    /// the object managers above it, unless it was removed meanwhile.
    func exportObject(_ interfaces: [DBusInterface], at path: String) async throws {
        let core = self.core
        try ObjectRegistry.validate(interfaces, at: path)
        let roots = try core.onQueue { () throws(DBusError) -> [String] in
            guard !core.isClosed else { throw .disconnected() }
            return try core.registry.export(interfaces, at: path)
        }
        guard !roots.isEmpty, !interfaces.isEmpty else { return }
        // A broadcast: no caller, even when a method handler exports the object.
        let added = await DBusCallContext.$sender.withValue(nil) { await PropertyReader.interfacesAndProperties(interfaces) }
        try core.onQueue { () throws(DBusError) in
            // Skip if the object was removed (or replaced) while properties were being read.
            guard core.registry.objects[path] != nil else { return }
            for root in roots {
                try core.emitSignalOnQueue(path: root, interface: objectManagerInterface, name: "InterfacesAdded",
                                           arguments: [.objectPath(path), added], destination: nil)
            }
        }
    }
}
