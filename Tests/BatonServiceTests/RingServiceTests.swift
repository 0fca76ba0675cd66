// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import BatonDBus
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// One ring daemon's part (RingService and its D-Bus glue, no transfer) on its own connection,
/// with its own state directory.
struct RingNode {
    let connection: DBusConnection
    let service: RingService
    let pairing: PairingService
    let discovery: DiscoveryService
    let bus: RingBus
    let busName: String
    let stateDirectory: String

    static func start(_ bus: TestBus, name: String, stateDirectory: String? = nil,
                      pairingLimits: PairingLimits = PairingLimits()) async throws -> RingNode {
        let connection = try DBusConnection(bus: .address(bus.address))
        let directory = stateDirectory ?? bus.directory.appendingPathComponent("state-\(name)").path
        let service = try RingService(store: RingStore(directory: StateDirectory(path: directory)),
                                      radio: nil, clock: SystemWallClock(),
                                      configuration: .init(deviceName: name, listenHost: "127.0.0.1"), log: { _ in })
        await service.start()
        let discovery = DiscoveryService(ring: service, avahiBus: nil, clock: SystemWallClock(), log: { _ in })
        await discovery.start()
        let pairing = PairingService(ring: service, discovery: discovery, clock: SystemWallClock(), limits: pairingLimits, log: { _ in })
        let bus = RingBus(connection: connection, ring: service, pairing: pairing, discovery: discovery,
                          authorizer: PolkitAuthorizer(connection: connection))
        try await bus.export()
        let busName = "org.baton.test.\(name)"
        _ = try await connection.requestName(busName, flags: [.doNotQueue])
        return RingNode(connection: connection, service: service, pairing: pairing, discovery: discovery, bus: bus, busName: busName,
                        stateDirectory: directory)
    }

    func call(_ client: DBusConnection, _ interface: String, _ method: String, _ arguments: [DBusValue] = [], path: String = BatonObjectPath.ring) async throws -> [DBusValue] {
        try await client.call(destination: busName, path: path, interface: interface, method: method, arguments: arguments)
    }

    func property(_ client: DBusConnection, _ path: String, _ name: String) async throws -> DBusValue {
        let reply = try await client.call(destination: busName, path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                                          arguments: [.string(BatonInterface.pairingSession), .string(name)])
        return reply.first?.unwrapped ?? .string("")
    }

    func members(_ client: DBusConnection) async throws -> [[String: DBusValue]] {
        let reply = try await call(client, BatonInterface.ring, "ListMembers")
        return (reply.first?.arrayValue ?? []).compactMap(\.asDictionary)
    }
}

/// Starts pairing between two nodes through their D-Bus API and waits for both codes.
func startPairing(_ a: RingNode, _ b: RingNode, client: DBusConnection) async throws -> (pathA: String, pathB: String, codeA: String, codeB: String) {
    let pathA = try #require(try await a.call(client, BatonInterface.pairing, "Accept", [.propertyDictionary([:])]).first?.objectPathValue)
    let port = try #require(try await a.property(client, pathA, "Port").uint16Value)
    let session = try #require(try await a.property(client, pathA, "SessionId").stringValue)
    let pathB = try #require(try await b.call(client, BatonInterface.pairing, "Pair",
                                              [.string("127.0.0.1:\(port)"), .propertyDictionary(["SessionId": .string(session)])]).first?.objectPathValue)
    for (node, path) in [(a, pathA), (b, pathB)] {
        #expect(try await eventually(timeout: .seconds(10)) { try await node.property(client, path, "State").stringValue == "confirming" })
    }
    let codeA = try #require(try await a.property(client, pathA, "Code").stringValue)
    let codeB = try #require(try await b.property(client, pathB, "Code").stringValue)
    return (pathA, pathB, codeA, codeB)
}

/// The initiator (`b`) types the acceptor's code; the acceptor (`a`) types the second code the initiator
/// then shows; both then commit the members shown.
func confirmAndCommit(_ a: RingNode, _ b: RingNode, _ p: (pathA: String, pathB: String, codeA: String, codeB: String),
                      client: DBusConnection) async throws {
    try await confirmBothCodes(a, b, p, client: client)
    for (node, path) in [(a, p.pathA), (b, p.pathB)] {
        #expect(try await eventually(timeout: .seconds(10)) { try await node.property(client, path, "State").stringValue == "reviewing" })
        _ = try await node.call(client, BatonInterface.pairingSession, "Commit", path: path)
    }
}

/// The initiator (`b`) types the acceptor's code; the acceptor (`a`) then types the second code the
/// initiator shows (§7.1 "What the users do").
func confirmBothCodes(_ a: RingNode, _ b: RingNode, _ p: (pathA: String, pathB: String, codeA: String, codeB: String),
                      client: DBusConnection) async throws {
    _ = try await b.call(client, BatonInterface.pairingSession, "ConfirmCode", [.string(p.codeA)], path: p.pathB)
    #expect(try await eventually(timeout: .seconds(10)) { try await b.property(client, p.pathB, "Code").stringValue?.count == 6 })
    let second = try #require(try await b.property(client, p.pathB, "Code").stringValue)
    _ = try await a.call(client, BatonInterface.pairingSession, "ConfirmCode", [.string(second)], path: p.pathA)
}

