// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Testing

/// Mutable state behind the test service's properties.
actor FakeServiceState {
    var name = "initial"
    var count: UInt32 = 7
    func setName(_ newName: String) { name = newName }
}

let testInterfaceName = "org.baton.Test"
let testPath = "/org/baton/Test"

func makeTestInterface(state: FakeServiceState) -> DBusInterface {
    DBusInterface(
        testInterfaceName,
        methods: [
            DBusMethod("Upper", in: [DBusArgument("text", "s")], out: [DBusArgument("upper", "s")]) { call in
                [.string((call.arguments[0].stringValue ?? "").uppercased())]
            },
            DBusMethod("Fail") { _ in
                throw DBusError(name: "org.baton.Test.Error.Nope", message: "nope")
            },
            DBusMethod("Slow", in: [DBusArgument("milliseconds", "u")], out: [DBusArgument("result", "s")]) { call in
                try await Task.sleep(for: .milliseconds(Int(call.arguments[0].uint32Value ?? 0)))
                return [.string("done")]
            },
            DBusMethod("Echo", in: [DBusArgument("value", "v")], out: [DBusArgument("value", "v")]) { call in
                [call.arguments[0]]
            },
            DBusMethod("WhoAmI", out: [DBusArgument("sender", "s")]) { call in
                [.string(call.sender)]
            },
            DBusMethod("TakeFD", in: [DBusArgument("fd", "h")], out: [DBusArgument("valid", "b")]) { call in
                guard let fd = call.arguments[0].unixFDValue else { return [.boolean(false)] }
                let valid = fcntl(fd, F_GETFD) != -1
                close(fd)
                return [.boolean(valid)]
            },
            DBusMethod("BadReply", out: [DBusArgument("value", "s")]) { _ in [.uint32(1)] },
        ],
        properties: [
            DBusProperty("Name", signature: "s", access: .readwrite,
                         get: { .string(await state.name) },
                         set: { value in
                             guard let text = value.stringValue, !text.isEmpty else {
                                 throw DBusError.invalidArgs("Name must not be empty")
                             }
                             await state.setName(text)
                         }),
            DBusProperty("Count", signature: "u", get: { .uint32(await state.count) }),
        ],
        signals: [DBusSignalDescription("Tick", arguments: [DBusArgument("count", "u")])])
}

/// A service connection with the test interface exported, plus a client connection.
struct ServiceAndClient {
    let service: DBusConnection
    let client: DBusConnection
    let state = FakeServiceState()

    init(_ bus: TestBus) async throws {
        service = try DBusConnection(bus: .address(bus.address))
        client = try DBusConnection(bus: .address(bus.address))
        try await service.export([makeTestInterface(state: state)], at: testPath)
    }

    func callService(_ method: String, _ arguments: [DBusValue] = [], interface: String? = testInterfaceName,
                     path: String = testPath) async throws -> [DBusValue] {
        try await client.call(destination: service.uniqueName, path: path, interface: interface, method: method,
                              arguments: arguments)
    }

    func property(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await callService(method, arguments, interface: "org.freedesktop.DBus.Properties")
    }
}

func expectDBusError(_ name: String, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(name), got success")
    } catch let error as DBusError {
        #expect(error.name == name)
    } catch {
        Issue.record("expected DBusError \(name), got \(error)")
    }
}

/// Values covering every basic type and the containers, nested.
let sampleValues: [DBusValue] = [
    .byte(0xFE), .boolean(true), .boolean(false), .int16(.min), .uint16(.max), .int32(-123_456), .uint32(.max),
    .int64(.min), .uint64(.max), .double(-2.5), .string("héllo wörld ✓"), .string(""), .objectPath("/org/baton/x"),
    .signature("a{sv}"),
    .stringArray(["a", "b", "c"]),
    .array(elementSignature: "s", []),
    .array(elementSignature: "(is)", []),
    .dictionary(keySignature: "s", valueSignature: "u", [:]),
    .bytes([0, 1, 2, 255]),
    .propertyDictionary([
        "int": .int32(5),
        "nested": .variant(.variant(.string("deep"))),
        "list": .objectPathArray(["/a", "/b"]),
        "dict": .propertyDictionary(["x": .double(1.5)]),
    ]),
    .dictionary(keySignature: "u", valueSignature: "a{sv}", [.uint32(1): .propertyDictionary(["k": .boolean(true)])]),
    .structure([.int32(1), .string("two"), .structure([.boolean(true), .bytes([9, 8])])]),
    .variant(.array(elementSignature: "v", [.variant(.int64(1)), .variant(.structure([.byte(1)]))])),
    .array(elementSignature: "a{sv}", [.propertyDictionary([:]), .propertyDictionary(["a": .uint16(3)])]),
]

