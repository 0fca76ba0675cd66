// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonCrypto
import Synchronization
import Testing

/// Counts handler invocations so a test can tell cached answers from fresh ones.
final class InvocationCounter: Sendable {
    private let count = Mutex(0)
    func increment() -> Int { count.withLock { $0 += 1; return $0 } }
    var value: Int { count.withLock { $0 } }
}

@Suite("Request/response over channels")
struct FrameExchangeTests {
    /// A dispatcher answering FetchActivity with an ActivityPayload that names how often it ran
    /// (Hellos are answered but not counted).
    private func makeDispatcher(_ counter: InvocationCounter) -> FrameDispatcher {
        FrameDispatcher { request, peer in
            if request.type == .hello { return try helloReply(to: request, from: peer, run: 0) }
            let run = counter.increment()
            guard request.type == .activityContinued || request.type == .fetchActivity else {
                throw ErrorFrame(code: .malformed, message: "unexpected \(request.type)")
            }
            return Frame(type: .activityPayload, requestID: 0, payload: [UInt8(run)])
        }
    }

    @Test("A retried request id is answered from the cache, also on a new connection; the handler runs once")
    func retriedRequestAnsweredOnce() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let counter = InvocationCounter()
            let dispatcher = makeDispatcher(counter)
            let serving = Task {
                while let channel = try? await pair.listener.accept() {
                    Task { _ = await dispatcher.serve(channel) }
                }
            }
            defer { serving.cancel() }

            let ids = RequestIDSource(startingAt: 100)
            let request = Frame(type: .activityContinued, requestID: ids.make(),
                                payload: ActivityReference(typeHash: TypeHash(value: 1), revision: 2).payload)
            let exchange = FrameExchange(channel: try await pair.connect())
            try await sayHello(exchange, as: pair.clientIdentity)
            let first = try await exchange.request(request)
            #expect(first.requestID == request.requestID)
            #expect(first.payload == [1])
            // Retry on the same channel (lost reply) and on a new one (broken connection).
            #expect(try await exchange.request(request) == first)
            exchange.channel.close()
            let second = FrameExchange(channel: try await pair.connect())
            try await sayHello(second, as: pair.clientIdentity)
            #expect(try await second.request(request) == first)
            #expect(counter.value == 1)