@Suite struct RingServiceTests {
    @Test func pairingOverDBusJoinsTheRingAndSurvivesRestart() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        // The ring objects match dbus/org.baton.{Ring1,Pairing1,PairingSession1}.xml.
        let ring = try await client.call(destination: a.busName, path: BatonObjectPath.ring, interface: "org.freedesktop.DBus.Introspectable", method: "Introspect")
        let ringShapes = try IntrospectionReader.parse(try #require(ring.first?.stringValue))
        #expect(ringShapes[BatonInterface.ring] == (try InterfaceFiles.shape(BatonInterface.ring)))
        #expect(ringShapes[BatonInterface.pairing] == (try InterfaceFiles.shape(BatonInterface.pairing)))
        let p = try await startPairing(a, b, client: client)
        let session = try await client.call(destination: a.busName, path: p.pathA, interface: "org.freedesktop.DBus.Introspectable", method: "Introspect")
        #expect(try IntrospectionReader.parse(try #require(session.first?.stringValue))[BatonInterface.pairingSession] == (try InterfaceFiles.shape(BatonInterface.pairingSession)))
        // Only the acceptor shows the code: the initiator's user types it (ConfirmCode). A yes alone
        // confirms on neither side: each types the code the other screen shows.
        #expect(p.codeA.count == 6 && p.codeB == "")
        await #expect(throws: DBusError.self) {
            _ = try await b.call(client, BatonInterface.pairingSession, "Confirm", [.boolean(true)], path: p.pathB)
        }
        await #expect(throws: DBusError.self) {
            _ = try await a.call(client, BatonInterface.pairingSession, "Confirm", [.boolean(true)], path: p.pathA)
        }
        try await confirmAndCommit(a, b, p, client: client)
        for (node, path) in [(a, p.pathA), (b, p.pathB)] {
            #expect(try await eventually(timeout: .seconds(10)) { try await node.property(client, path, "State").stringValue == "paired" })
        }
        #expect(try await a.property(client, p.pathA, "PeerName").stringValue == "beta")
        let names = try await a.members(client).compactMap { $0["Name"]?.stringValue }.sorted()
        #expect(names == ["alpha", "beta"])
        #expect(try await b.members(client).first { $0["Name"]?.stringValue == "alpha" }?["PairedSince"] != nil)
        // The matcher now knows the peer's advertising secret.
        #expect(await a.service.radio.matcher.memberIDs == [await b.service.deviceID])
        // Persisted: a fresh service over the same state directory knows the ring.
        await a.pairing.stop()
        await a.service.stop()
        a.connection.close()
        let again = try await RingNode.start(bus, name: "alpha", stateDirectory: a.stateDirectory)
        #expect(try await again.members(client).count == 2)
        #expect(await again.service.deviceID == (await a.service.deviceID))
        let ringFile = a.stateDirectory + "/ring"
        let mode = try FileManager.default.attributesOfItem(atPath: ringFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func refusedCodePairsNothing() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        let p = try await startPairing(a, b, client: client)
        // The initiator's user refuses instead of typing the code.
        _ = try await b.call(client, BatonInterface.pairingSession, "Confirm", [.boolean(false)], path: p.pathB)
        for (node, path) in [(a, p.pathA), (b, p.pathB)] {
            #expect(try await eventually(timeout: .seconds(10)) { try await node.property(client, path, "State").stringValue == "failed" })
            #expect(try await node.property(client, path, "Error").stringValue == "rejected")
        }
        #expect(try await a.members(client).count == 1)
        #expect(try await b.members(client).count == 1)
    }

    @Test func removalDropsTheMemberAndRotatesTheSecret() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        let p = try await startPairing(a, b, client: client)
        try await confirmAndCommit(a, b, p, client: client)
        #expect(try await eventually(timeout: .seconds(10)) { try await a.property(client, p.pathA, "State").stringValue == "paired" })
        let before = await a.service.keeper.ownSecret
        let shortB = await b.service.deviceID.shortForm
        _ = try await a.call(client, BatonInterface.pairing, "Remove", [.string(shortB)])
        #expect(try await a.members(client).count == 1)
        #expect(await a.service.radio.matcher.memberIDs.isEmpty)
        #expect(await a.service.keeper.ownSecret.generation == before.generation + 1)
        await #expect(throws: DBusError.self) { _ = try await a.call(client, BatonInterface.pairing, "Remove", [.string(shortB)]) }
        do {
            _ = try await a.call(client, BatonInterface.pairing, "Remove", [.string("nobody-here")])
            Issue.record("removing an unknown device succeeded")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.UnknownDevice")
        }
    }

    @Test func badArgumentsAreTypedErrors() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha")
        let client = try DBusConnection(bus: .address(bus.address))
        for target in ["nohost", "host:0", "host:99999", ":80"] {
            do {
                _ = try await a.call(client, BatonInterface.pairing, "Pair", [.string(target), .propertyDictionary(["SessionId": .string("0011223344556677")])])
                Issue.record("\(target) accepted")
            } catch let error as DBusError {
                #expect(error.name == "org.baton.Error.InvalidArguments")
            }
        }
        do {
            _ = try await a.call(client, BatonInterface.pairing, "Pair", [.string("127.0.0.1:80"), .propertyDictionary([:])])
            Issue.record("missing session id accepted")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.InvalidArguments")
        }
        do {
            _ = try await a.call(client, BatonInterface.pairing, "Accept", [.propertyDictionary(["Bogus": .boolean(true)])])
            Issue.record("unknown option accepted")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.InvalidArguments")
        }
        // Nothing listens on this port: the target cannot be reached.
        do {
            _ = try await a.call(client, BatonInterface.pairing, "Pair", [.string("127.0.0.1:9"), .propertyDictionary(["SessionId": .string("0011223344556677")])])
            Issue.record("unreachable target accepted")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.UnknownDevice")
        }
        #expect(try await a.members(client).count == 1)  // still serving
    }
}
