// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
import BatonCore

@Suite("Continue machine")
struct ContinueMachineTests {
    enum Outcome: Hashable, Sendable { case delivered, declined, noHandler, failed }
    enum Failure: Hashable, Sendable { case broke, late, gone, refused, busy }
    typealias Machine = ContinueMachine<Outcome, Failure>

    static let type = "org.example.edit"

    static func versions(_ low: Int64, _ high: Int64) -> [ActivityVersions] {
        [try! ActivityVersions(pairs: [(low, high)])]
    }

    /// One event of each kind.
    static let events: [(String, Machine.Event)] = [
        ("start", .start),
        ("refused", .handlerRefused(.declined)),
        ("accepted", .handlerAccepted(versions: nil)),
        ("fetched", .fetched(type: type, version: 1)),
        ("fetchFailed", .fetchFailed(.interrupted, detail: "broke", .broke)),
        ("pulled", .documentPulled(needsClaim: false)),
        ("pullFailed", .documentFailed(.interrupted, detail: "broke", .broke)),
        ("claimed", .sessionClaimed),
        ("claimRefused", .sessionRefused(.timedOut, detail: "busy", .busy)),
        ("inRing", .stillInRing),
        ("left", .memberLeft),
        ("cancelled", .cancelled),
        ("delivered", .delivered(.delivered, handed: true)),
        ("reported", .reported),
    ]

    /// The events that reach each state from idle.
    static let paths: [(Machine.State, [Machine.Event])] = [
        (.idle, []),
        (.askingHandler, [.start]),
        (.cancelledWhileAsking, [.start, .cancelled]),
        (.fetching, [.start, .handlerAccepted(versions: nil)]),
        (.pullingDocument, [.start, .handlerAccepted(versions: nil), .fetched(type: type, version: 1)]),
        (.claimingSession, [.start, .handlerAccepted(versions: nil), .fetched(type: type, version: 1), .documentPulled(needsClaim: true)]),
        (.checkingRing, [.start, .handlerAccepted(versions: nil), .fetched(type: type, version: 1), .documentPulled(needsClaim: true), .sessionClaimed]),
        (.delivering, [.start, .handlerAccepted(versions: nil), .fetched(type: type, version: 1), .documentPulled(needsClaim: false), .stillInRing]),
        (.reporting, [.start, .handlerAccepted(versions: nil), .fetched(type: type, version: 1), .documentPulled(needsClaim: false), .stillInRing,
                      .delivered(.delivered, handed: true)]),
        (.finished, [.start, .handlerAccepted(versions: nil), .fetched(type: type, version: 1), .documentPulled(needsClaim: false), .stillInRing,
                     .delivered(.delivered, handed: true), .reported]),
    ]

    static let dismissed = Machine.Action.fail(.cancelled, detail: "the suggestion was dismissed")

    /// What each event does in each state; every pair not listed does nothing and keeps the state.
    static let table: [String: ([Machine.Action], Machine.State)] = [
        "idle/start": ([.askHandler], .askingHandler),
        "askingHandler/refused": ([.finish(.handled(.declined))], .finished),
        "askingHandler/accepted": ([.fetch(versions: nil)], .fetching),
        "askingHandler/cancelled": ([.finish(.cancelled)], .cancelledWhileAsking),
        "cancelledWhileAsking/accepted": ([dismissed], .finished),
        "cancelledWhileAsking/refused": ([], .finished),
        "fetching/fetched": ([.pullDocument], .pullingDocument),
        "fetching/fetchFailed": ([.fail(.interrupted, detail: "broke"), .finish(.failed(.broke))], .finished),
        "fetching/cancelled": ([dismissed, .finish(.cancelled)], .finished),
        "pullingDocument/pulled": ([.checkRing], .checkingRing),
        "pullingDocument/pullFailed": ([.fail(.interrupted, detail: "broke"), .finish(.failed(.broke))], .finished),
        "pullingDocument/cancelled": ([dismissed, .finish(.cancelled)], .finished),
        "claimingSession/claimed": ([.checkRing], .checkingRing),
        "claimingSession/claimRefused": ([.fail(.timedOut, detail: "busy"), .finish(.failed(.busy))], .finished),
        "claimingSession/cancelled": ([dismissed, .finish(.cancelled)], .finished),
        "checkingRing/inRing": ([.deliver], .delivering),
        "checkingRing/left": ([.fail(.unreachable, detail: "the member left the ring"), .finish(.memberLeft)], .finished),
        "checkingRing/cancelled": ([dismissed, .finish(.cancelled)], .finished),
        "delivering/delivered": ([.report], .reporting),
        "reporting/reported": ([.finish(.handled(.delivered))], .finished),
    ]

