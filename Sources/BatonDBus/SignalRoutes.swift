// SPDX-License-Identifier: LGPL-2.1-or-later
/// Which subscriptions an incoming signal reaches, and the owners of the well-known names they
/// name as senders (pure: the connection sends AddMatch and RemoveMatch, reads the arguments and
/// runs the handlers it is handed). `Waiter` is what a subscriber waiting for a name's owner to be
/// known keeps (a continuation, resumed by the connection).
///
/// A rule's sender is a unique name, the bus, or a well-known name; a signal carries the unique
/// name of its sender, so a well-known sender matches while the bus says that unique name owns it
/// (NameOwnerChanged, tracked once per name however many subscriptions name it).
struct SignalRoutes<Waiter> {
    private var subscriptions: [UInt64: Subscription] = [:]
    private var nextID: UInt64 = 1
    /// The owner of each tracked well-known name, as last seen.
    private(set) var owners: [String: String] = [:]
    private var tracking: [String: Tracking] = [:]

    private struct Tracking {
        var count: Int
        var subscriptionID: UInt64?
        var waiters: [Waiter] = []
        var ready = false
    }

    var count: Int { subscriptions.count }

    /// Adds a subscription; returns its id.
    mutating func add(_ subscription: Subscription) -> UInt64 {
        defer { nextID += 1 }
        subscriptions[nextID] = subscription
        return nextID
    }

    mutating func remove(_ id: UInt64) -> Subscription? { subscriptions.removeValue(forKey: id) }

    /// Whether any subscription wants `signal` (its arguments not yet read: checked before they are).
    func wants(_ signal: DBusSignal) -> Bool {
        subscriptions.values.contains { $0.rule.matchesIgnoringSender(signal, checkingArguments: false) && senderMatches($0.rule.sender, signal.sender) }
    }

    /// The handlers `signal` (arguments read) goes to, in the order they subscribed. A snapshot:
    /// handlers may subscribe or unsubscribe.
    func handlers(for signal: DBusSignal) -> [@Sendable (DBusSignal) -> Void] {
        subscriptions.sorted { $0.key < $1.key }
            .filter { $0.value.rule.matchesIgnoringSender(signal) && senderMatches($0.value.rule.sender, signal.sender) }
            .map(\.value.handler)
    }

    func senderMatches(_ expected: String?, _ actual: String) -> Bool {
        guard let expected else { return true }
        if expected == actual { return true }
        if expected.hasPrefix(":") { return false }
        return owners[expected] == actual
    }

    // MARK: - Owners of well-known names

    /// What `retainOwner` asks the connection to do.
    enum Retain { case setUp, alreadyTracked }

    /// One more subscription names `name`: the first sets tracking up (AddMatch for its
    /// NameOwnerChanged, then GetNameOwner), the others wait until that is done.
    mutating func retainOwner(_ name: String) -> Retain {
        if tracking[name] != nil {
            tracking[name]?.count += 1
            return .alreadyTracked
        }
        tracking[name] = Tracking(count: 1)
        return .setUp
    }

    /// Keeps `waiter` until the owner of `name` is known; false when it is already (or tracking
    /// ended): the waiter goes on at once.
    mutating func waitForOwner(_ name: String, _ waiter: Waiter) -> Bool {
        guard let current = tracking[name], !current.ready else { return false }
        tracking[name]?.waiters.append(waiter)
        return true
    }

    mutating func setOwnerSubscription(_ name: String, _ id: UInt64) { tracking[name]?.subscriptionID = id }

    mutating func ownerChanged(_ name: String, to owner: String?) { owners[name] = owner }

    /// Tracking of `name` is set up: the waiters to resume.
    mutating func ownerKnown(_ name: String) -> [Waiter] {
        guard var current = tracking[name] else { return [] }
        current.ready = true
        let waiters = current.waiters
        current.waiters = []
        tracking[name] = current
        return waiters
    }

    /// One subscription naming `name` is gone; after the last, the waiters to resume and the
    /// NameOwnerChanged subscription to remove.
    mutating func releaseOwner(_ name: String) -> (waiters: [Waiter], subscriptionID: UInt64?)? {
        guard var current = tracking[name] else { return nil }
        current.count -= 1
        if current.count > 0 {
            tracking[name] = current
            return nil
        }
        tracking[name] = nil
        owners[name] = nil
        return (current.waiters, current.subscriptionID)
    }

    /// The connection closed: every subscription (to tell its subscriber) and every waiter.
    mutating func close() -> (subscriptions: [Subscription], waiters: [Waiter]) {
        let closing = subscriptions.sorted { $0.key < $1.key }.map(\.value)
        let waiters = tracking.values.flatMap(\.waiters)
        subscriptions.removeAll()
        tracking.removeAll()
        return (closing, waiters)
    }
}

extension DBusMatchRule {
    /// Whether the sender is a well-known name other than the bus (its owner must be tracked).
    var tracksOwner: Bool { sender.map { !$0.hasPrefix(":") && $0 != busName } ?? false }

    /// NameOwnerChanged of `name` (or of every name when nil), from the bus.
    static func nameOwnerChanged(for name: String?) -> DBusMatchRule {
        DBusMatchRule(sender: busName, interface: busInterface, member: "NameOwnerChanged", path: busPath,
                      stringArguments: name.map { [0: $0] } ?? [:])
    }

}

extension DBusNameOwnerChange {
    /// The change a NameOwnerChanged signal reports; nil when its arguments are not `sss`.
    init?(_ signal: DBusSignal) {
        guard signal.arguments.count == 3, let name = signal.arguments[0].stringValue,
            let old = signal.arguments[1].stringValue, let new = signal.arguments[2].stringValue
        else { return nil }
        self.init(name: name, oldOwner: old.isEmpty ? nil : old, newOwner: new.isEmpty ? nil : new)
    }
}
