// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus

/// Bus signals matching several rules, fed in arrival order to one handler, and dropped as one.
/// One stream for all rules: subscriptions run in order on the connection queue, so the order of
/// owner changes and state changes is kept.
struct SignalFeed: Sendable {
    private let subscriptions: [DBusSubscription]
    private let task: Task<Void, Never>

    /// Subscribes to every rule (none if one fails) and starts feeding `handler`.
    static func start(on connection: DBusConnection, rules: [DBusMatchRule], buffer: Int,
                      handler: @escaping @Sendable (DBusSignal) async -> Bool) async throws -> SignalFeed {
        let (stream, sink) = AsyncStream.makeStream(of: DBusSignal.self, bufferingPolicy: .bufferingNewest(buffer))
        var added: [DBusSubscription] = []
        do {
            for rule in rules { added.append(try await connection.subscribe(rule) { sink.yield($0) }) }
        } catch let error as DBusError {
            for subscription in added { connection.unsubscribe(subscription) }
            throw AvahiError(error)
        }
        let task = Task {
            for await signal in stream {
                guard await handler(signal) else { return }
            }
        }
        return SignalFeed(subscriptions: added, task: task)
    }

    func stop(on connection: DBusConnection) {
        task.cancel()
        for subscription in subscriptions { connection.unsubscribe(subscription) }
    }
}
