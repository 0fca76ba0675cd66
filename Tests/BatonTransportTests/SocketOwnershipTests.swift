// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import Testing

@Suite("Socket ownership")
struct SocketOwnershipTests {
    @Test("Closing a listener wakes a pending accept with .closed and frees its port while the listener object lives on")
    func listenerCloseWakesAcceptAndFreesPort() async throws {
        try await withTimeLimit {
            let listener = try PlainFrameListener(host: "127.0.0.1", port: 0)
            let waiting = Task { () async -> TransportError? in
                do throws(TransportError) {
                    _ = try await listener.accept(timeout: .seconds(10))
                    return nil
                } catch {
                    return error
                }
            }
            try await Task.sleep(for: .milliseconds(50))
            listener.close()
            #expect(await waiting.value == .closed)
            let again = try PlainFrameListener(host: "127.0.0.1", port: listener.port)
            #expect(again.port == listener.port)
            again.close()
        }
    }

    @Test("A closed pairing channel refuses sends and receives with .closed; closing twice is harmless")
    func closedPlainChannelRefusesIO() async throws {
        try await withTimeLimit {
            let listener = try PlainFrameListener(host: "127.0.0.1", port: 0)
            defer { listener.close() }
            async let accepted = listener.accept(timeout: .seconds(5))
            let client = try await PlainFrameConnector.connect(host: "127.0.0.1", port: listener.port)
            let server = try await accepted
            try await client.send(Frame(type: .pairCommit, requestID: 0, payload: [1, 2, 3]))
            #expect(try await server.receive(timeout: .seconds(5)).payload == [1, 2, 3])
            client.close()
            client.close()
            #expect(client.isClosed)
            await #expect(throws: TransportError.closed) { try await client.send(Frame(type: .ack, requestID: 0, payload: [])) }
            await #expect(throws: TransportError.closed) { try await client.receive(timeout: .seconds(1)) }
            // The peer sees the end of the stream.
            await #expect(throws: TransportError.closed) { try await server.receive(timeout: .seconds(5)) }
        }
    }
}
