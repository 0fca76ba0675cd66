// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus
import Testing
@testable import BatonAgent
@testable import BatonClient

/// Signals come from other processes: wrong shapes are ignored, never trusted or crashed on.
@Suite("BatonAgentTests: reading notification and ObjectManager signals")
struct SignalParsingTests {
    private func signal(_ member: String, _ arguments: [DBusValue], interface: String = "org.freedesktop.Notifications") -> DBusSignal {
        DBusSignal(sender: ":1.5", path: "/org/freedesktop/Notifications", interface: interface, member: member, arguments: arguments)
    }

    @Test func notificationSignalsBecomeEventsOnlyWithTheirDocumentedTypes() {
        #expect(NotificationServerClient.event(from: signal("ActionInvoked", [.uint32(3), .string("default")])) == .actionInvoked(id: 3, key: "default"))
        #expect(NotificationServerClient.event(from: signal("NotificationClosed", [.uint32(3), .uint32(2)])) == .notificationClosed(id: 3, reason: 2))
        #expect(NotificationServerClient.event(from: signal("ActionInvoked", [.string("3"), .string("default")])) == nil)
        #expect(NotificationServerClient.event(from: signal("ActionInvoked", [.uint32(3)])) == nil)
        #expect(NotificationServerClient.event(from: signal("NotificationClosed", [.uint32(3), .string("2")])) == nil)
        #expect(NotificationServerClient.event(from: signal("ActivationToken", [.uint32(3), .string("x")])) == nil)
    }

    @Test func objectManagerSignalsBecomeSuggestionChangesOnlyForSuggestions() {
        let properties: DBusValue = .dictionary(keySignature: "s", valueSignature: "a{sv}", [
            .string("org.baton.Suggestion1"): .propertyDictionary(["Device": .string("d1"), "ActivityType": .string("t.x")]),
        ])
        let added = BatonConnection.suggestionChange(from: signal("InterfacesAdded", [.objectPath("/org/baton/suggestion/4"), properties],
                                                                 interface: "org.freedesktop.DBus.ObjectManager"))
        #expect(added == .added(path: "/org/baton/suggestion/4", properties: ["Device": .string("d1"), "ActivityType": .string("t.x")]))
        let removed = BatonConnection.suggestionChange(from: signal("InterfacesRemoved", [.objectPath("/org/baton/suggestion/4"),
                                                                                          .stringArray(["org.baton.Suggestion1"])]))
        #expect(removed == .removed(path: "/org/baton/suggestion/4"))
        // An activity object, a wrong path type, a missing interface list: not suggestions.
        #expect(BatonConnection.suggestionChange(from: signal("InterfacesAdded", [.objectPath("/org/baton/activity/u0_1"), properties])) == nil)
        #expect(BatonConnection.suggestionChange(from: signal("InterfacesAdded", [.string("/org/baton/suggestion/4"), properties])) == nil)
        #expect(BatonConnection.suggestionChange(from: signal("InterfacesRemoved", [.objectPath("/org/baton/suggestion/4")])) == nil)
        #expect(BatonConnection.suggestionChange(from: signal("InterfacesRemoved", [.objectPath("/org/baton/suggestion/4"),
                                                                                    .stringArray(["org.baton.Activity1"])])) == nil)
    }

    @Test func titlePropertyChangesBecomeRetitledOnlyForSuggestions() {
        func changed(_ path: String, _ arguments: [DBusValue]) -> SuggestionChange? {
            BatonConnection.titleChange(from: DBusSignal(sender: ":1.5", path: path, interface: "org.freedesktop.DBus.Properties",
                                                         member: "PropertiesChanged", arguments: arguments))
        }
        let title: DBusValue = .propertyDictionary(["Title": .string("Dune, page 2")])
        #expect(changed("/org/baton/suggestion/4", [.string("org.baton.Suggestion1"), title, .stringArray([])])
                == .retitled(path: "/org/baton/suggestion/4", title: "Dune, page 2"))
        #expect(changed("/org/baton/activity/u0_1", [.string("org.baton.Suggestion1"), title, .stringArray([])]) == nil)
        #expect(changed("/org/baton/suggestion/4", [.string("org.baton.Activity1"), title, .stringArray([])]) == nil)
        #expect(changed("/org/baton/suggestion/4", [.string("org.baton.Suggestion1"), .propertyDictionary(["Title": .uint32(3)])]) == nil)
        #expect(changed("/org/baton/suggestion/4", [.string("org.baton.Suggestion1"), .propertyDictionary(["Near": .boolean(true)])]) == nil)
        #expect(changed("/org/baton/suggestion/4", [.string("org.baton.Suggestion1")]) == nil)
    }

    /// The daemon invalidates Title instead of broadcasting it: the path to read it from, only for suggestions.
    @Test func invalidatedTitlesNameTheSuggestionToReadFrom() {
        func invalidated(_ path: String, _ arguments: [DBusValue]) -> String? {
            BatonConnection.invalidatedTitlePath(from: DBusSignal(sender: ":1.5", path: path, interface: "org.freedesktop.DBus.Properties",
                                                                  member: "PropertiesChanged", arguments: arguments))
        }
        let empty: DBusValue = .propertyDictionary([:])
        #expect(invalidated("/org/baton/suggestion/4", [.string("org.baton.Suggestion1"), empty, .stringArray(["Title"])]) == "/org/baton/suggestion/4")
        #expect(invalidated("/org/baton/suggestion/4", [.string("org.baton.Suggestion1"), empty, .stringArray(["Near"])]) == nil)
        #expect(invalidated("/org/baton/activity/u0_1", [.string("org.baton.Suggestion1"), empty, .stringArray(["Title"])]) == nil)
        #expect(invalidated("/org/baton/suggestion/4", [.string("org.baton.Activity1"), empty, .stringArray(["Title"])]) == nil)
        #expect(invalidated("/org/baton/suggestion/4", [.string("org.baton.Suggestion1"), empty]) == nil)
    }

    @Test func onlyWebPagesGoToTheBrowser() {
        #expect(isWebAddress("https://example.org/book#2"))
        #expect(isWebAddress("HTTP://example.org"))
        #expect(!isWebAddress("file:///etc/passwd"))
        #expect(!isWebAddress("javascript:alert(1)"))
        #expect(!isWebAddress("x-scheme-handler://run"))
    }
}
