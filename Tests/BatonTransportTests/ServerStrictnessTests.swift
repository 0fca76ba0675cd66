// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonCrypto
import Synchronization
import Testing

/// What `FrameDispatcher.serve` returned, for a test to look at after the connection ended.
final class ServeOutcome: Sendable {
    private let outcome = Mutex<TransportError?>(nil)
    func record(_ error: TransportError) { outcome.withLock { $0 = error } }

    /// Waits (polling, bounded) for serve to end.
    func wait(within seconds: Double = 5) async -> TransportError? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while outcome.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return outcome.withLock { $0 }
    }
}

@Suite("Server strictness: Hello first, Hello never cached, reused ids checked")
struct ServerStrictnessTests {
    /// Counts Hellos and other requests apart; other requests get an ActivityPayload naming their run.
    private struct CountingHandler {
        let hellos = InvocationCounter()
        let requests = InvocationCounter()

        func makeDispatcher() -> FrameDispatcher {
            FrameDispatcher { [hellos, requests] request, peer in
                if request.type == .hello { return try helloReply(to: request, from: peer, run: hellos.increment()) }
                return Frame(type: .activityPayload, requestID: 0, payload: [UInt8(truncatingIfNeeded: requests.increment())])
            }
        }
    }

    /// Serves every connection of `pair` and records how the last one ended.
    private func serveAll(_ pair: PinnedPair, _ dispatcher: FrameDispatcher, outcome: ServeOutcome) -> Task<Void, Never> {
        Task {
            while let channel = try? await pair.listener.accept() {
                Task { outcome.record(await dispatcher.serve(channel)) }
            }
        }
    }

    private let fetch = Frame(type: .fetchActivity, requestID: 7,
                              payload: ActivityReference(typeHash: TypeHash(value: 1), revision: 2).payload)

    @Test("A first frame that is not Hello gets Error(malformed) with its request id, then the connection closes")
    func firstFrameMustBeHello() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let handler = CountingHandler()
            let outcome = ServeOutcome()
            let serving = serveAll(pair, handler.makeDispatcher(), outcome: outcome)
            defer { serving.cancel() }

            let exchange = FrameExchange(channel: try await pair.connect())
            do throws(TransportError) {
                _ = try await exchange.request(fetch)
                Issue.record("a FetchActivity before Hello was answered")
            } catch {
                // FrameExchange only returns the Error frame that carries the request's id.
                guard case .remote(let frame) = error else { throw error }
                #expect(frame.code == .malformed)
            }
            await #expect(throws: TransportError.closed) { try await exchange.channel.receive(timeout: .seconds(5)) }
            #expect(handler.requests.value == 0)
            guard case .openingRefused(let sent)? = await outcome.wait() else {
                Issue.record("serve did not end with .openingRefused")
                return
            }
            #expect(sent.code == .malformed)
        }
    }

    @Test("A refused Hello gets its Error frame, then the connection closes and later requests are not served")
    func refusedHelloClosesConnection() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let handler = CountingHandler()
            let outcome = ServeOutcome()
            let serving = serveAll(pair, handler.makeDispatcher(), outcome: outcome)
            defer { serving.cancel() }

            let exchange = FrameExchange(channel: try await pair.connect())
            // A Hello naming another device than the TLS peer.
            let impostor = try Ed25519PrivateKey()
            await #expect(throws: TransportError.remote(ErrorFrame(code: .malformed, message: "Hello names another device"))) {
                try await exchange.request(helloFrame(from: impostor))
            }
            do throws(TransportError) {
                _ = try await exchange.request(fetch, timeout: .seconds(5))
                Issue.record("a FetchActivity after a refused Hello was answered")
            } catch {
                // The server closed after its Error frame: the request ends with the connection.
                #expect(error == .closed)
            }
            #expect(handler.requests.value == 0)
            #expect(handler.hellos.value == 1)
            guard case .openingRefused? = await outcome.wait() else {
                Issue.record("serve did not end with .openingRefused")
                return
            }
        }
    }

    @Test("Hellos with request id 0 on two connections both reach the handler: Hello is never cached")
    func hellosAreAnsweredAfresh() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let handler = CountingHandler()
            let serving = serveAll(pair, handler.makeDispatcher(), outcome: ServeOutcome())
            defer { serving.cancel() }

            let first = FrameExchange(channel: try await pair.connect())
            let second = FrameExchange(channel: try await pair.connect())
            let firstReply = try await first.request(helloFrame(from: pair.clientIdentity))
            let secondReply = try await second.request(helloFrame(from: pair.clientIdentity))
            #expect(firstReply.payload == [1])
            #expect(secondReply.payload == [2])
            #expect(handler.hellos.value == 2)
            // The connections stay open for requests after their Hello.
            #expect(try await second.request(fetch).payload == [1])
        }
    }

    @Test("A cached request id reused with another type or payload gets Error(malformed), not the cached reply")
    func reusedIDWithOtherRequestIsMalformed() async throws {
        let handler = CountingHandler()
        let dispatcher = handler.makeDispatcher()
        let peer = DeviceID(identityKey: try Ed25519PrivateKey().publicKey)
        let original = await dispatcher.reply(to: fetch, from: peer)
        #expect(original.type == .activityPayload)

        var otherPayload = fetch
        otherPayload.payload = ActivityReference(typeHash: TypeHash(value: 1), revision: 3).payload
        var otherType = fetch
        otherType.type = .activityContinued
        for reused in [otherPayload, otherType] {
            let reply = await dispatcher.reply(to: reused, from: peer)
            #expect(reply.type == .error)
            #expect(reply.requestID == fetch.requestID)
            #expect(try ErrorFrame(payload: reply.payload).code == .malformed)
        }
        // The true retry is still answered from the cache, and the handler ran once in all.
        #expect(await dispatcher.reply(to: fetch, from: peer) == original)
        #expect(handler.requests.value == 1)
    }

    @Test("A duplicate with another payload arriving while the first is handled is malformed, not joined")
    func reusedIDWhileInFlightIsMalformed() async throws {
        let started = InvocationCounter()
        let dispatcher = FrameDispatcher { _, _ in
            _ = started.increment()
            try await Task.sleep(for: .milliseconds(200))
            return Frame(type: .ack, requestID: 0, payload: [])
        }
        let peer = DeviceID(identityKey: try Ed25519PrivateKey().publicKey)
        let first = Frame(type: .activityContinued, requestID: 4, payload: [0, 0, 0, 1, 0, 0, 0, 1])
        var other = first
        other.payload = [0, 0, 0, 1, 0, 0, 0, 2]
        async let firstReply = dispatcher.reply(to: first, from: peer)
        while started.value == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let otherReply = await dispatcher.reply(to: other, from: peer)
        #expect(otherReply.type == .error)
        #expect(try ErrorFrame(payload: otherReply.payload).code == .malformed)
        #expect(await firstReply.type == .ack)
        #expect(started.value == 1)
    }
}
