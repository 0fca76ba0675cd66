// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import Synchronization
import Testing

/// `SignalRoutes` without a bus: which subscriptions a signal reaches, well-known senders through
/// their tracked owners, and the reference count of owner tracking.
@Suite("BatonDBus core: SignalRoutes")
struct SignalRoutesTests {
    static func signal(from sender: String, member: String = "Changed", _ arguments: [DBusValue] = []) -> DBusSignal {
        DBusSignal(sender: sender, path: "/org/bluez/hci0", interface: "org.bluez.Adapter1", member: member, arguments: arguments)
    }

    final class Seen: Sendable {
        let labels = Mutex<[String]>([])
        var all: [String] { labels.withLock { $0 } }
    }

    static func subscription(_ rule: DBusMatchRule, _ seen: Seen, _ label: String) -> Subscription {
        Subscription(rule: rule, handler: { _ in seen.labels.withLock { $0.append(label) } }, onClose: nil, isInternal: false)
    }

    @Test func aSignalReachesTheMatchingSubscriptionsInTheOrderTheySubscribed() {
        let seen = Seen()
        var routes = SignalRoutes<Int>()
        let first = routes.add(Self.subscription(DBusMatchRule(member: "Changed"), seen, "first"))
        _ = routes.add(Self.subscription(DBusMatchRule(member: "Other"), seen, "other"))
        _ = routes.add(Self.subscription(DBusMatchRule(interface: "org.bluez.Adapter1"), seen, "third"))
        let signal = Self.signal(from: ":1.9")
        #expect(routes.wants(signal))
        for handler in routes.handlers(for: signal) { handler(signal) }
        #expect(seen.all == ["first", "third"])
        let removed = routes.remove(first)
        let again = routes.remove(first)
        #expect(removed != nil && again == nil)
        #expect(routes.handlers(for: signal).count == 1)
        // The interface rule still takes any member of it; another interface reaches nobody.
        #expect(routes.wants(Self.signal(from: ":1.9", member: "Unwatched")))
        #expect(!routes.wants(DBusSignal(sender: ":1.9", path: "/", interface: "org.other", member: "Changed", arguments: [])))
    }

    @Test func aWellKnownSenderMatchesOnlyItsCurrentOwner() {
        let seen = Seen()
        var routes = SignalRoutes<Int>()
        _ = routes.add(Self.subscription(DBusMatchRule(sender: "org.bluez", member: "Changed"), seen, "bluez"))
        _ = routes.add(Self.subscription(DBusMatchRule(sender: ":1.4", member: "Changed"), seen, "unique"))
        #expect(!routes.wants(Self.signal(from: ":1.9")))
        routes.ownerChanged("org.bluez", to: ":1.9")
        #expect(routes.wants(Self.signal(from: ":1.9")))
        #expect(routes.handlers(for: Self.signal(from: ":1.9")).count == 1)
        // Anyone else sending as if it were BlueZ is not BlueZ.
        #expect(!routes.wants(Self.signal(from: ":1.10")))
        // BlueZ restarted elsewhere.
        routes.ownerChanged("org.bluez", to: ":1.12")
        #expect(!routes.wants(Self.signal(from: ":1.9")))
        routes.ownerChanged("org.bluez", to: nil)
        #expect(!routes.wants(Self.signal(from: ":1.12")))
        #expect(routes.wants(Self.signal(from: ":1.4")))
    }

    @Test func ownerTrackingIsSetUpOnceAndEndsWithTheLastSubscription() {
        var routes = SignalRoutes<Int>()
        let first = routes.retainOwner("org.bluez")
        let second = routes.retainOwner("org.bluez")
        #expect(first == .setUp && second == .alreadyTracked)
        // The second subscriber waits until the first has learnt the owner.
        let kept = routes.waitForOwner("org.bluez", 7)
        #expect(kept)
        routes.setOwnerSubscription("org.bluez", 99)
        routes.ownerChanged("org.bluez", to: ":1.9")
        let resumed = routes.ownerKnown("org.bluez")
        #expect(resumed == [7])
        let keptOnceKnown = routes.waitForOwner("org.bluez", 8)
        #expect(!keptOnceKnown)
        let notLast = routes.releaseOwner("org.bluez")
        #expect(notLast == nil)
        #expect(routes.owners["org.bluez"] == ":1.9")
        let last = routes.releaseOwner("org.bluez")
        #expect(last?.subscriptionID == 99 && last?.waiters == [])
        #expect(routes.owners["org.bluez"] == nil)
        let afterLast = routes.releaseOwner("org.bluez")
        #expect(afterLast == nil)
        let keptAfterEnd = routes.waitForOwner("org.bluez", 9)
        #expect(!keptAfterEnd)
    }

    @Test func closingHandsBackEverySubscriptionAndWaiter() {
        let seen = Seen()
        var routes = SignalRoutes<Int>()
        _ = routes.add(Self.subscription(DBusMatchRule(member: "A"), seen, "a"))
        _ = routes.add(Self.subscription(DBusMatchRule(member: "B"), seen, "b"))
        _ = routes.retainOwner("org.bluez")
        _ = routes.retainOwner("org.bluez")
        _ = routes.waitForOwner("org.bluez", 3)
        let closed = routes.close()
        #expect(closed.subscriptions.map(\.rule.member) == ["A", "B"])
        #expect(closed.waiters == [3])
        #expect(routes.count == 0)
    }

    @Test func nameOwnerChangedIsReadOnlyFromThreeStrings() {
        let signal = DBusSignal(sender: busName, path: busPath, interface: busInterface, member: "NameOwnerChanged",
                                arguments: [.string("org.bluez"), .string(""), .string(":1.9")])
        #expect(DBusNameOwnerChange(signal) == DBusNameOwnerChange(name: "org.bluez", oldOwner: nil, newOwner: ":1.9"))
        let short = DBusSignal(sender: busName, path: busPath, interface: busInterface, member: "NameOwnerChanged",
                               arguments: [.string("org.bluez"), .string("")])
        #expect(DBusNameOwnerChange(short) == nil)
        #expect(DBusMatchRule(sender: "org.bluez").tracksOwner)
        #expect(!DBusMatchRule(sender: ":1.9").tracksOwner && !DBusMatchRule(sender: busName).tracksOwner && !DBusMatchRule().tracksOwner)
    }
}
