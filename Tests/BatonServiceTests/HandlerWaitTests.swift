// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// The wait for a launched app's handler (Handlers.waitForHandler), without a bus: the
/// registration resumes the wait at once, the deadline ends it when none comes.
@Suite("BatonServiceTests: the wait for a launched app's handler")
struct HandlerWaitTests {
    struct Installed: DesktopEntrySource {
        func entries() -> [DesktopEntry] {
            [DesktopEntry(id: "org.example.Late", activityTypes: ["org.example.Late.t"], dbusActivatable: false, exec: "late")]
        }
    }

    /// Launch registers the app's handler from another task after `delay` (or never: nil); every
    /// WillContinue is answered yes.
    final class LaunchingCalls: HandlerCalls {
        let delay: Duration?
        let handlers = Mutex<Handlers?>(nil)
        let launches = Mutex(0)

        init(delay: Duration?) { self.delay = delay }

        func launch(type: String, agent: HandlerKey) async -> Result<String?, ApplicationCallError> {
            launches.withLock { $0 += 1 }
            if let delay, let handlers = handlers.withLock({ $0 }) {
                Task {
                    try? await Task.sleep(for: delay)
                    try? await handlers.registerHandler(HandlerKey(connection: ":1.9", path: "/late"), uid: 1000, types: [type], versions: nil)
                }
            }
            return .success("org.example.Late")
        }

        func willContinue(type: String, from device: String, handler: HandlerKey) async -> Result<Bool, ApplicationCallError> { .success(true) }
        func continueActivity(_ record: ActivityRecord, document: PulledDocument?, from device: String, handler: HandlerKey) async -> ContinueCallOutcome {
            .delivered
        }
        func failedToContinue(type: String, _ failure: ContinuationFailure, message: String, handler: HandlerKey) async {}
    }

    final class Errors: Sendable {
        let list = Mutex<[ErrorCategory]>([])
        var recorded: [ErrorCategory] { list.withLock { $0 } }
    }

    final class Log: ServiceLog {
        func log(_ line: String) {}
    }

    static func handlers(wait: Duration, calls: LaunchingCalls, errors: Errors) async throws -> Handlers {
        let handlers = Handlers(configuration: ServiceConfiguration(handlerWait: wait), desktopEntries: Installed(), calls: calls,
                                documents: Documents(logger: Log()), logger: Log(),
                                recordError: { category in errors.list.withLock { $0.append(category) } })
        calls.handlers.withLock { $0 = handlers }
        try await handlers.registerAgent(HandlerKey(connection: ":1.5", path: "/agent"), uid: 1000)
        return handlers
    }

    @Test func aRegistrationEndsTheWaitLongBeforeTheDeadline() async throws {
        let calls = LaunchingCalls(delay: .milliseconds(200))
        let errors = Errors()
        let handlers = try await Self.handlers(wait: .seconds(120), calls: calls, errors: errors)
        let started = ContinuousClock.now
        let answer = await handlers.willContinue(type: "org.example.Late.t", from: "Laptop", uid: 1000)
        #expect(answer == .accepted(HandlerTicket(uid: 1000, type: "org.example.Late.t", handler: HandlerKey(connection: ":1.9", path: "/late"))))
        // The deadline is 120 s: returning well before it means the registration woke the wait.
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(calls.launches.withLock { $0 } == 1)
        #expect(errors.recorded.isEmpty)
    }

    @Test func withoutARegistrationTheDeadlineEndsTheWaitAsALaunchFailure() async throws {
        let calls = LaunchingCalls(delay: nil)
        let errors = Errors()
        let handlers = try await Self.handlers(wait: .milliseconds(300), calls: calls, errors: errors)
        #expect(await handlers.willContinue(type: "org.example.Late.t", from: "Laptop", uid: 1000) == .refused(.launchFailed))
        #expect(errors.recorded == [.launchFailed])
        #expect(await handlers.waiters.isEmpty, "the ended wait leaves no waiter behind")
    }

    @Test func anotherUsersOrTypesRegistrationDoesNotEndTheWait() async throws {
        let calls = LaunchingCalls(delay: nil)
        let errors = Errors()
        let handlers = try await Self.handlers(wait: .seconds(2), calls: calls, errors: errors)
        async let answer = handlers.willContinue(type: "org.example.Late.t", from: "Laptop", uid: 1000)
        try await Task.sleep(for: .milliseconds(100))
        try await handlers.registerHandler(HandlerKey(connection: ":1.7", path: "/other"), uid: 1001, types: ["org.example.Late.t"], versions: nil)
        try await handlers.registerHandler(HandlerKey(connection: ":1.8", path: "/other"), uid: 1000, types: ["org.example.Other.t"], versions: nil)
        #expect(await answer == .refused(.launchFailed))
    }
}