            // A new request id runs the handler again.
            let fresh = Frame(type: .activityContinued, requestID: ids.make(), payload: request.payload)
            #expect(try await second.request(fresh).payload == [2])
            #expect(counter.value == 2)
        }
    }

    @Test("A peer sending frames of other request ids cannot keep a request waiting past its timeout")
    func strayFramesDoNotExtendTheWait() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            // The peer never answers: it sends a frame of another request id every 100 ms.
            let peer = Task {
                guard let channel = try? await pair.listener.accept() else { return 0 }
                defer { channel.close() }
                var sent = 0
                while !Task.isCancelled, (try? await channel.send([Frame(type: .ack, requestID: 7, payload: [])])) != nil {
                    sent += 1
                    try? await Task.sleep(for: .milliseconds(100))
                }
                return sent
            }
            let exchange = FrameExchange(channel: try await pair.connect())
            defer { exchange.channel.close() }
            let request = Frame(type: .fetchActivity, requestID: 8, payload: ActivityReference(typeHash: TypeHash(value: 1), revision: 2).payload)
            let started = ContinuousClock.now
            await #expect(throws: TransportError.timedOut) { _ = try await exchange.request(request, timeout: .seconds(1)) }
            let waited = ContinuousClock.now - started
            // The peer keeps sending until the request ended: a wait that each stray frame extended
            // would never end. The upper bound only has to be finite (it held 5 s until a run beside
            // two CPU hogs took longer to schedule the timeout).
            #expect(waited >= .seconds(1) && waited < .seconds(60), "waited \(waited)")
            exchange.channel.close()
            peer.cancel()
            #expect(await peer.value >= 2, "the peer sent its stray frames")
        }
    }

    @Test("Duplicates arriving while the first is still being handled wait for its reply")
    func concurrentDuplicatesShareOneRun() async throws {
        let counter = InvocationCounter()
        let dispatcher = FrameDispatcher { _, _ in
            let run = counter.increment()
            try await Task.sleep(for: .milliseconds(100))
            return Frame(type: .activityPayload, requestID: 0, payload: [UInt8(truncatingIfNeeded: run)])
        }
        let peer = DeviceID(identityKey: try Ed25519PrivateKey().publicKey)
        let request = Frame(type: .activityContinued, requestID: 9, payload: [0, 0, 0, 1, 0, 0, 0, 1])
        let replies = await withTaskGroup(of: Frame.self) { group in
            for _ in 0..<5 { group.addTask { await dispatcher.reply(to: request, from: peer) } }
            return await group.reduce(into: [Frame]()) { $0.append($1) }
        }
        #expect(counter.value == 1)
        #expect(Set(replies).count == 1)
        #expect(replies.first?.requestID == 9)
    }

    @Test("Handler errors become Error frames that the requester gets as .remote")
    func handlerErrorBecomesRemoteError() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let dispatcher = makeDispatcher(InvocationCounter())
            let serving = Task {
                if let channel = try? await pair.listener.accept() { _ = await dispatcher.serve(channel) }
            }
            defer { serving.cancel() }
            let exchange = FrameExchange(channel: try await pair.connect())
            try await sayHello(exchange, as: pair.clientIdentity)
            await #expect(throws: TransportError.remote(ErrorFrame(code: .malformed, message: "unexpected ringSync"))) {
                try await exchange.request(Frame(type: .ringSync, requestID: 5, payload: []))
            }
        }
    }

    @Test("A channel marked endAfterReply still gets the reply being made, then ends; the peer's next channel does not")
    func endAfterReplySendsTheReplyThenCloses() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            // The handler marks the channels being served while it answers (as the transfer does when
            // the RingSync it answers removes the peer), then replies.
            let served = Mutex<[SecureChannel]>([])
            let dispatcher = Mutex<FrameDispatcher?>(nil)
            let counter = InvocationCounter()
            let made = FrameDispatcher { request, peer in
                if request.type == .hello { return try helloReply(to: request, from: peer, run: 0) }
                let run = counter.increment()
                if run == 1 { dispatcher.withLock { $0 }?.endAfterReply(served.withLock { $0 }) }
                return Frame(type: .activityPayload, requestID: 0, payload: [UInt8(run)])
            }
            dispatcher.withLock { $0 = made }
            let serving = Task {
                while let channel = try? await pair.listener.accept() {
                    served.withLock { $0.append(channel) }
                    Task { _ = await made.serve(channel) }
                }
            }
            defer { serving.cancel() }
            let ids = RequestIDSource(startingAt: 10)
            let payload = ActivityReference(typeHash: TypeHash(value: 1), revision: 2).payload
            let exchange = FrameExchange(channel: try await pair.connect())
            try await sayHello(exchange, as: pair.clientIdentity)
            #expect(try await exchange.request(Frame(type: .fetchActivity, requestID: ids.make(), payload: payload)).payload == [1])
            await #expect(throws: TransportError.self) {
                try await exchange.request(Frame(type: .fetchActivity, requestID: ids.make(), payload: payload))
            }
            // A new channel of the same peer is served as usual, request after request.
            let next = FrameExchange(channel: try await pair.connect())
            try await sayHello(next, as: pair.clientIdentity)
            #expect(try await next.request(Frame(type: .fetchActivity, requestID: ids.make(), payload: payload)).payload == [2])
            #expect(try await next.request(Frame(type: .fetchActivity, requestID: ids.make(), payload: payload)).payload == [3])
        }
    }

    @Test("Request ids skip 0 and keep increasing across wrap-around")
    func requestIDsSkipZero() {
        let ids = RequestIDSource(startingAt: UInt32.max)
        #expect([ids.make(), ids.make(), ids.make()] == [UInt32.max, 1, 2])
    }
}

/// The Hello a test client opens with (request id 0, protocol §6.2).
func helloFrame(from identity: Ed25519PrivateKey) -> Frame {
    Frame(type: .hello, requestID: 0,
          payload: HelloMessage(deviceID: DeviceID(identityKey: identity.publicKey), rosterDigest: 1, maxFramePayload: 262_144).payload)
}

/// Opens a connection as the protocol requires, with a Hello naming `identity`.
func sayHello(_ exchange: FrameExchange, as identity: Ed25519PrivateKey) async throws {
    _ = try await exchange.request(helloFrame(from: identity))
}

/// A test handler's answer to Hello: refused as the service does when it names another device than the
/// TLS peer; otherwise a Hello whose payload carries `run`, so fresh answers can be told from cached ones.
func helloReply(to request: Frame, from peer: DeviceID, run: Int) throws -> Frame {
    guard let hello = try? HelloMessage(payload: request.payload), hello.deviceID == peer else {
        throw ErrorFrame(code: .malformed, message: "Hello names another device")
    }
    return Frame(type: .hello, requestID: 0, payload: [UInt8(truncatingIfNeeded: run)])
}
