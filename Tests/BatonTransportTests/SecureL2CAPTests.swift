// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Dispatch
import Synchronization
import Testing
@testable import BatonTransport

/// One direction of an in-memory SDU link: SDUs queue in order until the other end takes them.
final class FakeSDUQueue: Sendable {
    private struct State {
        var sdus: [[UInt8]] = []
        var closed = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func push(_ sdu: [UInt8]) -> Bool {
        let waiter: CheckedContinuation<Void, Never>?? = state.withLock { state in
            guard !state.closed else { return nil }
            state.sdus.append(sdu)
            defer { state.waiter = nil }
            return .some(state.waiter)
        }
        guard let waiter else { return false }
        waiter?.resume()
        return true
    }

    func close() {
        let waiter = state.withLock { state in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func pop() async -> [UInt8]? {
        while true {
            let next: [UInt8]?? = state.withLock { state in
                if !state.sdus.isEmpty { return .some(state.sdus.removeFirst()) }
                return state.closed ? .some(nil) : nil
            }
            if let next { return next }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state in
                    if !state.sdus.isEmpty || state.closed { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }
}

/// A fake L2CAP channel: two in-memory queues, SDUs limited to `sduSize`, and a record of every SDU
/// sent (to check the size limit and that nothing went out in the clear).
final class FakeSDUPipe: SDUPipe {
    let sduSize: Int
    private let outgoing: FakeSDUQueue
    private let incoming: FakeSDUQueue
    let sent = Mutex<[[UInt8]]>([])

    init(sduSize: Int, outgoing: FakeSDUQueue, incoming: FakeSDUQueue) {
        self.sduSize = sduSize
        self.outgoing = outgoing
        self.incoming = incoming
    }

    static func pair(sduSize: Int) -> (FakeSDUPipe, FakeSDUPipe) {
        let forward = FakeSDUQueue()
        let backward = FakeSDUQueue()
        return (FakeSDUPipe(sduSize: sduSize, outgoing: forward, incoming: backward),
                FakeSDUPipe(sduSize: sduSize, outgoing: backward, incoming: forward))
    }

    func sendSDU(_ sdu: [UInt8], until deadline: DispatchTime, closeOnStall: Bool) async throws(TransportError) {
        guard !sdu.isEmpty, sdu.count <= sduSize else { throw .invalidSDU("fake pipe got an SDU of \(sdu.count) bytes") }
        sent.withLock { $0.append(sdu) }
        guard outgoing.push(sdu) else { throw .closed }
    }

    func receiveSDU(until deadline: DispatchTime) async throws(TransportError) -> [UInt8] {
        guard let sdu = await incoming.pop() else { throw .closed }
        return sdu
    }

    func close() {
        outgoing.close()
        incoming.close()
    }
}

@Suite("Pinned TLS over SDUs (BLE fallback, §8.3)")
struct SecureL2CAPTests {
    let alice: Ed25519PrivateKey
    let bob: Ed25519PrivateKey

    init() throws {
        alice = try Ed25519PrivateKey()
        bob = try Ed25519PrivateKey()
    }

    @Test func pinnedPeersExchangeFramesLargerThanTheSDUSize() async throws {
        let (alicePipe, bobPipe) = FakeSDUPipe.pair(sduSize: 64)
        let aliceSide = try SecureL2CAP(identity: alice, pins: { [bob] in PinSet([bob.publicKey]) })
        let bobSide = try SecureL2CAP(identity: bob, pins: { [alice] in PinSet([alice.publicKey]) })
        async let serverChannel = bobSide.accept(pipe: bobPipe)
        let client = try await aliceSide.connect(pipe: alicePipe)
        let server = try await serverChannel
        #expect(client.peerIdentityKey == bob.publicKey)
        #expect(server.peerIdentityKey == alice.publicKey)

        let marker = Array("a payload that must never be seen in the clear".utf8)
        let payload = (0..<40).flatMap { _ in marker }
        try await client.send(Frame(type: .ringSync, requestID: 7, payload: payload))
        let received = try await server.receive(timeout: .seconds(5))
        #expect(received.type == .ringSync && received.requestID == 7 && received.payload == payload)
        try await server.send(Frame(type: .ack, requestID: 7, payload: []))
        #expect(try await client.receive(timeout: .seconds(5)).type == .ack)

        let sentByAlice = alicePipe.sent.withLock { $0 }
        #expect(sentByAlice.allSatisfy { $0.count <= 64 })
        let stream = sentByAlice.flatMap { $0 }
        #expect(!stream.windows(ofCount: marker.count).contains { Array($0) == marker })
        client.close()
        await #expect(throws: TransportError.closed) { _ = try await server.receive(timeout: .seconds(5)) }
    }

    @Test func anUnpinnedClientIsRefusedByTheServer() async throws {
        let stranger = try Ed25519PrivateKey()
        let (strangerPipe, bobPipe) = FakeSDUPipe.pair(sduSize: 100)
        let strangerSide = try SecureL2CAP(identity: stranger, pins: { [bob] in PinSet([bob.publicKey]) })
        let bobSide = try SecureL2CAP(identity: bob, pins: { [alice] in PinSet([alice.publicKey]) })
        async let client = try? strangerSide.connect(pipe: strangerPipe)
        await #expect(throws: TransportError.peerNotRecognised) {
            _ = try await bobSide.accept(pipe: bobPipe)
        }
        // In TLS 1.3 the client may finish first; then its first receive fails.
        if let channel = await client {
            await #expect(throws: TransportError.self) { _ = try await channel.receive(timeout: .seconds(5)) }
        }
    }

    @Test func anUnpinnedServerIsRefusedByTheClient() async throws {
        let stranger = try Ed25519PrivateKey()
        let (alicePipe, strangerPipe) = FakeSDUPipe.pair(sduSize: 100)
        let aliceSide = try SecureL2CAP(identity: alice, pins: { [bob] in PinSet([bob.publicKey]) })
        let strangerSide = try SecureL2CAP(identity: stranger, pins: { [alice] in PinSet([alice.publicKey]) })
        async let server = try? strangerSide.accept(pipe: strangerPipe)
        await #expect(throws: TransportError.peerNotRecognised) {
            _ = try await aliceSide.connect(pipe: alicePipe)
        }
        // The client proved itself first (§8.1) and this server pins it, so the server side may have
        // finished; the client refused it and left.
        if let channel = await server {
            await #expect(throws: TransportError.closed) { _ = try await channel.receive(timeout: .seconds(5)) }
        }
    }
}

private extension Array {
    func windows(ofCount count: Int) -> [ArraySlice<Element>] {
        guard self.count >= count else { return [] }
        return (0...(self.count - count)).map { self[$0..<($0 + count)] }
    }
}
