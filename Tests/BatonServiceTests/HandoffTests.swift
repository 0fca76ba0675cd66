// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import BatonServiceFakes
import BatonDBus
import BatonStore
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// A whole daemon in-process with a fake radio.
struct HandoffNode {
    let node: TransferNode
    let radio: FakeRadio

    static func start(_ bus: TestBus, name: String, continuation: ContinuationService.Configuration = .init()) async throws -> HandoffNode {
        let radio = FakeRadio()
        return HandoffNode(node: try await TransferNode.start(bus, name: name, radio: radio, continuation: continuation), radio: radio)
    }
}

func suggestions(on node: TransferNode, client: DBusConnection) async throws -> [String: [String: DBusValue]] {
    let reply = try await client.call(destination: node.busName, path: "/org/baton", interface: "org.freedesktop.DBus.ObjectManager",
                                      method: "GetManagedObjects")
    var out: [String: [String: DBusValue]] = [:]
    for (path, interfaces) in reply.first?.dictionaryValue ?? [:] {
        if let properties = interfaces.asDictionary?[BatonInterface.suggestion]?.asDictionary, let key = path.objectPathValue {
            out[key] = properties.mapValues(\.unwrapped)
        }
    }
    return out
}

@Suite("BatonServiceTests: handoff from advert to delivered activity", .serialized)
struct HandoffTests {
    @Test func heardAdvertBecomesASuggestionThatContinuesTheActivity() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await HandoffNode.start(bus, name: "alpha"), b = try await HandoffNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a.node, b.node, client: client)
        // After pairing, alpha advertises presence: beta hears it, no suggestion yet.
        let presence = try #require(a.radio.lastAdvert)
        b.radio.hear(presence)
        #expect(await eventually(timeout: .seconds(15)) { await b.node.ring.radio.lastSighting(of: await a.node.deviceID) != nil })
        #expect(try await suggestions(on: b.node, client: client).isEmpty)

        let (handlerApp, handler) = try await registerHandler(on: b.node, bus: bus)
        defer { handlerApp.close() }
        let source = try FakeSourceApp(bus: bus)
        try await source.publish(on: a.node)
        #expect(await eventually(timeout: .seconds(15)) { a.radio.lastAdvert != presence })
        let activityAdvert = try #require(a.radio.lastAdvert)
        b.radio.hear(activityAdvert)
        #expect(try await eventually(timeout: .seconds(15)) { try await suggestions(on: b.node, client: client).count == 1 })
        let (path, properties) = try #require(try await suggestions(on: b.node, client: client).first)
        // The suggestion object matches dbus/org.baton.Suggestion1.xml.
        let introspected = try await client.call(destination: b.node.busName, path: path, interface: "org.freedesktop.DBus.Introspectable",
                                                 method: "Introspect")
        let shapes = try IntrospectionReader.parse(try #require(introspected.first?.stringValue))
        #expect(shapes[BatonInterface.suggestion] == (try InterfaceFiles.shape(BatonInterface.suggestion)))
        #expect(properties["ActivityType"] == .string("org.example.Reader.reading"))
        #expect(properties["DeviceName"] == .string("alpha"))
        #expect(properties["HasWebpageURL"] == .boolean(true))
        #expect(properties["Near"] == .boolean(true))  // RSSI 127 is unknown: never hides a member

        // The same advert again is a re-sighting: still one suggestion.
        b.radio.hear(activityAdvert)
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await suggestions(on: b.node, client: client).count == 1)

        // One click: fetch over TLS, deliver to beta's handler, alpha's app hears WasContinued.
        let reply = try await client.call(destination: b.node.busName, path: path, interface: BatonInterface.suggestion, method: "Continue")
        #expect(reply == [.string("delivered")])
        #expect(handler.members == ["WillContinue", "Continue"])
        #expect(handler.calls.last?.argument(1) == .string("Chapter 3"))
        #expect(await eventually(timeout: .seconds(15)) { source.wasContinued == ["beta"] })
        #expect(try await suggestions(on: b.node, client: client).isEmpty)

        // The activity ends: alpha goes back to presence, and a later suggestion is withdrawn.
        b.radio.hear(activityAdvert)  // replayed old advert: rejected, no suggestion comes back
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await suggestions(on: b.node, client: client).isEmpty)
        source.connection.close()
        #expect(await eventually(timeout: .seconds(15)) { await a.node.ring.radio.currentPublication() == nil })
        try await Task.sleep(for: .milliseconds(100))
        b.radio.hear(try #require(a.radio.lastAdvert))
        try await Task.sleep(for: .milliseconds(200))
        let left = try await suggestions(on: b.node, client: client)
        let seen = await b.node.ring.radio.lastSighting(of: await a.node.deviceID)
        #expect(left.isEmpty, "\(left) \(String(describing: seen))")
        await a.node.stop()
        await b.node.stop()
    }

    /// Nobody here handles the type: no app suggestion names it. The source's activity has a
    /// webpage URL, so (issue 13) it is offered for the browser only, without a type name.
    @Test func aTypeNobodyHandlesIsNotOffered() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await HandoffNode.start(bus, name: "alpha"), b = try await HandoffNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a.node, b.node, client: client)
        let source = try FakeSourceApp(bus: bus)
        let presence = try #require(a.radio.lastAdvert)
        try await source.publish(on: a.node)
        #expect(await eventually(timeout: .seconds(15)) { a.radio.lastAdvert != presence })
        b.radio.hear(try #require(a.radio.lastAdvert))
        #expect(await eventually(timeout: .seconds(15)) { await b.node.ring.radio.lastSighting(of: await a.node.deviceID)?.body.isActivity == true })
        #expect(await eventually(timeout: .seconds(5)) { (try? await suggestions(on: b.node, client: client))?.count == 1 })
        let offered = try await suggestions(on: b.node, client: client)
        #expect(offered.count == 1)
        #expect(offered.values.allSatisfy { $0["Fallback"] == .string("browser") && $0["ActivityType"] == .string("") }, "\(offered)")
        source.connection.close()
        await a.node.stop()
        await b.node.stop()
    }
}