    static func machine(at path: [Machine.Event]) -> Machine {
        var machine = Machine(activityType: type)
        for event in path { _ = machine.handle(event) }
        return machine
    }

    @Test("Every event in every state does what the table says, and nothing else")
    func everyEventInEveryState() {
        var listed = 0
        for (state, path) in Self.paths {
            #expect(Self.machine(at: path).state == state, "path to \(state)")
            for (name, event) in Self.events {
                var machine = Self.machine(at: path)
                let actions = machine.handle(event)
                let key = "\(state)/\(name)"
                if let (expected, next) = Self.table[key] {
                    listed += 1
                    #expect(actions == expected, "\(key)")
                    #expect(machine.state == next, "\(key)")
                } else {
                    #expect(actions.isEmpty, "\(key) should do nothing: \(actions)")
                    #expect(machine.state == state, "\(key) should keep the state")
                }
            }
        }
        #expect(listed == Self.table.count)
    }

    @Test("A whole cold Continue: ask, fetch with the handler's versions, pull, claim, check, deliver, report")
    func coldPath() {
        var machine = Machine(activityType: Self.type)
        #expect(machine.handle(.start) == [.askHandler])
        #expect(machine.handle(.handlerAccepted(versions: Self.versions(2, 4))) == [.fetch(versions: [2...4])])
        #expect(machine.accepted)
        #expect(machine.handle(.fetched(type: Self.type, version: 3)) == [.pullDocument])
        #expect(machine.handle(.documentPulled(needsClaim: true)) == [.claimSession])
        #expect(machine.handle(.sessionClaimed) == [.checkRing])
        #expect(machine.handle(.stillInRing) == [.deliver])
        #expect(machine.handle(.delivered(.delivered, handed: true)) == [.report])
        #expect(machine.handle(.reported) == [.finish(.handled(.delivered))])
        #expect(machine.state == .finished)
    }

    @Test("Nobody takes it: the refusal is the answer, nothing is fetched and nobody is told")
    func refusedBeforeFetch() {
        for outcome in [Outcome.declined, .noHandler, .failed] {
            var machine = Machine(activityType: Self.type)
            _ = machine.handle(.start)
            #expect(machine.handle(.handlerRefused(outcome)) == [.finish(.handled(outcome))])
            #expect(!machine.accepted)
        }
    }

