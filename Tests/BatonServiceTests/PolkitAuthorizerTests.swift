// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonDBus
import BatonTestBus
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// PolkitAuthorizer against a stand-in for polkitd on a private bus (named as a fake: the real
/// polkitd is PolkitTests'): what it sends, and that an unanswered question is a refusal in
/// bounded time while the connection keeps serving.
@Suite("BatonServiceTests: the polkit adapter's call and its bound", .serialized)
struct PolkitAuthorizerTests {
    /// Owns org.freedesktop.PolicyKit1 and records each CheckAuthorization; `answer` nil never replies.
    final class Recorder: Sendable {
        let calls = Mutex<[[DBusValue]]>([])
    }

    final class FakePolkitAuthority: Sendable {
        let connection: DBusConnection
        let recorder = Recorder()
        var received: [[DBusValue]] { recorder.calls.withLock { $0 } }

        init(bus: TestBus, answer: (authorized: Bool, challenge: Bool)?) async throws {
            connection = try DBusConnection(bus: .address(bus.address))
            let recorder = self.recorder
            let method = DBusMethod("CheckAuthorization", in: [DBusArgument("subject", "(sa{sv})"), DBusArgument("action_id", "s"),
                                                               DBusArgument("details", "a{ss}"), DBusArgument("flags", "u"),
                                                               DBusArgument("cancellation_id", "s")],
                                    out: [DBusArgument("result", "(bba{ss})")]) { call in
                recorder.calls.withLock { $0.append(call.arguments) }
                guard let answer else {
                    try await Task.sleep(for: .seconds(600))
                    return []
                }
                return [.structure([.boolean(answer.authorized), .boolean(answer.challenge),
                                    .dictionary(keySignature: "s", valueSignature: "s", [:])])]
            }
            try await connection.export([DBusInterface(Polkit.authorityInterface, methods: [method])], at: Polkit.authorityPath)
            _ = try await connection.requestName(Polkit.busName, flags: [.doNotQueue])
        }

        deinit { connection.close() }
    }

    @Test func asksForTheCallersBusNameAndLetsPolkitPromptOnlyForPairing() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let polkit = try await FakePolkitAuthority(bus: bus, answer: (authorized: true, challenge: false))
        let daemon = try DBusConnection(bus: .address(bus.address))
        defer { daemon.close() }
        let authorizer = PolkitAuthorizer(connection: daemon)
        #expect(await authorizer.check(.continueSuggestions, caller: ":1.77") == .authorized)
        #expect(await authorizer.check(.pair, caller: ":1.78") == .authorized)
        let calls = polkit.received
        #expect(calls.count == 2)
        #expect(calls.first == Polkit.checkArguments(subject: ":1.77", action: .continueSuggestions, interactive: false))
        #expect(calls.first?[3] == .uint32(0))
        #expect(calls.last?[1] == .string("org.baton.pair") && calls.last?[3] == .uint32(1))
    }

    @Test func noPolkitOnTheBusIsUnavailable() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let daemon = try DBusConnection(bus: .address(bus.address))
        defer { daemon.close() }
        #expect(await PolkitAuthorizer(connection: daemon).check(.continueSuggestions, caller: ":1.5") == .unavailable)
    }

    /// The timeout is what is timed here: a polkitd that never answers is a refusal once it passes,
    /// and meanwhile the same connection serves other calls.
    @Test func anUnansweredQuestionIsTimedOutAndNothingWaitsForIt() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let polkit = try await FakePolkitAuthority(bus: bus, answer: nil)
        let daemon = try DBusConnection(bus: .address(bus.address))
        defer { daemon.close() }
        let authorizer = PolkitAuthorizer(connection: daemon, timeout: .seconds(1), interactiveTimeout: .seconds(2))
        let started = ContinuousClock.now
        async let stuck = authorizer.check(.continueSuggestions, caller: ":1.9")
        #expect(try await eventually(timeout: .seconds(30)) { !polkit.received.isEmpty })
        // The connection is not held by the pending question.
        #expect(try await daemon.nameHasOwner(Polkit.busName))
        #expect(await stuck == .timedOut)
        #expect(ContinuousClock.now - started >= .seconds(1))
        #expect(CallerAccess.decide(.continueSuggestions, privileged: false, polkit: .timedOut)
                != .allowed(.polkit))
        let interactiveStart = ContinuousClock.now
        #expect(await authorizer.check(.pair, caller: ":1.9") == .timedOut)
        #expect(ContinuousClock.now - interactiveStart >= .seconds(2))
    }
}