@Suite("BatonDBus against a real dbus-daemon")
struct DBusConnectionTests {
    @Test func signaturesAreComputed() {
        #expect(DBusValue.propertyDictionary([:]).signature == "a{sv}")
        #expect(DBusValue.structure([.int32(1), .stringArray([])]).signature == "(ias)")
        #expect(DBusValue.array(elementSignature: "(is)", []).signature == "a(is)")
        #expect(DBusValue.variant(.string("x")).signature == "v")
    }

    @Test func roundTripsEveryTypeThroughASignal() async throws {
        try await withTestBus { bus in
            let sender = try DBusConnection(bus: .address(bus.address))
            let receiver = try DBusConnection(bus: .address(bus.address))
            let stream = try await receiver.signals(matching: DBusMatchRule(interface: "org.baton.Test", member: "Values"))
            try sender.emitSignal(path: "/org/baton/Values", interface: "org.baton.Test", name: "Values", arguments: sampleValues)
            let signal = try await first(of: stream)
            #expect(signal.arguments == sampleValues)
            #expect(signal.sender == sender.uniqueName)
            #expect(signal.path == "/org/baton/Values")
        }
    }

    @Test func roundTripsEveryTypeThroughAVariantMethodArgument() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            for value in sampleValues {
                let reply = try await pair.callService("Echo", [.variant(value)])
                #expect(reply == [.variant(value)])
            }
        }
    }

    @Test func accessorsUnwrapPropertyDictionaries() {
        let value = DBusValue.propertyDictionary(["Name": .string("x"), "Count": .uint32(3), "Tags": .stringArray(["a"])])
        let dictionary = value.asDictionary
        #expect(dictionary?["Name"]?.stringValue == "x")
        #expect(dictionary?["Count"]?.uint32Value == 3)
        #expect(dictionary?["Tags"]?.stringArrayValue == ["a"])
        #expect(DBusValue.variant(.int32(4)).int32Value == 4)
        #expect(DBusValue.string("x").int32Value == nil)
        #expect(DBusValue.bytes([1, 2]).bytesValue == [1, 2])
    }

    @Test func invalidValuesAreRejectedBeforeTheyAreSent() async throws {
        try await withTestBus { bus in
            let connection = try DBusConnection(bus: .address(bus.address))
            let bad: [DBusValue] = [
                .string("nul\u{0}inside"), .objectPath("not/a/path"), .signature("a{"),
                .array(elementSignature: "s", [.int32(1)]), .structure([]),
                .dictionary(keySignature: "v", valueSignature: "s", [:]),
            ]
            for value in bad {
                await expectDBusError(DBusError.invalidArgsName) {
                    try connection.emitSignal(path: "/x", interface: "org.baton.Test", name: "Bad", arguments: [value])
                }
            }
            await expectDBusError(DBusError.invalidArgsName) {
                _ = try await connection.call(destination: "org.baton.Test", path: "bad path", interface: nil, method: "X")
            }
            await expectDBusError(DBusError.invalidArgsName) {
                _ = try await connection.call(destination: "org.baton.Test", path: "/x", interface: "no dots", method: "X")
            }
            // Still usable afterwards.
            #expect(try await connection.nameHasOwner(connection.uniqueName))
        }
    }

    @Test func methodCallReturnsReply() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            #expect(try await pair.callService("Upper", [.string("baton")]) == [.string("BATON")])
            #expect(try await pair.callService("WhoAmI") == [.string(pair.client.uniqueName)])
            // The interface may be omitted by callers.
            #expect(try await pair.callService("Upper", [.string("x")], interface: nil) == [.string("X")])
        }
    }

    @Test func methodErrorsCarryTheirName() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            do {
                _ = try await pair.callService("Fail")
                Issue.record("Fail should throw")
            } catch let error as DBusError {
                #expect(error == DBusError(name: "org.baton.Test.Error.Nope", message: "nope"))
            }
            await expectDBusError(DBusError.failedName) { _ = try await pair.callService("BadReply") }
        }
    }

    @Test func asyncHandlerRepliesAfterDelayWithoutBlockingOthers() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            let order = CompletionOrder()
            // Ordering, not timing: a fast call made while the slow one is pending completes first.
            async let slow: [DBusValue] = {
                let reply = try await pair.callService("Slow", [.uint32(1500)])
                await order.append("slow")
                return reply
            }()
            #expect(try await pair.callService("Upper", [.string("fast")]) == [.string("FAST")])
            await order.append("fast")
            #expect(try await slow == [.string("done")])
            #expect(await order.items == ["fast", "slow"])
        }
    }

    @Test func callTimesOutWithNoReply() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            await expectDBusError(DBusError.noReplyName) {
                _ = try await pair.client.call(destination: pair.service.uniqueName, path: testPath, interface: testInterfaceName,
                                               method: "Slow", arguments: [.uint32(2000)], timeout: .milliseconds(200))
            }
        }
    }

    @Test func wrongSignatureAndUnknownMembersAreRejectedAndServiceSurvives() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            await expectDBusError(DBusError.invalidArgsName) { _ = try await pair.callService("Upper", [.int32(1)]) }
            await expectDBusError(DBusError.invalidArgsName) { _ = try await pair.callService("Upper", []) }
            await expectDBusError(DBusError.unknownMethodName) { _ = try await pair.callService("Nope") }
            await expectDBusError(DBusError.unknownInterfaceName) {
                _ = try await pair.callService("Upper", [.string("x")], interface: "org.baton.Other")
            }
            await expectDBusError(DBusError.unknownObjectName) {
                _ = try await pair.callService("Upper", [.string("x")], path: "/org/baton/Missing")
            }
            await expectDBusError(DBusError.invalidArgsName) { _ = try await pair.property("Get", [.string(testInterfaceName)]) }
            #expect(try await pair.callService("Upper", [.string("still here")]) == [.string("STILL HERE")])
        }
    }

    @Test func unixFileDescriptorsAreReceivedAsOwnedDuplicates() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            let fds = UnsafeMutablePointer<Int32>.allocate(capacity: 2)
            defer { fds.deallocate() }
            #expect(pipe(fds) == 0)
            defer { close(fds[0]); close(fds[1]) }
            #expect(try await pair.callService("TakeFD", [.unixFD(fds[0])]) == [.boolean(true)])
        }
    }

    @Test func signalsAreFilteredByMatchRule() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            #expect(try await pair.service.requestName("org.baton.TestService", flags: .doNotQueue) == .primaryOwner)
            let ticks = try await pair.client.signals(matching: DBusMatchRule(
                sender: "org.baton.TestService", interface: testInterfaceName, member: "Tick", path: testPath))
            let other = try await pair.client.signals(matching: DBusMatchRule(interface: testInterfaceName, member: "Other"))
            try pair.service.emitSignal(path: testPath, interface: testInterfaceName, name: "Other", arguments: [.uint32(1)])
            try pair.service.emitSignal(path: "/elsewhere", interface: testInterfaceName, name: "Tick", arguments: [.uint32(99)])
            try pair.service.emitSignal(path: testPath, interface: testInterfaceName, name: "Tick", arguments: [.uint32(2)])
            let tick = try await first(of: ticks)
            #expect(tick.arguments == [.uint32(2)])
            #expect(tick.sender == pair.service.uniqueName)
            #expect(try await first(of: other).arguments == [.uint32(1)])

            // A signal from another connection does not match the well-known sender.
            let impostor = try DBusConnection(bus: .address(bus.address))
            try impostor.emitSignal(path: testPath, interface: testInterfaceName, name: "Tick", arguments: [.uint32(666)])
            try pair.service.emitSignal(path: testPath, interface: testInterfaceName, name: "Tick", arguments: [.uint32(3)])
            #expect(try await first(of: ticks).arguments == [.uint32(3)])
        }
    }

    @Test func handlerSubscriptionStopsAfterUnsubscribe() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            let (received, continuation) = AsyncStream.makeStream(of: UInt32.self)
            let rule = DBusMatchRule(interface: testInterfaceName, member: "Tick")
            let subscription = try await pair.client.subscribe(rule) { signal in
                if let value = signal.arguments.first?.uint32Value { continuation.yield(value) }
            }
            try pair.service.emitSignal(path: testPath, interface: testInterfaceName, name: "Tick", arguments: [.uint32(1)])
            #expect(try await first(of: received) == 1)
            pair.client.unsubscribe(subscription)
            let control = try await pair.client.signals(matching: rule)
            try pair.service.emitSignal(path: testPath, interface: testInterfaceName, name: "Tick", arguments: [.uint32(2)])
            #expect(try await first(of: control).arguments == [.uint32(2)])
            continuation.finish()
            var afterUnsubscribe: [UInt32] = []
            for await value in received { afterUnsubscribe.append(value) }
            #expect(afterUnsubscribe.isEmpty)
        }
    }

    @Test func propertiesGetGetAllSetAndChangedSignal() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            #expect(try await pair.property("Get", [.string(testInterfaceName), .string("Name")]) == [.variant(.string("initial"))])
            let all = try await pair.property("GetAll", [.string(testInterfaceName)])
            #expect(all.first?.asDictionary == ["Name": .string("initial"), "Count": .uint32(7)])

            let changes = try await pair.client.signals(matching: DBusMatchRule(
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: testPath))
            #expect(try await pair.property("Set", [.string(testInterfaceName), .string("Name"), .variant(.string("renamed"))]) == [])
            let changed = try await first(of: changes)
            #expect(changed.arguments[0] == .string(testInterfaceName))
            #expect(changed.arguments[1].asDictionary == ["Name": .string("renamed")])
            #expect(try await pair.property("Get", [.string(testInterfaceName), .string("Name")]) == [.variant(.string("renamed"))])

            await expectDBusError(DBusError.propertyReadOnlyName) {
                _ = try await pair.property("Set", [.string(testInterfaceName), .string("Count"), .variant(.uint32(1))])
            }
            await expectDBusError(DBusError.invalidArgsName) {
                _ = try await pair.property("Set", [.string(testInterfaceName), .string("Name"), .variant(.uint32(1))])
            }
            await expectDBusError(DBusError.invalidArgsName) {  // the setter refuses
                _ = try await pair.property("Set", [.string(testInterfaceName), .string("Name"), .variant(.string(""))])
            }
            await expectDBusError(DBusError.unknownPropertyName) {
                _ = try await pair.property("Get", [.string(testInterfaceName), .string("Missing")])
            }

            try pair.service.emitPropertiesChanged(path: testPath, interface: testInterfaceName, changed: ["Count": .uint32(8)],
                                                   invalidated: ["Name"])
            let explicit = try await first(of: changes)
            #expect(explicit.arguments[1].asDictionary == ["Count": .uint32(8)])
            #expect(explicit.arguments[2].stringArrayValue == ["Name"])
        }
    }

    /// Owner-only properties: PropertiesChanged to one connection; another one subscribed hears only
    /// the broadcast that follows (the bus keeps one sender's messages in order).
    @Test func propertiesChangedToOneDestinationReachesOnlyIt() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            let other = try DBusConnection(bus: .address(bus.address))
            let rule = DBusMatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: testPath)
            let owner = try await pair.client.signals(matching: rule)
            let stranger = try await other.signals(matching: rule)
            try pair.service.emitPropertiesChanged(path: testPath, interface: testInterfaceName, changed: ["Count": .uint32(9)],
                                                   destination: pair.client.uniqueName)
            try pair.service.emitPropertiesChanged(path: testPath, interface: testInterfaceName, changed: ["Count": .uint32(10)])
            let toOwner = try await first(of: owner)
            #expect(toOwner.arguments[0] == .string(testInterfaceName))
            #expect(toOwner.arguments[1].asDictionary == ["Count": .uint32(9)])
            #expect(try await first(of: owner).arguments[1].asDictionary == ["Count": .uint32(10)])
            #expect(try await first(of: stranger).arguments[1].asDictionary == ["Count": .uint32(10)])
            other.close()
        }
    }

    @Test func objectManagerReportsAndAnnouncesObjects() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            try pair.service.addObjectManager(at: "/org/baton")
            let managerSignals = try await pair.client.signals(matching: DBusMatchRule(
                interface: "org.freedesktop.DBus.ObjectManager", path: "/org/baton"))

            let managed = try await pair.callService("GetManagedObjects", interface: "org.freedesktop.DBus.ObjectManager", path: "/org/baton")
            let objects = try #require(managed.first?.dictionaryValue)
            #expect(objects.count == 1)
            let testObject = try #require(objects[.objectPath(testPath)]?.dictionaryValue)
            #expect(testObject[.string(testInterfaceName)]?.asDictionary == ["Name": .string("initial"), "Count": .uint32(7)])

            let extra = DBusInterface("org.baton.Extra", properties: [DBusProperty("On", signature: "b", get: { .boolean(true) })])
            try await pair.service.export([extra], at: "/org/baton/items/1")
            let added = try await first(of: managerSignals)
            #expect(added.member == "InterfacesAdded")
            #expect(added.arguments[0] == .objectPath("/org/baton/items/1"))
            #expect(added.arguments[1].dictionaryValue?[.string("org.baton.Extra")]?.asDictionary == ["On": .boolean(true)])

            let afterAdd = try await pair.callService("GetManagedObjects", interface: "org.freedesktop.DBus.ObjectManager", path: "/org/baton")
            #expect(afterAdd.first?.dictionaryValue?.count == 2)

            try pair.service.unexport(path: "/org/baton/items/1")
            let removed = try await first(of: managerSignals)
            #expect(removed.member == "InterfacesRemoved")
            #expect(removed.arguments == [.objectPath("/org/baton/items/1"), .stringArray(["org.baton.Extra"])])
            await expectDBusError(DBusError.unknownObjectName) {
                _ = try await pair.callService("GetAll", [.string("org.baton.Extra")], interface: "org.freedesktop.DBus.Properties",
                                               path: "/org/baton/items/1")
            }
        }
    }

    @Test func introspectionDescribesInterfacesAndChildren() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            let introspect = "org.freedesktop.DBus.Introspectable"
            let xml = try #require(try await pair.callService("Introspect", interface: introspect).first?.stringValue)
            for fragment in [
                "<interface name=\"org.baton.Test\">", "<method name=\"Upper\">",
                "<arg name=\"text\" type=\"s\" direction=\"in\"/>", "<arg name=\"upper\" type=\"s\" direction=\"out\"/>",
                "<property name=\"Name\" type=\"s\" access=\"readwrite\"/>", "<property name=\"Count\" type=\"u\" access=\"read\"/>",
                "<signal name=\"Tick\">", "<interface name=\"org.freedesktop.DBus.Properties\">",
            ] {
                #expect(xml.contains(fragment), "missing \(fragment)")
            }
            let root = try #require(try await pair.callService("Introspect", interface: introspect, path: "/").first?.stringValue)
            #expect(root.contains("<node name=\"org\"/>"))
            let parent = try #require(try await pair.callService("Introspect", interface: introspect, path: "/org/baton").first?.stringValue)
            #expect(parent.contains("<node name=\"Test\"/>"))
        }
    }

    @Test func busHelpersReportOwnersAndUnixUser() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            #expect(try await pair.service.connectionUnixUser(pair.client.uniqueName) == UInt32(getuid()))
            #expect(try await pair.service.connectionUnixProcessID(pair.client.uniqueName) == UInt32(getpid()))
            #expect(try await pair.client.nameHasOwner("org.baton.Named") == false)
            #expect(try await pair.service.requestName("org.baton.Named") == .primaryOwner)
            #expect(try await pair.service.requestName("org.baton.Named") == .alreadyOwner)
            #expect(try await pair.client.requestName("org.baton.Named", flags: .doNotQueue) == .exists)
            #expect(try await pair.client.nameHasOwner("org.baton.Named"))
            #expect(try await pair.client.nameOwner("org.baton.Named") == pair.service.uniqueName)
            #expect(try await pair.service.releaseName("org.baton.Named") == .released)
            #expect(try await pair.service.releaseName("org.baton.Named") == .nonExistent)
            await expectDBusError(DBusError.nameHasNoOwnerName) { _ = try await pair.client.nameOwner("org.baton.Named") }
        }
    }

    @Test func nameOwnerWatchFiresWhenAClientDisconnects() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection(bus: .address(bus.address))
            let client = try DBusConnection(bus: .address(bus.address))
            let clientName = client.uniqueName
            let (vanished, continuation) = AsyncStream.makeStream(of: Void.self)
            _ = try await service.watchNameOwner(clientName) { continuation.yield() }
            let changes = try await service.nameOwnerChanges(for: clientName)
            client.close()
            #expect(!client.isConnected)
            try await first(of: vanished)
            let change = try await first(of: changes)
            #expect(change == DBusNameOwnerChange(name: clientName, oldOwner: clientName, newOwner: nil))
            await expectDBusError(DBusError.disconnectedName) {
                _ = try await client.nameHasOwner("org.freedesktop.DBus")
            }
        }
    }

    @Test func closingFailsPendingCallsAndEndsStreams() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            let stream = try await pair.client.signals(matching: DBusMatchRule(member: "Never"))
            let pending = Task { try await pair.callService("Slow", [.uint32(3000)]) }
            try await Task.sleep(for: .milliseconds(100))
            pair.client.close()
            await expectDBusError(DBusError.disconnectedName) { _ = try await pending.value }
            var count = 0
            for await _ in stream { count += 1 }
            #expect(count == 0)
        }
    }

    @Test func cancellingACallThrowsCancellation() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            let task = Task { try await pair.callService("Slow", [.uint32(5000)]) }
            try await Task.sleep(for: .milliseconds(100))
            task.cancel()
            await #expect(throws: CancellationError.self) { _ = try await task.value }
            #expect(try await pair.callService("Upper", [.string("ok")]) == [.string("OK")])
        }
    }

    @Test func externalToolCanCallExportedMethod() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            #expect(try await pair.service.requestName("org.baton.Interop") == .primaryOwner)
            let (status, output) = try await runTool("/usr/bin/dbus-send", [
                "--bus=\(bus.address)", "--print-reply", "--dest=org.baton.Interop", testPath,
                "\(testInterfaceName).Upper", "string:interop",
            ])
            #expect(status == 0, "\(output)")
            #expect(output.contains("string \"INTEROP\""), "\(output)")
            let (busctlStatus, busctlOutput) = try await runTool("/usr/bin/busctl", [
                "--address=\(bus.address)", "get-property", "org.baton.Interop", testPath, testInterfaceName, "Count",
            ])
            #expect(busctlStatus == 0, "\(busctlOutput)")
            #expect(busctlOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "u 7")
        }
    }

    @Test func manyConnectionsInOneProcess() async throws {
        try await withTestBus { bus in
            let connections = try (0..<8).map { _ in try DBusConnection(bus: .address(bus.address)) }
            #expect(Set(connections.map(\.uniqueName)).count == 8)
            for connection in connections {
                #expect(try await connection.nameHasOwner(connections[0].uniqueName))
            }
        }
    }

    @Test func droppingTheLastReferenceDisconnects() async throws {
        try await withTestBus { bus in
            let service = try DBusConnection(bus: .address(bus.address))
            var client: DBusConnection? = try DBusConnection(bus: .address(bus.address))
            let clientName = try #require(client?.uniqueName)
            let changes = try await service.nameOwnerChanges(for: clientName)
            client = nil
            #expect(try await first(of: changes).newOwner == nil)
            #expect(try await service.nameHasOwner(clientName) == false)
        }
    }

    @Test func peerInterfaceAnswers() async throws {
        try await withTestBus { bus in
            let pair = try await ServiceAndClient(bus)
            #expect(try await pair.callService("Ping", interface: "org.freedesktop.DBus.Peer") == [])
        }
    }

    @Test func sessionBusComesFromTheEnvironment() async throws {
        try await withTestBus { bus in
            // Only this test reads the session address; the others use explicit addresses.
            setenv("DBUS_SESSION_BUS_ADDRESS", bus.address, 1)
            let connection = try DBusConnection(bus: .session)
            unsetenv("DBUS_SESSION_BUS_ADDRESS")
            let other = try DBusConnection(bus: .address(bus.address))
            #expect(try await other.nameHasOwner(connection.uniqueName))
        }
    }
}

actor CompletionOrder {
    private(set) var items: [String] = []
    func append(_ item: String) { items.append(item) }
}
