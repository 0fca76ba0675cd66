// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonAPI
import BatonCore
import BatonCrypto
import BatonDBus
import Testing
@testable import BatonService

/// Manager1.GetStatus says what the radio really does (issue 10 item 9), not merely that a
/// publisher exists.
@Suite("BatonServiceTests: the status reports the radio's real condition", .serialized)
struct RadioStatusTests {
    func managerStatus(of node: TransferNode, _ client: DBusConnection) async throws -> ManagerStatus {
        let reply = try await client.call(destination: node.busName, path: BatonObjectPath.manager, interface: BatonInterface.manager,
                                          method: "GetStatus", timeout: .seconds(10))
        return try ManagerStatus(try #require(reply.first))
    }

    @Test func aReadyRadioScansAdvertsWhenAnActivityIsOnTheAirAndAPoweredOffOneDegradesTheDaemon() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let alpha = try await HandoffNode.start(bus, name: "alpha")
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let radio = alpha.node.ring.radio

        // The fake radio reports ready when scanning starts; nothing is advertised without a ring.
        #expect(await eventually { await radio.radioSummary() == RadioSummary(.scanning) })
        var status = try await managerStatus(of: alpha.node, client)
        #expect(status.state == "running" && status.radio == "scanning" && status.radioDetail == nil)

        try await radio.publish(try ActivityRecord(activityType: "org.example.Reader.reading", title: "t", userInfo: [:],
                                                   webpageURL: nil, version: 0), uid: 0)
        // A ring of one puts nothing on the air (protocol §4.2): still only scanning.
        status = try await managerStatus(of: alpha.node, client)
        #expect(status.state == "running" && status.radio == "scanning")
        // Another member: the activity goes on the air.
        let member = try DeviceID(bytes: Array(repeating: 7, count: 16))
        await radio.setMembers([member: AdvertisingSecret.generate(generation: 1, day: testDay, using: SystemRandom())])
        status = try await managerStatus(of: alpha.node, client)
        #expect(status.state == "running" && status.radio == "both")

        await radio.handle(.stateChanged(.poweredOff))
        status = try await managerStatus(of: alpha.node, client)
        #expect(status.state == "degraded")
        #expect(status.radio == "unavailable")
        #expect(status.radioDetail == "the adapter is powered off")
        // The status file says the same once it is next written.
        #expect(await alpha.node.activities.status().state == .degraded)
        #expect(await alpha.node.activities.status().radioDetail == "the adapter is powered off")

        await radio.handle(.stateChanged(.ready))
        status = try await managerStatus(of: alpha.node, client)
        #expect(status.state == "running" && status.radio == "both" && status.radioDetail == nil)
    }
}
