// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch

let introspectableInterface = "org.freedesktop.DBus.Introspectable"
let propertiesInterface = "org.freedesktop.DBus.Properties"
let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
let peerInterface = "org.freedesktop.DBus.Peer"
let standardInterfaces: Set<String> = [introspectableInterface, propertiesInterface, objectManagerInterface, peerInterface]

/// A result to send back for one incoming call.
typealias CallOutcome = Result<[DBusValue], DBusError>

extension ConnectionCore {
    static func isDescendant(_ path: String, of root: String) -> Bool {
        guard path != root else { return false }
        return root == "/" ? path.hasPrefix("/") : path.hasPrefix(root + "/")
    }

    // MARK: - Export API

    func export(_ interfaces: [DBusInterface], at path: String) async throws {
        try DBusValidate.path(path)
        var names: Set<String> = []
        for interface in interfaces {
            try interface.validate()
            guard !standardInterfaces.contains(interface.name) else {
                throw DBusError.invalidArgs("\(interface.name) is provided automatically")
            }
            guard names.insert(interface.name).inserted else { throw DBusError.invalidArgs("duplicate interface \(interface.name)") }
        }
        let roots = try onQueue { () throws(DBusError) -> [String] in
            guard !isClosed else { throw .disconnected() }
            guard objects[path] == nil else { throw .invalidArgs("an object is already exported at \(path)") }
            objects[path] = ExportedObject(interfaces: interfaces)
            return objectManagerRoots.filter { ConnectionCore.isDescendant(path, of: $0) }.sorted()
        }
        guard !roots.isEmpty, !interfaces.isEmpty else { return }
        // A broadcast: no caller, even when a method handler exports the object.
        let added = await DBusCallContext.$sender.withValue(nil) { await ConnectionCore.interfacesAndProperties(interfaces) }
        try onQueue { () throws(DBusError) in
            // Skip if the object was removed (or replaced) while properties were being read.
            guard objects[path] != nil else { return }
            for root in roots {
                try emitSignalOnQueue(path: root, interface: objectManagerInterface, name: "InterfacesAdded",
                                      arguments: [.objectPath(path), added], destination: nil)
            }
        }
    }

    func unexport(path: String) throws {
        try onQueue { () throws(DBusError) in
            guard !isClosed else { throw .disconnected() }
            guard let removed = objects.removeValue(forKey: path) else { throw .unknownObject("nothing exported at \(path)") }
            guard !removed.interfaces.isEmpty else { return }
            for root in objectManagerRoots.sorted() where ConnectionCore.isDescendant(path, of: root) {
                try emitSignalOnQueue(path: root, interface: objectManagerInterface, name: "InterfacesRemoved",
                                      arguments: [.objectPath(path), .stringArray(removed.interfaces.map(\.name))],
                                      destination: nil)
            }
        }
    }

    func addObjectManager(at root: String) throws {
        try DBusValidate.path(root)
        try onQueue { () throws(DBusError) in
            guard !isClosed else { throw .disconnected() }
            objectManagerRoots.insert(root)
        }
    }

    /// `a{sa{sv}}` for the given interfaces; properties whose getter fails are left out.
    static func interfacesAndProperties(_ interfaces: [DBusInterface]) async -> DBusValue {
        var entries: [DBusValue: DBusValue] = [:]
        for interface in interfaces {
            let properties = (try? await readProperties(of: interface, skippingFailures: true)) ?? [:]
            entries[.string(interface.name)] = .propertyDictionary(properties)
        }
        return .dictionary(keySignature: "s", valueSignature: "a{sv}", entries)
    }

    static func readProperties(of interface: DBusInterface, skippingFailures: Bool) async throws -> [String: DBusValue] {
        var values: [String: DBusValue] = [:]
        for property in interface.properties {
            do {
                values[property.name] = try await read(property)
            } catch {
                if !skippingFailures { throw error }
            }
        }
        return values
    }

    static func read(_ property: DBusProperty) async throws -> DBusValue {
        let value = try await property.get()
        guard value.signature == property.signature else {
            throw DBusError.failed("property \(property.name) getter returned '\(value.signature)', declared '\(property.signature)'")
        }
        return value
    }

    /// Must run on the queue.
    func emitPropertiesChangedOnQueue(path: String, interface: String, changed: [String: DBusValue], invalidated: [String]) throws(DBusError) {
        try DBusValidate.interface(interface)
        try emitSignalOnQueue(path: path, interface: propertiesInterface, name: "PropertiesChanged",
                              arguments: [.string(interface), .propertyDictionary(changed), .stringArray(invalidated)],
                              destination: nil)
    }

