// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import Testing

/// The bulk frame path (§6.5 streams): batched sends, payloads read in pieces, receives that time
/// out part way through a frame.
@Suite("Bulk frames over a TLS channel")
struct BulkFramePathTests {
    @Test("A batch of frames arrives whole and in order, and a batch with one oversized frame sends nothing")
    func batchesArriveInOrder() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            let chunks = (0..<7).map { index in
                Frame(type: .documentChunk, requestID: 9,
                      payload: DocumentChunk(offset: UInt64(index) * 65_536, data: patternedBytes(65_536, seed: UInt8(index))).payload)
            }
            try await client.send(Array(chunks[0..<3]))
            try await client.send(Array(chunks[3...]))
            for expected in chunks { #expect(try await server.receive() == expected) }

            let oversized = Frame(type: .hello, requestID: 1, payload: [UInt8](repeating: 0, count: 29))
            await #expect(throws: TransportError.unencodableFrame(.payloadTooLarge(limit: 28, actual: 29))) {
                try await client.send([Frame(type: .ack, requestID: 2, payload: []), oversized])
            }
            try await client.send(Frame(type: .ack, requestID: 3, payload: []))
            // The ack of the refused batch never left: the next frame is the later one.
            #expect(try await server.receive().requestID == 3)
        }
    }

    @Test("A receive that times out inside a frame keeps what arrived, and the next receive completes the frame")
    func timeoutInsideAFrameKeepsTheStreamInStep() async throws {
        try await withTimeLimit {
            let pair = try PinnedPair()
            defer { pair.listener.close() }
            let (client, server) = try await pair.connectedChannels()
            let frame = Frame(type: .activityPayload, requestID: 5, payload: patternedBytes(100_000, seed: 3))
            let encoded = try frame.encoded()
            // Part of the header, then part of the payload, each followed by a receive that times out.
            try await client.sendEncoded(Array(encoded[0..<7]))
            await #expect(throws: TransportError.timedOut) { try await server.receive(timeout: .milliseconds(200)) }
            try await client.sendEncoded(Array(encoded[7..<40_000]))
            await #expect(throws: TransportError.timedOut) { try await server.receive(timeout: .milliseconds(200)) }
            try await client.sendEncoded(Array(encoded[40_000...]))
            #expect(try await server.receive(timeout: .seconds(5)) == frame)
            try await client.send(Frame(type: .ack, requestID: 6, payload: []))
            #expect(try await server.receive(timeout: .seconds(5)).requestID == 6)
        }
    }
}
