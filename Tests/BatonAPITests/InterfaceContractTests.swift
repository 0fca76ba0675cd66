// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

/// The members of each `<interface>` of one introspection XML file, in BatonAPI's terms.
final class InterfaceXMLReader: NSObject, XMLParserDelegate {
    private(set) var interfaces: [String: [MemberContract]] = [:]
    private var interface: String?
    private var member: MemberContract?
    private(set) var problems: [String] = []

    static func parse(_ xml: String) throws -> InterfaceXMLReader {
        let reader = InterfaceXMLReader()
        let parser = XMLParser(data: Data(xml.utf8))
        parser.delegate = reader
        guard parser.parse() else { throw BatonAPIError(.failed, "unparseable introspection XML") }
        return reader
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        switch name {
        case "interface":
            interface = attributes["name"]
            if let interface { interfaces[interface] = [] }
        case "method", "signal":
            member = MemberContract(kind: name == "method" ? .method : .signal, name: attributes["name"] ?? "", in: [])
        case "arg":
            guard member != nil else { return problems.append("arg outside a method or signal") }
            let argument = DBusArgument(attributes["name"] ?? "", attributes["type"] ?? "?")
            if attributes["direction"] == "out" {
                if member?.kind == .signal { problems.append("signal \(member?.name ?? "") has an out argument") }
                member?.outArguments.append(argument)
            } else {
                member?.inArguments.append(argument)
            }
        case "property":
            guard let interface, let propertyName = attributes["name"] else { return problems.append("property outside an interface") }
            interfaces[interface]?.append(MemberContract(kind: .property, name: propertyName,
                                                         in: [DBusArgument(propertyName, attributes["type"] ?? "?")],
                                                         access: attributes["access"] ?? "?"))
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        switch name {
        case "interface":
            interface = nil
        case "method", "signal":
            guard let interface, let member else { return problems.append("\(name) outside an interface") }
            interfaces[interface]?.append(member)
            self.member = nil
        default:
            break
        }
    }
}

@Suite("BatonAPI: every method, signal and property of dbus/*.xml is declared once in BatonAPI, and nothing else")
struct InterfaceContractTests {
    /// Every interface of every dbus/*.xml file, with its members.
    static func xmlInterfaces() throws -> [String: [MemberContract]] {
        var all: [String: [MemberContract]] = [:]
        for file in try ContractFiles.interfaceFiles {
            let reader = try InterfaceXMLReader.parse(try ContractFiles.text("dbus/" + file))
            #expect(reader.problems.isEmpty, "\(file): \(reader.problems)")
            for (name, members) in reader.interfaces {
                #expect(all[name] == nil, "\(name) is described twice")
                all[name] = members
            }
        }
        return all
    }

    static func byKindAndName(_ members: [MemberContract]) -> [String: MemberContract] {
        Dictionary(members.map { ("\($0.kind.rawValue) \($0.name)", $0) }, uniquingKeysWith: { first, _ in first })
    }

    @Test func theDeclaredInterfacesAreExactlyTheXMLFiles() throws {
        let xml = try Self.xmlInterfaces()
        let declared = OrgBaton.interfaces.map { $0.name }
        #expect(Set(declared) == Set(xml.keys))
        #expect(declared.count == Set(declared).count, "an interface declared twice")
        #expect(Set(declared) == Set(BatonInterface.all))
    }

    /// Each member of the XML is declared with the same kind, name, argument names, signatures,
    /// directions and access, and nothing is declared that the XML lacks.
    @Test(arguments: OrgBaton.interfaces.map { $0.name })
    func membersAgreeBothWays(_ interface: String) throws {
        let xml = try #require(try Self.xmlInterfaces()[interface], "dbus/\(interface).xml")
        let contract = try #require(OrgBaton.interfaces.first { $0.name == interface })
        let declared = contract.members
        #expect(!declared.isEmpty)
        let declaredByName = Self.byKindAndName(declared)
        let xmlByName = Self.byKindAndName(xml)
        #expect(declaredByName.count == declared.count, "\(interface): a member declared twice")
        #expect(xmlByName.count == xml.count, "\(interface): a member described twice in the XML")
        for (key, member) in xmlByName {
            #expect(declaredByName[key] == member, "\(interface): XML has \(member), BatonAPI \(declaredByName[key].map(String.init(describing:)) ?? "nothing")")
        }
        for key in Set(declaredByName.keys).subtracting(xmlByName.keys) {
            Issue.record("\(interface): BatonAPI declares \(declaredByName[key]!), which dbus/\(interface).xml lacks")
        }
    }