    // MARK: - Introspection

    /// Must run on the queue.
    func introspectionXML(for path: String, object: ExportedObject?) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
            "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        func argument(_ argument: DBusArgument, direction: String?) -> String {
            let directionAttribute = direction.map { " direction=\"\($0)\"" } ?? ""
            return "      <arg name=\"\(xmlEscape(argument.name))\" type=\"\(xmlEscape(argument.signature))\"\(directionAttribute)/>\n"
        }
        xml += """
              <interface name="\(introspectableInterface)">
                <method name="Introspect">
                  <arg name="xml_data" type="s" direction="out"/>
                </method>
              </interface>
              <interface name="\(peerInterface)">
                <method name="Ping"/>
                <method name="GetMachineId">
                  <arg name="machine_uuid" type="s" direction="out"/>
                </method>
              </interface>

            """
        if let object {
            xml += """
                  <interface name="\(propertiesInterface)">
                    <method name="Get">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="property_name" type="s" direction="in"/>
                      <arg name="value" type="v" direction="out"/>
                    </method>
                    <method name="GetAll">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="properties" type="a{sv}" direction="out"/>
                    </method>
                    <method name="Set">
                      <arg name="interface_name" type="s" direction="in"/>
                      <arg name="property_name" type="s" direction="in"/>
                      <arg name="value" type="v" direction="in"/>
                    </method>
                    <signal name="PropertiesChanged">
                      <arg name="interface_name" type="s"/>
                      <arg name="changed_properties" type="a{sv}"/>
                      <arg name="invalidated_properties" type="as"/>
                    </signal>
                  </interface>

                """
            if objectManagerRoots.contains(path) {
                xml += """
                      <interface name="\(objectManagerInterface)">
                        <method name="GetManagedObjects">
                          <arg name="objects" type="a{oa{sa{sv}}}" direction="out"/>
                        </method>
                        <signal name="InterfacesAdded">
                          <arg name="object" type="o"/>
                          <arg name="interfaces" type="a{sa{sv}}"/>
                        </signal>
                        <signal name="InterfacesRemoved">
                          <arg name="object" type="o"/>
                          <arg name="interfaces" type="as"/>
                        </signal>
                      </interface>

                    """
            }
            for interface in object.interfaces {
                xml += "  <interface name=\"\(xmlEscape(interface.name))\">\n"
                for method in interface.methods {
                    xml += "    <method name=\"\(xmlEscape(method.name))\">\n"
                    for arg in method.inArguments { xml += argument(arg, direction: "in") }
                    for arg in method.outArguments { xml += argument(arg, direction: "out") }
                    xml += "    </method>\n"
                }
                for signal in interface.signals {
                    xml += "    <signal name=\"\(xmlEscape(signal.name))\">\n"
                    for arg in signal.arguments { xml += argument(arg, direction: nil) }
                    xml += "    </signal>\n"
                }
                for property in interface.properties {
                    let access = property.access == .readwrite ? "readwrite" : "read"
                    xml += "    <property name=\"\(xmlEscape(property.name))\" type=\"\(xmlEscape(property.signature))\" access=\"\(access)\"/>\n"
                }
                xml += "  </interface>\n"
            }
        }
        for child in childNodes(of: path) { xml += "  <node name=\"\(xmlEscape(child))\"/>\n" }
        xml += "</node>\n"
        return xml
    }

    /// Names of the direct children of `path` that lead to exported objects.
    private func childNodes(of path: String) -> [String] {
        var children: Set<String> = []
        let prefix = path == "/" ? "/" : path + "/"
        for candidate in Set(objects.keys).union(objectManagerRoots) where candidate != path && candidate.hasPrefix(prefix) {
            if let segment = candidate.dropFirst(prefix.count).split(separator: "/").first { children.insert(String(segment)) }
        }
        return children.sorted()
    }
}

func xmlEscape(_ text: String) -> String {
    var escaped = ""
    for character in text {
        switch character {
        case "&": escaped += "&amp;"
        case "<": escaped += "&lt;"
        case ">": escaped += "&gt;"
        case "\"": escaped += "&quot;"
        case "'": escaped += "&apos;"
        default: escaped.append(character)
        }
    }
    return escaped
}
