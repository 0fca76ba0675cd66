// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
@testable import BatonService
import BatonTransport
import Synchronization
import Testing

/// Time that the test moves by hand. A fake: tests only.
final class FakeWallClock: WallClock {
    private let now = Mutex<Int64>(1_800_000_000)
    func unixSeconds() -> Int64 { now.withLock { $0 } }
    func advance(_ seconds: Int64) { now.withLock { $0 += seconds } }
}

/// Codes shown by a driver, awaitable from the test.
final class CodeBox: Sendable {
    private let stream: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    init() { (stream, continuation) = AsyncStream.makeStream() }
    var handler: PairingDriver.CodeHandler { { [continuation] code in continuation.yield(code) } }
    func next() async -> String? { var it = stream.makeAsyncIterator(); return await it.next() }
}

func ringKeeper(_ name: String) throws -> RingKeeper {
    try RingKeeper.create(name: name, today: testDay, random: SystemRandom())
}

func session(_ role: PairingSession.Role, _ id: [UInt8], _ keeper: RingKeeper) throws -> PairingSession {
    try PairingSession(role: role, sessionID: id, ephemeralKey: X25519PrivateKey(), nonce: SystemRandom().bytes(16), local: keeper.pairingInfo())
}

/// Connects an initiator to a responder over real loopback TCP.
func connectedPair(clock: FakeWallClock = FakeWallClock()) async throws -> (initiator: PairingDriver, responder: PairingDriver,
                                                                         initiatorCodes: CodeBox, responderCodes: CodeBox) {
    let listener = try PlainFrameListener(host: "127.0.0.1", port: 0)
    defer { listener.close() }
    async let accepted = listener.accept(timeout: .seconds(5))
    let client = try await PlainFrameConnector.connect(host: "127.0.0.1", port: listener.port)
    let server = try await accepted
    let id = SystemRandom().bytes(8)
    let codesI = CodeBox(), codesR = CodeBox()
    let initiator = PairingDriver(session: try session(.initiator, id, try ringKeeper("alpha")), channel: client, clock: clock, onCode: codesI.handler)
    let responder = PairingDriver(session: try session(.responder, id, try ringKeeper("beta")), channel: server, clock: clock, onCode: codesR.handler)
    return (initiator, responder, codesI, codesR)
}

@Suite struct PairingOverTCPTests {
    @Test func pairsWhenBothConfirmTheSameCode() async throws {
        let p = try await connectedPair()
        async let resultI = p.initiator.run()
        async let resultR = p.responder.run()
        let codeI = await p.initiatorCodes.next(), codeR = await p.responderCodes.next()
        #expect(codeI != nil && codeI == codeR)
        await p.initiator.confirm(true)
        await p.responder.confirm(true)
        let i = try (await resultI).get(), r = try (await resultR).get()
        #expect(i.peer.name == "beta")
        #expect(r.peer.name == "alpha")
    }

    @Test func refusalOnOneSidePairsNeither() async throws {
        let p = try await connectedPair()
        async let resultI = p.initiator.run()
        async let resultR = p.responder.run()
        _ = await p.initiatorCodes.next()
        _ = await p.responderCodes.next()
        await p.initiator.confirm(true)
        await p.responder.confirm(false)
        #expect(await resultI == .failure(.rejected))
        #expect(await resultR == .failure(.rejected))
    }

    @Test func silentPeerTimesOut() async throws {
        let clock = FakeWallClock()
        let p = try await connectedPair(clock: clock)
        async let resultI = p.initiator.run()
        async let resultR = p.responder.run()
        _ = await p.initiatorCodes.next()
        clock.advance(PairingSession.timeoutSeconds + 1)  // nobody answers the code
        #expect(await resultI == .failure(.timedOut))
        #expect(await resultR == .failure(.timedOut))
    }

    @Test func manInTheMiddleSeesDifferentCodesOnEachSide() async throws {
        // Mallory accepts the initiator's connection and opens her own to the responder.
        let listenerForAlice = try PlainFrameListener(host: "127.0.0.1", port: 0)
        let listenerForBob = try PlainFrameListener(host: "127.0.0.1", port: 0)
        defer { listenerForAlice.close(); listenerForBob.close() }
        async let malloryFromAlice = listenerForAlice.accept(timeout: .seconds(5))
        let aliceSide = try await PlainFrameConnector.connect(host: "127.0.0.1", port: listenerForAlice.port)
        async let bobFromMallory = listenerForBob.accept(timeout: .seconds(5))
        let malloryToBob = try await PlainFrameConnector.connect(host: "127.0.0.1", port: listenerForBob.port)
        let id = SystemRandom().bytes(8)
        let clock = FakeWallClock()
        let mallory = try ringKeeper("mallory")
        let codesA = CodeBox(), codesB = CodeBox(), codesM1 = CodeBox(), codesM2 = CodeBox()
        let alice = PairingDriver(session: try session(.initiator, id, try ringKeeper("alice")), channel: aliceSide, clock: clock, onCode: codesA.handler)
        let bob = PairingDriver(session: try session(.responder, id, try ringKeeper("bob")), channel: try await bobFromMallory, clock: clock, onCode: codesB.handler)
        let m1 = PairingDriver(session: try session(.responder, id, mallory), channel: try await malloryFromAlice, clock: clock, onCode: codesM1.handler)
        let m2 = PairingDriver(session: try session(.initiator, id, mallory), channel: malloryToBob, clock: clock, onCode: codesM2.handler)
        async let ra = alice.run(); async let rb = bob.run(); async let r1 = m1.run(); async let r2 = m2.run()
        let codeAlice = await codesA.next(), codeBob = await codesB.next()
        _ = await codesM1.next(); _ = await codesM2.next()
        #expect(codeAlice != nil && codeBob != nil)
        #expect(codeAlice != codeBob)  // 1 in 10⁶ chance of a false failure
        // People comparing codes refuse; Mallory's own confirmations do not help her.
        await alice.confirm(false); await bob.confirm(false)
        await m1.confirm(true); await m2.confirm(true)
        #expect(await ra == .failure(.rejected))
        #expect(await rb == .failure(.rejected))
        _ = await (r1, r2)
    }

    @Test func garbageFromThePeerFailsCleanly() async throws {
        let listener = try PlainFrameListener(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        async let accepted = listener.accept(timeout: .seconds(5))
        let client = try await PlainFrameConnector.connect(host: "127.0.0.1", port: listener.port)
        let server = try await accepted
        let responder = PairingDriver(session: try session(.responder, SystemRandom().bytes(8), try ringKeeper("beta")),
                                      channel: server, clock: FakeWallClock(), onCode: CodeBox().handler)
        async let result = responder.run()
        try await client.send(Frame(type: .pairReveal, requestID: 0, payload: [UInt8](repeating: 1, count: 48)))
        #expect(await result == .failure(.protocolError("unexpectedMessage(\"pairReveal now\")")))
        // The responder told the peer before closing.
        let reply = try await client.receive(timeout: .seconds(120))
        #expect(reply.type == .error)
    }
}
