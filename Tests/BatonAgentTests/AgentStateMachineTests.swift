// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonDBus
import Testing

private func suggestion(_ number: Int = 1, device: String = "dev-a", name: String = "laptop", type: String = "org.example.Reader.reading",
                        revision: UInt32 = 1, title: String? = nil, url: Bool = false, handler: Bool? = nil) -> SuggestionSnapshot {
    SuggestionSnapshot(path: "/org/baton/suggestion/\(number)", device: device, deviceName: name, activityType: type,
                       revision: revision, title: title, hasWebpageURL: url, hasHandler: handler)
}

/// The Notify request inside a command, or nil.
private func notified(_ commands: [AgentCommand]) -> (ticket: UInt64, request: NotificationRequest)? {
    for command in commands { if case .notify(let ticket, let request) = command { return (ticket, request) } }
    return nil
}

/// A machine with the server known and `s` shown as notification `id`.
private func shown(_ s: SuggestionSnapshot = suggestion(), id: UInt32 = 7,
                   capabilities: NotificationCapabilities = NotificationCapabilities(actions: true)) -> AgentStateMachine {
    var machine = AgentStateMachine()
    _ = machine.handle(.serverAppeared(capabilities))
    let ticket = notified(machine.handle(.suggestionAdded(s)))!.ticket
    #expect(machine.handle(.notificationPosted(ticket: ticket, id: id)) == [])
    return machine
}

@Suite("BatonAgentTests: the agent's state machine")
struct AgentStateMachineTests {
    @Test func aNewSuggestionIsNotifiedWithContinueAsActionAndClick() throws {
        var machine = AgentStateMachine()
        #expect(machine.handle(.serverAppeared(NotificationCapabilities(["actions", "body"]))) == [])
        let (_, request) = try #require(notified(machine.handle(.suggestionAdded(suggestion(title: "Dune, page 2")))))
        #expect(request.summary == "Continue ‘Dune, page 2’ from laptop")
        #expect(request.replacesID == 0)
        #expect(request.actions == ["default", "Continue", "continue", "Continue"])
        #expect(request.hints["desktop-entry"] == .string("baton-agent"))
        #expect(request.hints["category"] == .string("device"))
        #expect(request.hints["urgency"] == .byte(1))
        #expect(request.hints["resident"] == .boolean(true))
        #expect(!request.body.contains("baton continue"))
    }

    @Test func withoutATitleTheSummaryNamesTheType() throws {
        var machine = AgentStateMachine()
        _ = machine.handle(.serverAppeared(NotificationCapabilities(actions: true)))
        let (_, request) = try #require(notified(machine.handle(.suggestionAdded(suggestion()))))
        #expect(request.summary == "Continue ‘Reader reading’ from laptop")
        #expect(NotificationContent.readableType("single") == "single")
    }

    @Test func aServerWithoutActionsGetsTheCommandInTheBody() throws {
        var machine = AgentStateMachine()
        _ = machine.handle(.serverAppeared(NotificationCapabilities(["body"])))
        let (_, request) = try #require(notified(machine.handle(.suggestionAdded(suggestion(3)))))
        #expect(request.actions.isEmpty)
        #expect(request.body.contains("baton continue /org/baton/suggestion/3"))
    }

    @Test func nothingIsPostedBeforeTheServerIsKnownThenEverythingIs() throws {
        var machine = AgentStateMachine()
        #expect(machine.handle(.suggestionAdded(suggestion(1, device: "a"))) == [])
        #expect(machine.handle(.suggestionAdded(suggestion(2, device: "b"))) == [])
        let commands = machine.handle(.serverAppeared(NotificationCapabilities(actions: true)))
        #expect(commands.count == 2)
        #expect(commands.allSatisfy { if case .notify(_, let request) = $0 { request.replacesID == 0 } else { false } })
    }

