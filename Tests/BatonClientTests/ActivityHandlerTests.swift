// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import Foundation
import Synchronization
import Testing

/// Records what the daemon (or a test posing as it) delivers.
final class RecordingHandler: ActivityHandler {
    let accept: Bool
    let delivered = Mutex<[ContinuedActivity]>([])
    let failures = Mutex<[BatonClientError]>([])
    let asked = Mutex<[String]>([])

    init(accept: Bool = true) { self.accept = accept }

    func willContinue(type: String, from device: String) async -> Bool {
        asked.withLock { $0.append("\(type) from \(device)") }
        return accept
    }

    func `continue`(_ activity: ContinuedActivity) async { delivered.withLock { $0.append(activity) } }

    func didFailToContinue(type: String, error: BatonClientError) async { failures.withLock { $0.append(error) } }
}

@Suite("ActivityHandler against batond", .serialized)
struct ActivityHandlerTests {
    @Test("registered types appear in GetHandledTypes and disappear on unregister")
    func registerAndUnregister() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            #expect(try await connection.handledTypes().isEmpty)
            let handler = RecordingHandler()
            let registration = try await connection.registerHandler(handler, for: ["org.example.Reader.reading", "org.example.Reader.editing"])
            #expect(Set(try await connection.handledTypes()) == ["org.example.Reader.reading", "org.example.Reader.editing"])

            let closures = try await connection.registerHandler(for: ["org.example.Notes.note"]) { _ in }
            #expect(try await connection.handledTypes().contains("org.example.Notes.note"))

            try await connection.unregisterHandler(registration)
            #expect(try await connection.handledTypes() == ["org.example.Notes.note"])
            await expectClientError(BatonClientError.Code.unknownActivity.rawValue) { try await connection.unregisterHandler(registration) }
            try await connection.unregisterHandler(closures)
            #expect(try await connection.handledTypes().isEmpty)
        }
    }

    @Test("invalid types are refused and nothing stays exported")
    func invalidTypes() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            await expectClientError(BatonClientError.Code.invalidArguments.rawValue) {
                _ = try await connection.registerHandler(RecordingHandler(), for: ["not a type"])
            }
            #expect(try await connection.handledTypes().isEmpty)
        }
    }

    @Test("handlers are unregistered when their connection closes")
    func unregisteredOnDisconnect() async throws {
        try await withDaemon { daemon in
            let observer = try daemon.connect()
            defer { observer.close() }
            let connection = try daemon.connect()
            _ = try await connection.registerHandler(RecordingHandler(), for: ["org.example.Reader.reading"])
            #expect(try await observer.handledTypes() == ["org.example.Reader.reading"])
            connection.close()
            try await eventually("handler gone after disconnect") { try await observer.handledTypes().isEmpty }
        }
    }

    /// The radio path that makes the daemon call handlers is not built yet, so this test poses as
    /// the daemon: it owns a bus name and calls the exported ActivityHandler1 object, which only
    /// answers the owner of the daemon's bus name.
    @Test("the exported ActivityHandler1 object delivers calls to the handler, and only from the daemon")
    func handlerObjectDelivers() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let fakeDaemon = try DBusConnection(bus: .address(bus.address))
        defer { fakeDaemon.close() }
        let busName = "org.baton.FakeDaemon"
        #expect(try await fakeDaemon.requestName(busName, flags: [.doNotQueue]) == .primaryOwner)
        // Answers RegisterHandler like the daemon, so the client exports its object.
        try await fakeDaemon.export([DBusInterface("org.baton.Manager1", methods: [
            DBusMethod("RegisterHandler", in: [DBusArgument("handler", "o"), DBusArgument("types", "as")]) { _ in [] },
        ])], at: "/org/baton")

        let connection = try BatonConnection(bus: .address(bus.address), busName: busName)
        defer { connection.close() }
        let handler = RecordingHandler(accept: false)
        let registration = try await connection.registerHandler(handler, for: ["org.example.Reader.reading"])

        func callHandler(_ caller: DBusConnection, _ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
            try await caller.call(destination: connection.dbus.uniqueName, path: registration.path,
                                  interface: "org.baton.ActivityHandler1", method: method, arguments: arguments)
        }
        let accepted = try await callHandler(fakeDaemon, "WillContinue", [.string("org.example.Reader.reading"), .string("laptop")])
        #expect(accepted == [.boolean(false)])
        #expect(handler.asked.withLock { $0 } == ["org.example.Reader.reading from laptop"])

        _ = try await callHandler(fakeDaemon, "Continue", [
            .string("org.example.Reader.reading"), .string("Chapter 3"),
            PropertyValueCoding.encodeUserInfo(["page": .integer(3), "at": .date(10)]),
            .propertyDictionary(["WebpageURL": .string("https://example.org/3"), "Version": .int64(2), "Device": .string("laptop")]),
        ])
        let delivered = try #require(handler.delivered.withLock { $0.first })
        #expect(delivered == ContinuedActivity(activityType: "org.example.Reader.reading", title: "Chapter 3",
                                               userInfo: ["page": .integer(3), "at": .date(10)],
                                               webpageURL: URL(string: "https://example.org/3"), version: 2, device: "laptop"))

        _ = try await callHandler(fakeDaemon, "FailedToContinue", [.string("org.example.Reader.reading"),
                                                                  .string("org.baton.Error.NotReady"), .string("radio off")])
        #expect(handler.failures.withLock { $0 } == [BatonClientError(.notReady, "radio off")])

        // A bad userInfo is refused with InvalidArguments and not delivered.
        do {
            _ = try await callHandler(fakeDaemon, "Continue", [
                .string("org.example.Reader.reading"), .string("x"), .propertyDictionary(["p": .objectPath("/")]),
                .propertyDictionary([:]),
            ])
            Issue.record("a non-property-list userInfo was delivered")
        } catch let error as DBusError {
            #expect(error.name == BatonClientError.Code.invalidArguments.rawValue)
        }
        #expect(handler.delivered.withLock { $0.count } == 1)

        // Anyone else on the bus is refused.
        let intruder = try DBusConnection(bus: .address(bus.address))
        defer { intruder.close() }
        do {
            _ = try await callHandler(intruder, "WillContinue", [.string("org.example.Reader.reading"), .string("evil")])
            Issue.record("a peer other than the daemon was answered")
        } catch let error as DBusError {
            #expect(error.name == BatonClientError.Code.notPermitted.rawValue)
        }
        #expect(handler.asked.withLock { $0.count } == 1)
    }

    @Test("activity sources answer only the daemon")
    func sourceRefusesOthers() async throws {
        try await withDaemon { daemon in
            let connection = try daemon.connect()
            defer { connection.close() }
            let activity = connection.makeActivity(type: "org.example.Reader.reading")
            activity.userInfo = ["secret": .string("private")]
            let path = try await activity.publish()
            let intruder = try daemon.rawConnection()
            defer { intruder.close() }
            // The client's source objects live under /org/baton/client; the first is source1.
            do {
                _ = try await intruder.call(destination: connection.dbus.uniqueName, path: "/org/baton/client/source1",
                                            interface: "org.baton.ActivitySource1", method: "WillSave", arguments: [.objectPath(path)])
                Issue.record("WillSave answered a peer other than the daemon")
            } catch let error as DBusError {
                #expect(error.name == BatonClientError.Code.notPermitted.rawValue)
            }
        }
    }
}

