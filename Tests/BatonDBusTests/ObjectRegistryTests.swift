// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import Testing

/// `ObjectRegistry` and `IncomingCallRouter` without a bus: what is exported, which object managers
/// announce it, and what an incoming call is answered with.
@Suite("BatonDBus core: ObjectRegistry and IncomingCallRouter")
struct ObjectRegistryTests {
    static let echo = DBusInterface("org.baton.Echo", methods: [
        DBusMethod("Echo", in: [DBusArgument("text", "s")], out: [DBusArgument("text", "s")]) { call in call.arguments },
    ], properties: [DBusProperty("Count", signature: "u") { .uint32(3) }])

    @Test func exportsAreAnnouncedToTheManagersAboveThemOnly() throws {
        var registry = ObjectRegistry()
        registry.addManager(at: "/org/baton")
        registry.addManager(at: "/")
        registry.addManager(at: "/org/other")
        #expect(try registry.export([Self.echo], at: "/org/baton/echo") == ["/", "/org/baton"])
        #expect(throws: DBusError.self) { try registry.export([Self.echo], at: "/org/baton/echo") }
        #expect(registry.managed(under: "/org/baton").keys.sorted() == ["/org/baton/echo"])
        #expect(registry.managed(under: "/org/other").isEmpty)
        let (removed, roots) = try registry.unexport("/org/baton/echo")
        #expect(removed.interfaces.map(\.name) == ["org.baton.Echo"] && roots == ["/", "/org/baton"])
        #expect(throws: DBusError.self) { try registry.unexport("/org/baton/echo") }
    }

    @Test func intermediateNodesAndManagerRootsAreReachable() throws {
        var registry = ObjectRegistry()
        _ = try registry.export([Self.echo], at: "/a/b/c")
        registry.addManager(at: "/m")
        #expect(registry.object(at: "/a/b") == nil)
        #expect(registry.object(at: "/m")?.interfaces.isEmpty == true)
        #expect(registry.childNodes(of: "/") == ["a", "m"])
        #expect(registry.childNodes(of: "/a") == ["b"])
        #expect(ObjectRegistry.isDescendant("/a/b", of: "/a") && !ObjectRegistry.isDescendant("/ab", of: "/a")
                && !ObjectRegistry.isDescendant("/a", of: "/a") && ObjectRegistry.isDescendant("/a", of: "/"))
        let object = try #require(registry.object(at: "/a/b/c"))
        #expect(registry.interfaceName(for: "Echo", named: nil, object: object, at: "/a/b/c") == "org.baton.Echo")
        #expect(registry.interfaceName(for: "GetAll", named: nil, object: object, at: "/a/b/c") == propertiesInterface)
        #expect(registry.interfaceName(for: "GetManagedObjects", named: nil, object: object, at: "/a/b/c") == nil)
        #expect(registry.interfaceName(for: "GetManagedObjects", named: nil, object: object, at: "/m") == objectManagerInterface)
        #expect(throws: DBusError.self) { try ObjectRegistry.validate([Self.echo, Self.echo], at: "/x") }
        #expect(throws: DBusError.self) { try ObjectRegistry.validate([DBusInterface(peerInterface)], at: "/x") }
    }

    static func call(_ member: String, at path: String, interface: String? = nil, _ body: [DBusValue] = []) throws -> DBusMessage {
        var message = DBusMessage.methodCall(destination: ":1.1", path: path, interface: interface, member: member)
        message.serial = 9
        message.sender = ":1.7"
        return try DBusMessage.parse(try message.encoded(body: body).bytes, descriptors: [])
    }

    static func route(_ message: DBusMessage, in registry: ObjectRegistry) -> IncomingCallRouter.Decision {
        let call = DBusMethodCall(sender: message.sender ?? "", path: message.path ?? "/", interface: message.interface,
                                  member: message.member ?? "", arguments: [])
        return IncomingCallRouter(registry: registry, incomingDescriptors: .declaredArgumentsOnly) { _, _, _, _ in }
            .route(call, message: message)
    }

    static func errorName(_ decision: IncomingCallRouter.Decision) -> String? {
        if case .reply(.failure(let error)) = decision { return error.name }
        return nil
    }

    @Test func callsAreAnsweredOrHandedToTheirHandler() async throws {
        var registry = ObjectRegistry()
        _ = try registry.export([Self.echo], at: "/echo")
        #expect(Self.errorName(Self.route(try Self.call("Echo", at: "/nothing", ["x"].map(DBusValue.string)), in: registry))
                == DBusError.unknownObjectName)
        #expect(Self.errorName(Self.route(try Self.call("Nope", at: "/echo"), in: registry)) == DBusError.unknownMethodName)
        #expect(Self.errorName(Self.route(try Self.call("Echo", at: "/echo", [.uint32(1)]), in: registry)) == DBusError.invalidArgsName)
        #expect(Self.errorName(Self.route(try Self.call("Echo", at: "/echo", interface: "org.baton.Missing", [.string("x")]), in: registry))
                == DBusError.unknownInterfaceName)
        guard case .reply(.success(let xml)) = Self.route(try Self.call("Introspect", at: "/"), in: registry) else {
            Issue.record("intermediate node not introspectable")
            return
        }
        #expect(xml.first?.stringValue?.contains("<node name=\"echo\"/>") == true)
        guard case .run(let signature, _, let work) = Self.route(try Self.call("Echo", at: "/echo", [.string("hi")]), in: registry) else {
            Issue.record("Echo not handed to its handler")
            return
        }
        #expect(signature == "s")
        #expect(try await work() == [.string("hi")])
        guard case .run(_, _, let get) = Self.route(try Self.call("Get", at: "/echo", [.string("org.baton.Echo"), .string("Count")]), in: registry) else {
            Issue.record("Get not run")
            return
        }
        #expect(try await get() == [.variant(.uint32(3))])
        #expect(Self.errorName(Self.route(try Self.call("Set", at: "/echo", [.string("org.baton.Echo"), .string("Count"), .variant(.uint32(4))]),
                                          in: registry)) == DBusError.propertyReadOnlyName)
    }

    @Test func peerIsAnsweredWithoutAnObject() {
        guard case .success(let values) = IncomingCallRouter.answerPeer(member: "Ping", signature: "") else { Issue.record("Ping failed"); return }
        #expect(values.isEmpty)
        guard case .failure(let error) = IncomingCallRouter.answerPeer(member: "Ping", signature: "s") else { Issue.record("Ping took an argument"); return }
        #expect(error.name == DBusError.invalidArgsName)
        guard case .failure(let unknown) = IncomingCallRouter.answerPeer(member: "Pong", signature: "") else { Issue.record("Pong answered"); return }
        #expect(unknown.name == DBusError.unknownMethodName)
    }
}