    @Test func aNewRevisionReplacesTheMembersNotificationInPlace() throws {
        var machine = shown(suggestion(1, revision: 1, title: "page 1"), id: 7)
        let (_, request) = try #require(notified(machine.handle(.suggestionAdded(suggestion(2, revision: 2, title: "page 2")))))
        #expect(request.replacesID == 7)
        #expect(request.summary.contains("page 2"))
        // The old object's removal (after its replacement arrived) closes nothing.
        #expect(machine.handle(.suggestionRemoved(path: "/org/baton/suggestion/1")) == [])
        #expect(machine.suggestions["dev-a"]?.path == "/org/baton/suggestion/2")
    }

    @Test func theSameSuggestionReportedTwiceIsOneNotification() {
        var machine = shown()
        #expect(machine.handle(.suggestionAdded(suggestion())) == [])
    }

    @Test func twoMembersGetTwoNotifications() throws {
        var machine = shown(suggestion(1, device: "a"), id: 7)
        let (ticket, request) = try #require(notified(machine.handle(.suggestionAdded(suggestion(2, device: "b", name: "phone")))))
        #expect(request.replacesID == 0)
        _ = machine.handle(.notificationPosted(ticket: ticket, id: 8))
        #expect(machine.notificationID(forDevice: "a") == 7)
        #expect(machine.notificationID(forDevice: "b") == 8)
    }

    @Test func theSuggestionGoingClosesItsNotification() {
        var machine = shown(id: 7)
        #expect(machine.handle(.suggestionRemoved(path: "/org/baton/suggestion/1")) == [.close(id: 7)])
        #expect(machine.notificationID(forDevice: "dev-a") == nil)
        #expect(machine.handle(.actionInvoked(id: 7, key: "default")) == [])
    }

    @Test func aSuggestionGoneWhileNotifyIsInFlightIsClosedWhenItsIdArrives() throws {
        var machine = AgentStateMachine()
        _ = machine.handle(.serverAppeared(NotificationCapabilities(actions: true)))
        let (ticket, _) = try #require(notified(machine.handle(.suggestionAdded(suggestion()))))
        #expect(machine.handle(.suggestionRemoved(path: "/org/baton/suggestion/1")) == [])
        #expect(machine.handle(.notificationPosted(ticket: ticket, id: 9)) == [.close(id: 9)])
    }

    @Test func aRevisionArrivingWhileNotifyIsInFlightReplacesOnceTheIdArrives() throws {
        var machine = AgentStateMachine()
        _ = machine.handle(.serverAppeared(NotificationCapabilities(actions: true)))
        let (ticket, _) = try #require(notified(machine.handle(.suggestionAdded(suggestion(1, revision: 1)))))
        #expect(machine.handle(.suggestionAdded(suggestion(2, revision: 2))) == [])
        let (_, request) = try #require(notified(machine.handle(.notificationPosted(ticket: ticket, id: 9))))
        #expect(request.replacesID == 9)
    }

    @Test func clickOrContinueContinuesThenCloses() {
        for key in ["default", "continue"] {
            var machine = shown(id: 7)
            #expect(machine.handle(.actionInvoked(id: 7, key: key)) == [.continueSuggestion(path: "/org/baton/suggestion/1"), .close(id: 7)])
            // The server's NotificationClosed after the action is not a dismissal.
            #expect(machine.handle(.notificationClosed(id: 7, reason: 2)) == [])
            // The suggestion then goes (continued): nothing left to close.
            #expect(machine.handle(.suggestionRemoved(path: "/org/baton/suggestion/1")) == [])
        }
    }

    @Test func signalsForOtherIdsAndUnofferedKeysAreIgnored() {
        var machine = shown(id: 7)
        #expect(machine.handle(.actionInvoked(id: 8, key: "default")) == [])
        #expect(machine.handle(.notificationClosed(id: 8, reason: 2)) == [])
        #expect(machine.handle(.actionInvoked(id: 7, key: "browser")) == [])  // no URL: never offered
        #expect(machine.handle(.actionInvoked(id: 7, key: "rm -rf")) == [])
        #expect(machine.notificationID(forDevice: "dev-a") == 7)
    }

