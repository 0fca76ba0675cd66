// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonClient
import BatonDBus
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
@testable import BatonService

/// Members of one interface as introspection XML describes them.
struct InterfaceShape: Equatable, CustomStringConvertible {
    /// name -> in signature + "->" + out signature
    var methods: [String: String] = [:]
    /// name -> type + " " + access
    var properties: [String: String] = [:]
    /// name -> signature
    var signals: [String: String] = [:]

    var description: String { "methods \(methods.sorted { $0.key < $1.key }), properties \(properties.sorted { $0.key < $1.key }), signals \(signals.sorted { $0.key < $1.key })" }
}

/// A small SAX reader of D-Bus introspection XML.
final class IntrospectionReader: NSObject, XMLParserDelegate {
    var interfaces: [String: InterfaceShape] = [:]
    private var interface: String?
    private var member: (kind: String, name: String)?
    private var inArgs = ""
    private var outArgs = ""

    static func parse(_ xml: String) throws -> [String: InterfaceShape] {
        let reader = IntrospectionReader()
        let parser = XMLParser(data: Data(xml.utf8))
        parser.delegate = reader
        guard parser.parse() else { throw DBusError.failed("unparseable introspection XML") }
        return reader.interfaces
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        switch name {
        case "interface":
            interface = attributes["name"]
            if let interface { interfaces[interface] = InterfaceShape() }
        case "method", "signal":
            member = (name, attributes["name"] ?? "")
            inArgs = ""
            outArgs = ""
        case "arg":
            let type = attributes["type"] ?? "?"
            if attributes["direction"] == "out" { outArgs += type } else { inArgs += type }
        case "property":
            if let interface, let propertyName = attributes["name"] {
                interfaces[interface]?.properties[propertyName] = (attributes["type"] ?? "?") + " " + (attributes["access"] ?? "?")
            }
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        switch name {
        case "interface":
            interface = nil
        case "method", "signal":
            guard let interface, let member else { return }
            if member.kind == "method" {
                interfaces[interface]?.methods[member.name] = inArgs + "->" + outArgs
            } else {
                interfaces[interface]?.signals[member.name] = inArgs
            }
            self.member = nil
        default:
            break
        }
    }
}

/// The checked-in dbus/*.xml files.
enum InterfaceFiles {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func xml(_ interface: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent("dbus/\(interface).xml"), encoding: .utf8)
    }

    static func shape(_ interface: String) throws -> InterfaceShape {
        try #require(try IntrospectionReader.parse(xml(interface))[interface])
    }

    /// An exported test object whose methods come from the XML file (the bus layer then checks the
    /// daemon's calls against the documented signatures) and whose bodies are `handler`.
    static func interface(_ name: String, handler: @escaping @Sendable (DBusMethodCall) async throws -> [DBusValue]) throws -> DBusInterface {
        let shape = try shape(name)
        return DBusInterface(name, methods: shape.methods.map { method, signature in
            let parts = signature.components(separatedBy: "->")
            return DBusMethod(method, in: splitSignature(parts[0]).enumerated().map { DBusArgument("in\($0.offset)", $0.element) },
                              out: splitSignature(parts[1]).enumerated().map { DBusArgument("out\($0.offset)", $0.element) },
                              handler: handler)
        })
    }

    /// Splits a signature into complete types (enough for the types these interfaces use).
    static func splitSignature(_ signature: String) -> [String] {
        var types: [String] = []
        var current = ""
        var depth = 0
        for character in signature {
            current.append(character)
            switch character {
            case "(", "{": depth += 1
            case ")", "}": depth -= 1
            case "a": continue
            default: break
            }
            if depth == 0 && character != "a" {
                types.append(current)
                current = ""
            }
        }
        return types
    }
}

@Suite("BatonServiceTests: introspection matches dbus/*.xml", .serialized)
struct IntrospectionTests {
    func introspect(_ connection: DBusConnection, _ path: String) async throws -> [String: InterfaceShape] {
        let reply = try await connection.call(destination: "org.baton", path: path, interface: "org.freedesktop.DBus.Introspectable",
                                              method: "Introspect")
        return try IntrospectionReader.parse(try #require(reply.first?.stringValue))
    }

    @Test func managerAndActivityObjectsMatchTheInterfaceFiles() async throws {
        try await withService { fixture in
            let manager = try await introspect(fixture.client, "/org/baton")
            #expect(manager["org.baton.Manager1"] == (try InterfaceFiles.shape("org.baton.Manager1")))
            #expect(manager["org.freedesktop.DBus.ObjectManager"] != nil)
            let path = try await fixture.client.createActivity()
            let activity = try await introspect(fixture.client, path)
            #expect(activity["org.baton.Activity1"] == (try InterfaceFiles.shape("org.baton.Activity1")))
            #expect(activity["org.freedesktop.DBus.Properties"]?.signals["PropertiesChanged"] == "sa{sv}as")
        }
    }

    /// The objects the daemon calls into: baton-agent's Agent1 and the client library's handler.
    @Test func agentAndClientHandlerObjectsMatchTheInterfaceFiles() async throws {
        try await withService { fixture in
            let agent = try fixture.connect()
            defer { agent.close() }
            try await AgentService.export(on: agent, logger: CollectingAgentLog())
            let agentReply = try await fixture.client.call(destination: AgentService.busName, path: AgentService.path,
                                                           interface: "org.freedesktop.DBus.Introspectable", method: "Introspect")
            let agentShapes = try IntrospectionReader.parse(try #require(agentReply.first?.stringValue))
            #expect(agentShapes["org.baton.Agent1"] == (try InterfaceFiles.shape("org.baton.Agent1")))

            let app = BatonConnection(connection: try fixture.connect())
            defer { app.close() }
            let registration = try await app.registerHandler(for: ["org.example.Reader.reading"]) { _ in }
            let handlerReply = try await fixture.client.call(destination: app.dbus.uniqueName, path: registration.path,
                                                             interface: "org.freedesktop.DBus.Introspectable", method: "Introspect")
            let handlerShapes = try IntrospectionReader.parse(try #require(handlerReply.first?.stringValue))
            #expect(handlerShapes["org.baton.ActivityHandler1"] == (try InterfaceFiles.shape("org.baton.ActivityHandler1")))
        }
    }

    @Test func signatureSplitting() {
        #expect(InterfaceFiles.splitSignature("ssa{sv}a{sv}") == ["s", "s", "a{sv}", "a{sv}"])
        #expect(InterfaceFiles.splitSignature("oas(sd)aa{sv}") == ["o", "as", "(sd)", "aa{sv}"])
        #expect(InterfaceFiles.splitSignature("").isEmpty)
    }

    @Test func applicationSideFilesDescribeWhatTheDaemonCalls() throws {
        let source = try InterfaceFiles.shape("org.baton.ActivitySource1")
        #expect(source.methods == ["WillSave": "o->a{sv}", "WasContinued": "os->"])
        let handler = try InterfaceFiles.shape("org.baton.ActivityHandler1")
        #expect(handler.methods == ["WillContinue": "ss->b", "Continue": "ssa{sv}a{sv}->", "FailedToContinue": "sss->"])
    }
}