    /// The contract's members are what its typed declarations say (the lists are not written apart from them).
    @Test func typedDeclarationsFeedTheMemberLists() {
        #expect(OrgBaton.Manager1.createActivity.inSignature == "ssa{sv}a{sv}")
        #expect(OrgBaton.Manager1.createActivity.outSignature == "o")
        #expect(OrgBaton.Manager1.members.contains(OrgBaton.Manager1.createActivity.member))
        #expect(OrgBaton.Ring1.documentProgress.description == DBusSignalDescription(
            "DocumentProgress", arguments: [DBusArgument("activityType", "s"), DBusArgument("received", "t"), DBusArgument("total", "t")]))
        for interface in OrgBaton.interfaces {
            for member in interface.members where member.kind == .method {
                #expect(!member.name.isEmpty && member.name.first!.isUppercase, "\(interface.name).\(member.name)")
            }
        }
    }

    @Test func typedArgumentsAndRepliesRoundTrip() throws {
        let create = OrgBaton.Manager1.createActivity
        let values = create.encodeArguments(("org.example.reading", "Chapter 2", ["page": PropertyValue.integer(12)], ["Version": .int64(3)]))
        #expect(values.map(\.signature) == ["s", "s", "a{sv}", "a{sv}"])
        let decoded = try create.decodeArguments(values)
        #expect(decoded.0 == "org.example.reading" && decoded.1 == "Chapter 2" && decoded.2 == ["page": .integer(12)])
        #expect(decoded.3["Version"]?.int64Value == 3)
        #expect(try create.decodeReply([.objectPath("/org/baton/activity/u1000_1")]) == "/org/baton/activity/u1000_1")

        // A reply of another shape is Failed with the method's name; arguments of another shape are InvalidArguments.
        let wrongReply = #expect(throws: BatonAPIError.self) { try create.decodeReply([.string("x"), .string("y")]) }
        #expect(wrongReply?.name == .failed)
        #expect(wrongReply?.message == "unexpected reply from the daemon: CreateActivity returned [\"s\", \"s\"]")
        let wrongArguments = #expect(throws: BatonAPIError.self) { try create.decodeArguments([.string("x")]) }
        #expect(wrongArguments?.name == .invalidArguments)
        #expect(wrongArguments?.message == "CreateActivity expects (ssa{sv}a{sv})")

        let pair = OrgBaton.Pairing1.pair
        let pairValues = pair.encodeArguments(("ble:AA:BB:CC:DD:EE:FF/129", PairOptions(sessionID: "0123456789abcdef", addressType: "random")))
        let pairDecoded = try pair.decodeArguments(pairValues)
        #expect(pairDecoded.1 == PairOptions(sessionID: "0123456789abcdef", addressType: "random"))
        #expect(try OrgBaton.Ring1.getRadioNotices.decodeReply([.stringArray(["a", "b"])]) == ["a", "b"])
        try OrgBaton.Activity1.becomeCurrent.decodeReply([])
    }

    @Test func signalsAndPropertiesDecodeTheirValues() {
        let progress = OrgBaton.Ring1.documentProgress
        let signal = DBusSignal(sender: ":1.1", path: BatonObjectPath.ring, interface: BatonInterface.ring, member: "DocumentProgress",
                                arguments: progress.encode(("org.example.reading", 10, 20)))
        let decoded = progress.decode(signal)
        #expect(decoded?.0 == "org.example.reading" && decoded?.1 == 10 && decoded?.2 == 20)
        var other = signal
        other.arguments = [.string("x")]
        #expect(progress.decode(other) == nil)

        let properties: [String: DBusValue] = ["Version": .variant(.string("1.2")), "BusName": .int32(4)]
        #expect(OrgBaton.Manager1.version.value(in: properties) == "1.2")
        #expect(OrgBaton.Manager1.busName.value(in: properties) == nil, "another type reads as absent")
    }
}