    @Test func onlyABrowserCanServeOffersOpenInBrowser() throws {
        var machine = AgentStateMachine()
        _ = machine.handle(.serverAppeared(NotificationCapabilities(actions: true)))
        let browserOnly = suggestion(title: "Dune", url: true, handler: false)
        let (ticket, request) = try #require(notified(machine.handle(.suggestionAdded(browserOnly))))
        #expect(request.actions == ["default", "Open in browser", "browser", "Open in browser"])
        #expect(request.summary == "Open ‘Dune’ from laptop in the browser")
        _ = machine.handle(.notificationPosted(ticket: ticket, id: 4))
        #expect(machine.handle(.actionInvoked(id: 4, key: "continue")) == [])  // not offered
        #expect(machine.handle(.actionInvoked(id: 4, key: "default")) == [.openInBrowser(path: browserOnly.path), .close(id: 4)])
    }

    @Test func aURLWithAHandlerOrUnknownHandlerOffersContinueOnly() throws {
        for handler in [true, nil] as [Bool?] {
            var machine = AgentStateMachine()
            _ = machine.handle(.serverAppeared(NotificationCapabilities(actions: true)))
            let (_, request) = try #require(notified(machine.handle(.suggestionAdded(suggestion(url: true, handler: handler)))))
            #expect(request.actions == ["default", "Continue", "continue", "Continue"])
        }
    }

    @Test func theUserClosingItDismissesExpiryDoesNot() {
        var dismissed = shown(id: 7)
        #expect(dismissed.handle(.notificationClosed(id: 7, reason: 2)) == [.dismiss(path: "/org/baton/suggestion/1")])
        var expired = shown(id: 7)
        #expect(expired.handle(.notificationClosed(id: 7, reason: 1)) == [])
        // Either way that revision is not shown again, but a newer one is.
        #expect(expired.handle(.suggestionAdded(suggestion())) == [])
        let next = notified(expired.handle(.suggestionAdded(suggestion(2, revision: 2))))
        #expect(next?.request.replacesID == 0)
    }

    @Test func aRestartedServerGetsEveryOpenSuggestionAgain() throws {
        var machine = shown(id: 7)
        #expect(machine.handle(.serverVanished) == [])
        #expect(machine.notificationID(forDevice: "dev-a") == nil)
        #expect(machine.handle(.suggestionAdded(suggestion(2, revision: 2))) == [])  // no server: waits
        let (_, request) = try #require(notified(machine.handle(.serverAppeared(NotificationCapabilities([])))))
        #expect(request.replacesID == 0)
        #expect(request.body.contains("baton continue /org/baton/suggestion/2"))
    }

    @Test func aFailedNotifyIsRetriedWhenTheServerComesBack() throws {
        var machine = AgentStateMachine()
        _ = machine.handle(.serverAppeared(NotificationCapabilities(actions: true)))
        let (ticket, _) = try #require(notified(machine.handle(.suggestionAdded(suggestion()))))
        #expect(machine.handle(.notificationFailed(ticket: ticket)) == [])
        #expect(notified(machine.handle(.serverAppeared(NotificationCapabilities(actions: true)))) != nil)
    }

    @Test func snapshotsReadOptionalPropertiesAndRefuseIncompleteObjects() {
        let full: [String: DBusValue] = ["Device": .string("d1"), "DeviceName": .string("laptop"), "ActivityType": .string("t.x"),
                                         "Revision": .uint32(4), "HasWebpageURL": .boolean(true), "Title": .string("Dune"),
                                         "HasHandler": .boolean(false)]
        let snapshot = SuggestionSnapshot(path: "/org/baton/suggestion/1", properties: full)
        #expect(snapshot == SuggestionSnapshot(path: "/org/baton/suggestion/1", device: "d1", deviceName: "laptop", activityType: "t.x",
                                               revision: 4, title: "Dune", hasWebpageURL: true, hasHandler: false))
        #expect(SuggestionSnapshot(path: "/p", properties: ["Device": .string("d1")]) == nil)
        #expect(SuggestionSnapshot(path: "/p", properties: ["Device": .uint32(1), "ActivityType": .string("t")]) == nil)
        let today = SuggestionSnapshot(path: "/p", properties: ["Device": .string("d1"), "ActivityType": .string("t.x"), "Title": .string("")])
        #expect(today?.title == nil)
        #expect(today?.hasHandler == nil)
        #expect(today?.deviceName == "d1")
    }
}
