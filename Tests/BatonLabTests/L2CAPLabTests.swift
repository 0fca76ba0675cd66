// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore
import BatonCrypto
import BatonService
import BatonTransport
import Foundation
import Synchronization
import Testing

/// The BLE fallback (§8.3) between two btvirt controllers: hci0 listens, hci1 connects.
/// `scripts/lab/test --controllers 2 -- --filter L2CAPLabTests`
@Suite(.serialized, .enabled(if: Lab.isInside, "needs the BlueZ lab VM (LAB_VM=1)"))
struct L2CAPLabTests {
    static let psm: UInt16 = 0x8B

    /// A listener on hci0 (advertising connectably: the kernel only connects to an advertising LE peer)
    /// and a channel from hci1, with the time the connect took.
    struct Link {
        let radio: BlueZRadio
        let listener: L2CAPListener
        let client: L2CAPFrameChannel
        let server: L2CAPFrameChannel
        let connectTime: Duration

        func close() async {
            client.close()
            server.close()
            listener.close()
            await radio.stopAdvertising()
            await radio.close()
        }
    }

    static func address(_ index: Int) throws -> BluetoothAddress {
        try BluetoothAddress(try #require(ProcessInfo.processInfo.environment["LAB_HCI\(index)_ADDR"]))
    }

    static func link(options: L2CAPOptions = L2CAPOptions(), psm: UInt16 = psm) async throws -> Link {
        let radio = try await BlueZRadio(adapter: "hci0")
        try await radio.advertise(companyID: Lab.companyID, data: [0x4C, 0x32], connectable: true)
        let listener = try L2CAPListener(adapterAddress: try address(0), psm: psm, options: options)
        async let accepted = listener.accept(timeout: .seconds(20))
        let start = ContinuousClock.now
        let client = try await L2CAPConnector.connect(adapterAddress: try address(1), peerAddress: try address(0),
                                                      peerAddressType: .public, psm: psm, timeout: .seconds(20), options: options)
        let connectTime = ContinuousClock.now - start
        let server = try await accepted
        return Link(radio: radio, listener: listener, client: client, server: server, connectTime: connectTime)
    }

    static func payload(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    }

    @Test func smallFramesAndA200KBFrameCrossBothWays() async throws {
        let link = try await Self.link()
        print("LAB BENCH l2cap connect hci1->hci0 \(Lab.milliseconds(link.connectTime)) ms "
            + "(MTU client send \(link.client.sendMTU) receive \(link.client.receiveMTU))")
        #expect(link.client.sendMTU == L2CAPOptions.defaultReceiveMTU)
        #expect(link.server.sendMTU == L2CAPOptions.defaultReceiveMTU)
        #expect(link.server.peer.address == (try Self.address(1)))
        #expect(link.server.peer.addressType == .public)

        let small = [
            Frame(type: .ack, requestID: 1, payload: []),
            Frame(type: .fetchActivity, requestID: 2, payload: [0, 0, 0, 1, 0, 0, 0, 2]),
            Frame(type: .error, requestID: 3, payload: [0, 1, 0, 2, 0x68, 0x69]),
        ]
        for frame in small { try await link.client.send(frame) }
        for frame in small { #expect(try await link.server.receive(timeout: .seconds(10)) == frame) }
        for frame in small.reversed() { try await link.server.send(frame) }
        for frame in small.reversed() { #expect(try await link.client.receive(timeout: .seconds(10)) == frame) }

        let big = Frame(type: .activityPayload, requestID: 4, payload: Self.payload(200_000, seed: 7))
        let sduCount = try SDUFramer.split(big, mtu: link.client.sduSize).count
        #expect(sduCount > 40)
        for (sender, receiver, direction) in [(link.client, link.server, "hci1->hci0"), (link.server, link.client, "hci0->hci1")] {
            let start = ContinuousClock.now
            async let received = receiver.receive(timeout: .seconds(30))
            try await sender.send(big)
            let frame = try await received
            let elapsed = ContinuousClock.now - start
            #expect(frame == big)
            let milliseconds = Lab.milliseconds(elapsed)
            print("LAB BENCH l2cap 200KB frame \(direction) MTU \(sender.sendMTU) (\(sduCount) SDUs): "
                + "\(Int(milliseconds)) ms, \(Int(200_000 / milliseconds)) KB/s")
        }
        await link.close()
    }

    @Test(arguments: [512, 16_384, 65_535]) func a200KBFrameCrossesAtOtherMTUs(mtu: Int) async throws {
        let link = try await Self.link(options: L2CAPOptions(receiveMTU: mtu))
        #expect(link.client.sendMTU == mtu)
        let big = Frame(type: .activityPayload, requestID: 5, payload: Self.payload(200_000, seed: 11))
        let start = ContinuousClock.now
        async let received = link.server.receive(timeout: .seconds(30))
        try await link.client.send(big)
        #expect(try await received == big)
        let milliseconds = Lab.milliseconds(ContinuousClock.now - start)
        print("LAB BENCH l2cap 200KB frame hci1->hci0 MTU \(mtu) SDU \(link.client.sduSize) (\(try SDUFramer.split(big, mtu: link.client.sduSize).count) SDUs): "
            + "\(Int(milliseconds)) ms, \(Int(200_000 / milliseconds)) KB/s")
        await link.close()
    }

    @Test func closingGracefullyDeliversTheLastFrameThenEndsTheChannel() async throws {
        let link = try await Self.link(options: L2CAPOptions(receiveMTU: 512))
        #expect(link.client.sendMTU == 512)
        let last = Frame(type: .activityPayload, requestID: 9, payload: Self.payload(20_000, seed: 3))
        try await link.server.send(last)
        await link.server.closeGracefully(timeout: .seconds(10))
        #expect(try await link.client.receive(timeout: .seconds(10)) == last)
        await #expect(throws: TransportError.closed) { try await link.client.receive(timeout: .seconds(10)) }
        await link.close()
    }

    @Test func pairingDriversPairOverL2CAPAndShowTheSameCode() async throws {
        let link = try await Self.link()
        let sessionID = SystemRandom().bytes(8)
        let alpha = try RingKeeper.create(name: "alpha", today: labKeyDay, random: SystemRandom())
        let beta = try RingKeeper.create(name: "beta", today: labKeyDay, random: SystemRandom())
        func session(_ role: PairingSession.Role, _ keeper: RingKeeper) throws -> PairingSession {
            try PairingSession(role: role, sessionID: sessionID, ephemeralKey: X25519PrivateKey(),
                               nonce: SystemRandom().bytes(16), local: keeper.pairingInfo())
        }
        let codes = CodeCollector()
        let start = ContinuousClock.now
        let initiator = PairingDriver(session: try session(.initiator, alpha), channel: link.client, clock: SystemWallClock(),
                                      onCode: { codes.record("initiator", $0) })
        let responder = PairingDriver(session: try session(.responder, beta), channel: link.server, clock: SystemWallClock(),
                                      onCode: { codes.record("responder", $0) })
        async let initiatorResult = initiator.run()
        async let responderResult = responder.run()
        let shown = try #require(await codes.both(within: .seconds(20)))
        #expect(shown.initiator == shown.responder)
        await initiator.confirm(true)
        await responder.confirm(true)
        let initiatorOutcome = try (await initiatorResult).get()
        let responderOutcome = try (await responderResult).get()
        #expect(initiatorOutcome.peer.name == "beta")
        #expect(responderOutcome.peer.name == "alpha")
        print("LAB BENCH l2cap pairing (both codes shown and confirmed at once) \(Int(Lab.milliseconds(ContinuousClock.now - start))) ms")
        await link.close()
    }
}

/// The codes both pairing drivers showed, awaitable by the test.
final class CodeCollector: Sendable {
    private let codes = Mutex<[String: String]>([:])

    func record(_ role: String, _ code: String) { codes.withLock { $0[role] = code } }

    func both(within timeout: Duration) async -> (initiator: String, responder: String)? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let current = codes.withLock { $0 }
            if let initiator = current["initiator"], let responder = current["responder"] { return (initiator, responder) }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}