    @Test("A handler that accepts no version: it is told, nothing is fetched")
    func noVersionAtAll() throws {
        var machine = Machine(activityType: Self.type)
        _ = machine.handle(.start)
        #expect(machine.handle(.handlerAccepted(versions: [])) ==
                [.fail(.versionUnsupported, detail: "this handler accepts no activity version"), .finish(.versionUnsupported(nil))])
        #expect(machine.state == .finished)
    }

    @Test("A fetched version the handler does not accept is refused, however the source answered")
    func unacceptedVersion() {
        var machine = Machine(activityType: Self.type)
        _ = machine.handle(.start)
        _ = machine.handle(.handlerAccepted(versions: Self.versions(1, 1)))
        #expect(machine.handle(.fetched(type: Self.type, version: 7)) ==
                [.fail(.versionUnsupported, detail: "version 7 is not one this handler accepts"), .finish(.versionUnsupported(7))])
        #expect(machine.handle(.documentPulled(needsClaim: false)).isEmpty)
    }

    @Test("Another type is refused before any handler sees it: the handler hears noLongerCurrent")
    func otherType() {
        var machine = Machine(activityType: Self.type)
        _ = machine.handle(.start)
        _ = machine.handle(.handlerAccepted(versions: nil))
        #expect(machine.handle(.fetched(type: "org.example.other", version: 1)) ==
                [.fail(.noLongerCurrent, detail: "the member's current activity has another type"), .finish(.otherType)])
    }

    @Test("A fetch failing each way tells the handler its category and the caller its failure")
    func fetchFailingEachWay() {
        let failures: [(ContinueFailure, Failure)] = [(.unreachable, .gone), (.interrupted, .broke), (.timedOut, .late),
                                                      (.noLongerCurrent, .refused), (.versionUnsupported, .refused), (.cancelled, .broke)]
        for (category, failure) in failures {
            var machine = Machine(activityType: Self.type)
            _ = machine.handle(.start)
            _ = machine.handle(.handlerAccepted(versions: nil))
            #expect(machine.handle(.fetchFailed(category, detail: "why", failure)) == [.fail(category, detail: "why"), .finish(.failed(failure))])
            // Late answers of the broken fetch change nothing.
            #expect(machine.handle(.fetched(type: Self.type, version: 1)).isEmpty)
            #expect(machine.handle(.fetchFailed(category, detail: "why", failure)).isEmpty)
        }
    }

    @Test("A document that cannot be pulled, a session that does not move, a member that left: told and ended")
    func laterFailures() {
        var pulling = Self.machine(at: Self.paths[4].1)
        #expect(pulling.handle(.documentFailed(.timedOut, detail: "slow", .late)) == [.fail(.timedOut, detail: "slow"), .finish(.failed(.late))])
        var claiming = Self.machine(at: Self.paths[5].1)
        #expect(claiming.handle(.sessionRefused(.noLongerCurrent, detail: "conflict", .refused)) ==
                [.fail(.noLongerCurrent, detail: "conflict"), .finish(.failed(.refused))])
        var checking = Self.machine(at: Self.paths[6].1)
        #expect(checking.handle(.memberLeft) == [.fail(.unreachable, detail: "the member left the ring"), .finish(.memberLeft)])
    }

    @Test("The handler gone at delivery: its answer ends it, nothing is reported")
    func handlerGone() {
        var machine = Self.machine(at: Self.paths[7].1)
        #expect(machine.handle(.delivered(.failed, handed: false)) == [.finish(.handled(.failed))])
        #expect(machine.handle(.reported).isEmpty)
        #expect(machine.state == .finished)
    }

    @Test("A cancel once delivery began changes nothing; before, the handler that accepted hears cancelled")
    func cancelTiming() {
        var delivering = Self.machine(at: Self.paths[7].1)
        #expect(delivering.handle(.cancelled).isEmpty)
        #expect(delivering.handle(.delivered(.delivered, handed: true)) == [.report])
        #expect(delivering.handle(.cancelled).isEmpty)
        var asking = Machine(activityType: Self.type)
        _ = asking.handle(.start)
        #expect(asking.handle(.cancelled) == [.finish(.cancelled)])
        #expect(asking.handle(.cancelled).isEmpty)
        // The handler answers after the caller heard: it accepted, so it is told.
        #expect(asking.handle(.handlerAccepted(versions: nil)) == [Self.dismissed])
        #expect(asking.handle(.handlerAccepted(versions: nil)).isEmpty)
    }

    @Test("Duplicate events are ignored")
    func duplicates() {
        var machine = Machine(activityType: Self.type)
        _ = machine.handle(.start)
        #expect(machine.handle(.start).isEmpty)
        _ = machine.handle(.handlerAccepted(versions: nil))
        #expect(machine.handle(.handlerAccepted(versions: nil)).isEmpty)
        _ = machine.handle(.fetched(type: Self.type, version: 1))
        #expect(machine.handle(.fetched(type: Self.type, version: 1)).isEmpty)
        #expect(machine.state == .pullingDocument)
    }

    @Test("A held record skips the fetch; its version is checked against the handler that accepted")
    func heldRecord() {
        var fresh = Machine(activityType: Self.type, heldVersion: 3)
        #expect(fresh.handle(.start) == [.askHandler])
        #expect(fresh.handle(.handlerAccepted(versions: Self.versions(1, 5))) == [.deliver])
        #expect(fresh.handle(.delivered(.delivered, handed: true)) == [.report])
        #expect(fresh.handle(.reported) == [.finish(.handled(.delivered))])
        var refused = Machine(activityType: Self.type, heldVersion: 7)
        _ = refused.handle(.start)
        #expect(refused.handle(.handlerAccepted(versions: Self.versions(1, 1))) ==
                [.fail(.versionUnsupported, detail: "version 7 is not one this handler accepts"), .finish(.versionUnsupported(7))])
        var none = Machine(activityType: Self.type, heldVersion: 7)
        _ = none.handle(.start)
        #expect(none.handle(.handlerAccepted(versions: [])) ==
                [.fail(.versionUnsupported, detail: "version 7 is not one this handler accepts"), .finish(.versionUnsupported(7))])
        var declined = Machine(activityType: Self.type, heldVersion: 7)
        _ = declined.handle(.start)
        #expect(declined.handle(.delivered(.declined, handed: false)).isEmpty)
        #expect(declined.handle(.handlerRefused(.declined)) == [.finish(.handled(.declined))])
    }

    @Test("The category's message and its retry rule")
    func categoryWords() {
        #expect(ContinueFailure.interrupted.message() == "interrupted")
        #expect(ContinueFailure.timedOut.message("slow") == "timedOut: slow")
        #expect(ContinueFailure(errorMessage: "unreachable: no endpoint") == .unreachable)
        #expect(ContinueFailure(errorMessage: "the member refused") == nil)
        #expect(ContinueFailure.allCases.filter { !$0.isRetryable } == [.versionUnsupported, .noLongerCurrent])
    }
}
