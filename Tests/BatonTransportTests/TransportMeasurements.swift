// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonTransport
import BatonCore
import Foundation
import Testing

/// Numbers for docs/benchmarks.md; no assertions on time. Run with BATON_MEASURE=1 (best in release:
/// `swift build -c release --build-tests -Xswiftc -enable-testing`).
@Suite("Transport measurements", .enabled(if: ProcessInfo.processInfo.environment["BATON_MEASURE"] != nil))
struct TransportMeasurements {
    @Test("TLS handshake time on loopback, median of 50")
    func handshakeTime() async throws {
        let pair = try PinnedPair()
        defer { pair.listener.close() }
        let acceptor = Task { while let channel = try? await pair.listener.accept() { channel.close() } }
        defer { acceptor.cancel() }
        var samples: [Duration] = []
        for _ in 0..<50 {
            let start = ContinuousClock.now
            let channel = try await pair.connect()
            samples.append(ContinuousClock.now - start)
            channel.close()
        }
        samples.sort()
        print("MEASURE handshake (TCP connect + TLS 1.3, Ed25519 both ways) median \(samples[25]), min \(samples[0]), max \(samples[49])")
    }

    @Test("Bulk throughput of 64 KiB frames for about 2 s")
    func throughput() async throws {
        let pair = try PinnedPair()
        defer { pair.listener.close() }
        let (client, server) = try await pair.connectedChannels()
        let frame = Frame(type: .activityPayload, requestID: 1, payload: patternedBytes(65_536))
        let start = ContinuousClock.now
        let sender = Task {
            var sent = 0
            while ContinuousClock.now - start < .seconds(2) {
                try await client.send(frame)
                sent += 1
            }
            try await client.send(Frame(type: .ack, requestID: 0, payload: []))
            return sent
        }
        var received = 0
        while try await server.receive().type == .activityPayload { received += 1 }
        let elapsed = ContinuousClock.now - start
        let sent = try await sender.value
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let mebibytes = Double(received * 65_536) / 1_048_576
        print("MEASURE throughput \(received) frames of 64 KiB (sent \(sent)) in \(elapsed): \(String(format: "%.1f", mebibytes / seconds)) MiB/s")
        #expect(received == sent)
    }
}