@Suite("ActivitySource1 object")
struct ActivitySourceObjectTests {
    /// Poses as the daemon (its radio path, which sends WasContinued, is not built yet).
    @Test("WillSave and WasContinued reach the delegate; the answer is the fresh state")
    func sourceDeliversToDelegate() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let fakeDaemon = try DBusConnection(bus: .address(bus.address))
        defer { fakeDaemon.close() }
        let busName = "org.baton.FakeDaemon"
        #expect(try await fakeDaemon.requestName(busName, flags: [.doNotQueue]) == .primaryOwner)
        let activityPath = "/org/baton/activity/u1_1"
        let createdWith = Mutex<[DBusValue]>([])
        try await fakeDaemon.export([DBusInterface("org.baton.Manager1", methods: [
            DBusMethod("CreateActivity", in: [DBusArgument("type", "s"), DBusArgument("title", "s"), DBusArgument("userInfo", "a{sv}"),
                                              DBusArgument("options", "a{sv}")], out: [DBusArgument("activity", "o")]) { call in
                createdWith.withLock { $0 = call.arguments }
                return [.objectPath(activityPath)]
            },
        ])], at: "/org/baton")

        let connection = try BatonConnection(bus: .address(bus.address), busName: busName)
        defer { connection.close() }
        let delegate = FreshStateDelegate()
        let activity = connection.makeActivity(type: "org.example.Reader.reading")
        activity.delegate = delegate
        activity.needsSave = true
        activity.userInfo = ["page": .integer(1)]
        activity.webpageURL = URL(string: "https://example.org/")
        #expect(try await activity.publish() == activityPath)

        let options = try #require(createdWith.withLock { $0 }.last?.asDictionary)
        #expect(options["NeedsSave"] == .boolean(true))
        #expect(options["Version"] == .int64(0))
        #expect(options["WebpageURL"] == .string("https://example.org/"))
        let sourcePath = try #require(options["Source"]?.objectPathValue)

        let reply = try await fakeDaemon.call(destination: connection.dbus.uniqueName, path: sourcePath,
                                              interface: "org.baton.ActivitySource1", method: "WillSave",
                                              arguments: [.objectPath(activityPath)])
        let answer = try #require(reply.first?.asDictionary)
        #expect(answer["Title"] == .string("Saved 1"))
        #expect(try PropertyValueCoding.decodeUserInfo(try #require(answer["UserInfo"])) == ["page": .integer(101)])
        #expect(answer["Version"] == .int64(0))
        #expect(answer["WebpageURL"] == .string("https://example.org/"))

        _ = try await fakeDaemon.call(destination: connection.dbus.uniqueName, path: sourcePath, interface: "org.baton.ActivitySource1",
                                      method: "WasContinued", arguments: [.objectPath(activityPath), .string("Kitchen tablet")])
        #expect(delegate.continuedOn.withLock { $0 } == ["Kitchen tablet"])

        // A WillSave naming another activity is refused.
        do {
            _ = try await fakeDaemon.call(destination: connection.dbus.uniqueName, path: sourcePath, interface: "org.baton.ActivitySource1",
                                          method: "WillSave", arguments: [.objectPath("/org/baton/activity/u1_2")])
            Issue.record("WillSave answered for another activity")
        } catch let error as DBusError {
            #expect(error.name == BatonClientError.Code.unknownActivity.rawValue)
        }
    }
}
