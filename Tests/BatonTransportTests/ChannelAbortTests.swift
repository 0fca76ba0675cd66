// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import BatonTestBus
import Synchronization
import Testing

/// `SecureChannel.abort` (§6.5: a peer removed while its stream runs gets no further byte): what
/// the connection still queues for the peer is dropped (a TCP reset), where `close` lets the
/// kernel deliver all of it. The receiver reads nothing while the sender fills the connection, so
/// most of what was handed over sits in the sender's socket buffer when it ends.
@Suite("TLS channels: abort drops what is queued, close delivers it")
struct ChannelAbortTests {
    static let chunk = Frame(type: .documentChunk, requestID: 1, payload: DocumentChunk(offset: 0, data: [UInt8](repeating: 0x5A, count: DocumentChunk.maxDataBytes)).payload)
    /// Well past what a receive window that was never read from takes (about 128 KiB on loopback).
    static let handedBeforeTheEnd = 16

    /// Frames handed to the channel before it ended and frames the receiver got.
    func run(aborting: Bool) async throws -> (handed: Int, received: Int) {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            let handed = Mutex(0)
            let sender = Task {
                while true {
                    do { try await server.send(Self.chunk) } catch { return }
                    handed.withLock { $0 += 1 }
                }
            }
            #expect(await eventually(timeout: .seconds(120)) { handed.withLock { $0 } >= Self.handedBeforeTheEnd })
            if aborting { server.abort() } else { server.close() }
            await sender.value
            var received = 0
            while true {
                do { _ = try await client.receive(timeout: .seconds(120)) } catch { break }
                received += 1
            }
            client.close()
            return (handed.withLock { $0 }, received)
        }
    }

    @Test("Closed, every frame handed over arrives; aborted, what the socket still queued does not")
    func abortDropsTheQueue() async throws {
        let closed = try await run(aborting: false)
        #expect(closed.received >= closed.handed, "close delivers what was handed over: \(closed)")
        let aborted = try await run(aborting: true)
        #expect(aborted.received < aborted.handed, "abort dropped nothing: \(aborted)")
        print("abort: handed \(aborted.handed) chunks, \(aborted.received) arrived; close: handed \(closed.handed), \(closed.received) arrived")
    }
}
