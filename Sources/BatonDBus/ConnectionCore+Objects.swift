internal import CDBus
import Dispatch

let introspectableInterface = "org.freedesktop.DBus.Introspectable"
let propertiesInterface = "org.freedesktop.DBus.Properties"
let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
let peerInterface = "org.freedesktop.DBus.Peer"
let standardInterfaces: Set<String> = [introspectableInterface, propertiesInterface, objectManagerInterface, peerInterface]

/// A result to send back for one incoming call.
typealias CallOutcome = Result<[DBusValue], DBusError>

extension ConnectionCore {
    static let objectMessageFunction: DBusObjectPathMessageFunction = { _, message, data in
        guard let message, let core = ConnectionCore.from(data) else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
        return core.handleObjectMessage(message)
    }

    private func withVTable<T>(_ body: (UnsafePointer<DBusObjectPathVTable>) -> T) -> T {
        var vtable = DBusObjectPathVTable()
        vtable.message_function = ConnectionCore.objectMessageFunction
        return withUnsafePointer(to: &vtable, body)
    }

    /// The "/" fallback catches calls to paths between exported objects (for introspection) and
    /// lets "/" itself be exported. Must run on the queue.
    private func ensureFallbackRegistered() throws(DBusError) {
        guard !fallbackRegistered else { return }
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        let data = Unmanaged.passUnretained(self).toOpaque()
        let ok = withVTable { dbus_connection_try_register_fallback(raw, "/", $0, data, &error) }
        guard ok != 0 else { throw takeLibDBusError(&error, fallback: "cannot register object tree") }
        dbus_error_free(&error)
        fallbackRegistered = true
    }

    /// Must run on the queue.
    private func registerPath(_ path: String) throws(DBusError) {
        try ensureFallbackRegistered()
        guard path != "/", !registeredPaths.contains(path) else { return }
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        let data = Unmanaged.passUnretained(self).toOpaque()
        let ok = withVTable { dbus_connection_try_register_object_path(raw, path, $0, data, &error) }
        guard ok != 0 else { throw takeLibDBusError(&error, fallback: "cannot register object path \(path)") }
        dbus_error_free(&error)
        registeredPaths.insert(path)
    }

    /// Must run on the queue.
    private func unregisterPathIfUnused(_ path: String) {
        guard objects[path] == nil, !objectManagerRoots.contains(path), registeredPaths.contains(path) else { return }
        _ = dbus_connection_unregister_object_path(raw, path)
        registeredPaths.remove(path)
    }

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
            try registerPath(path)
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
            unregisterPathIfUnused(path)
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
            try registerPath(root)
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

    // MARK: - Incoming method calls

    /// Object-path handler: runs on the queue during dispatch.
    func handleObjectMessage(_ message: OpaquePointer) -> DBusHandlerResult {
        guard dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_METHOD_CALL else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
        let incoming = RetainedMessage(message)
        let path = optionalString(dbus_message_get_path(message)) ?? "/"
        let interface = optionalString(dbus_message_get_interface(message))
        let member = optionalString(dbus_message_get_member(message)) ?? ""
        let signature = optionalString(dbus_message_get_signature(message)) ?? ""
        let arguments: [DBusValue]
        do {
            arguments = try DBusMarshal.read(message)
        } catch {
            reply(to: incoming, with: .failure(error), expectedSignature: nil)
            return DBUS_HANDLER_RESULT_HANDLED
        }
        let call = DBusMethodCall(sender: optionalString(dbus_message_get_sender(message)) ?? "", path: path,
                                  interface: interface, member: member, arguments: arguments)
        route(call, signature: signature, message: incoming)
        return DBUS_HANDLER_RESULT_HANDLED
    }

    /// Sends the reply now (synchronous outcome). Must run on the queue.
    private func reply(to message: RetainedMessage, with outcome: CallOutcome, expectedSignature: String?) {
        guard !isClosed, dbus_message_get_no_reply(message.raw) == 0 else { return }
        var outcome = outcome
        if case .success(let values) = outcome, let expectedSignature {
            let actual = values.map(\.signature).joined()
            if actual != expectedSignature {
                outcome = .failure(.failed("handler replied with signature '\(actual)', declared '\(expectedSignature)'"))
            }
        }
        var reply: OpaquePointer?
        if case .success(let values) = outcome {
            reply = dbus_message_new_method_return(message.raw)
            if let built = reply {
                do {
                    try DBusMarshal.append(values, to: built)
                } catch {
                    dbus_message_unref(built)
                    reply = nil
                    outcome = .failure(error)
                }
            }
        }
        if case .failure(let error) = outcome {
            let name = DBusValidate.isValidErrorName(error.name) ? error.name : DBusError.failedName
            let text = String(String.UnicodeScalarView(error.message.unicodeScalars.filter { $0 != "\0" }))
            reply = dbus_message_new_error(message.raw, name, text)
        }
        guard let reply else { return }
        _ = dbus_connection_send(raw, reply, nil)
        dbus_message_unref(reply)
    }

    /// Runs `work` as a task and replies when it finishes.
    private func replyLater(to message: RetainedMessage, sender: String, expectedSignature: String?,
                            _ work: @escaping @Sendable () async throws -> [DBusValue]) {
        Task {
            let outcome: CallOutcome
            do {
                outcome = .success(try await DBusCallContext.$sender.withValue(sender) { try await work() })
            } catch let error as DBusError {
                outcome = .failure(error)
            } catch {
                outcome = .failure(.failed(String(describing: error)))
            }
            self.queue.async { self.reply(to: message, with: outcome, expectedSignature: expectedSignature) }
        }
    }

    private func route(_ call: DBusMethodCall, signature: String, message: RetainedMessage) {
        let path = call.path
        let isManagerRoot = objectManagerRoots.contains(path)
        guard let object = objects[path] ?? (isManagerRoot ? ExportedObject(interfaces: []) : nil) else {
            // An intermediate node: only introspection is available.
            if call.member == "Introspect", call.interface == nil || call.interface == introspectableInterface {
                guard signature.isEmpty else { return reply(to: message, with: .failure(.invalidArgs("Introspect takes no arguments")), expectedSignature: nil) }
                return reply(to: message, with: .success([.string(introspectionXML(for: path, object: nil))]), expectedSignature: nil)
            }
            return reply(to: message, with: .failure(.unknownObject("no object at \(path)")), expectedSignature: nil)
        }

        func fail(_ error: DBusError) { reply(to: message, with: .failure(error), expectedSignature: nil) }
        func expect(_ expected: String) -> Bool {
            guard signature == expected else {
                fail(.invalidArgs("\(call.member) expects signature '\(expected)', got '\(signature)'"))
                return false
            }
            return true
        }

        let interfaceName = call.interface ?? standardInterface(forMember: call.member, isManagerRoot: isManagerRoot)
            ?? object.interfaces.first { $0.method(named: call.member) != nil }?.name
        guard let interfaceName else { return fail(.unknownMethod("no method \(call.member) at \(path)")) }

        switch interfaceName {
        case introspectableInterface:
            guard call.member == "Introspect" else { return fail(.unknownMethod("no method \(call.member) in \(interfaceName)")) }
            guard expect("") else { return }
            reply(to: message, with: .success([.string(introspectionXML(for: path, object: object))]), expectedSignature: nil)
        case propertiesInterface:
            handleProperties(call, signature: signature, object: object, message: message, fail: fail, expect: expect)
        case objectManagerInterface where isManagerRoot:
            guard call.member == "GetManagedObjects" else { return fail(.unknownMethod("no method \(call.member) in \(interfaceName)")) }
            guard expect("") else { return }
            let managed = objects.filter { ConnectionCore.isDescendant($0.key, of: path) }
            replyLater(to: message, sender: call.sender, expectedSignature: "a{oa{sa{sv}}}") {
                var entries: [DBusValue: DBusValue] = [:]
                for (objectPath, managedObject) in managed {
                    entries[.objectPath(objectPath)] = await ConnectionCore.interfacesAndProperties(managedObject.interfaces)
                }
                return [.dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", entries)]
            }
        default:
            guard let interface = object.interface(named: interfaceName) else {
                return fail(.unknownInterface("no interface \(interfaceName) at \(path)"))
            }
            guard let method = interface.method(named: call.member) else {
                return fail(.unknownMethod("no method \(call.member) in \(interfaceName)"))
            }
            guard expect(method.inSignature) else { return }
            let handler = method.handler
            replyLater(to: message, sender: call.sender, expectedSignature: method.outSignature) { try await handler(call) }
        }
    }

    private func standardInterface(forMember member: String, isManagerRoot: Bool) -> String? {
        switch member {
        case "Introspect": introspectableInterface
        case "Get", "GetAll", "Set": propertiesInterface
        case "GetManagedObjects" where isManagerRoot: objectManagerInterface
        default: nil
        }
    }

    private func handleProperties(_ call: DBusMethodCall, signature: String, object: ExportedObject, message: RetainedMessage,
                                  fail: (DBusError) -> Void, expect: (String) -> Bool) {
        let arguments = call.arguments
        switch call.member {
        case "Get":
            guard expect("ss"), let interfaceName = arguments[0].stringValue, let name = arguments[1].stringValue else { return }
            guard let interface = object.interface(named: interfaceName) else { return fail(.unknownInterface("no interface \(interfaceName)")) }
            guard let property = interface.property(named: name) else { return fail(.unknownProperty("no property \(name) in \(interfaceName)")) }
            replyLater(to: message, sender: call.sender, expectedSignature: "v") { [.variant(try await ConnectionCore.read(property))] }
        case "GetAll":
            guard expect("s"), let interfaceName = arguments[0].stringValue else { return }
            let interfaces: [DBusInterface]
            if interfaceName.isEmpty {
                interfaces = object.interfaces
            } else if let interface = object.interface(named: interfaceName) {
                interfaces = [interface]
            } else if standardInterfaces.contains(interfaceName) {
                interfaces = []
            } else {
                return fail(.unknownInterface("no interface \(interfaceName)"))
            }
            replyLater(to: message, sender: call.sender, expectedSignature: "a{sv}") {
                var all: [String: DBusValue] = [:]
                for interface in interfaces {
                    all.merge(try await ConnectionCore.readProperties(of: interface, skippingFailures: false)) { first, _ in first }
                }
                return [.propertyDictionary(all)]
            }
        case "Set":
            guard expect("ssv"), let interfaceName = arguments[0].stringValue, let name = arguments[1].stringValue,
                let value = arguments[2].variantValue
            else { return }
            guard let interface = object.interface(named: interfaceName) else { return fail(.unknownInterface("no interface \(interfaceName)")) }
            guard let property = interface.property(named: name) else { return fail(.unknownProperty("no property \(name) in \(interfaceName)")) }
            guard property.access == .readwrite, let setter = property.set else { return fail(.propertyReadOnly("property \(name) is read-only")) }
            guard value.signature == property.signature else {
                return fail(.invalidArgs("property \(name) has type '\(property.signature)', got '\(value.signature)'"))
            }
            let path = call.path
            replyLater(to: message, sender: call.sender, expectedSignature: "") {
                try await setter(value)
                if property.emitsChangedOnSet {
                    self.queue.async {
                        try? self.emitPropertiesChangedOnQueue(path: path, interface: interfaceName, changed: [name: value], invalidated: [])
                    }
                }
                return []
            }
        default:
            fail(.unknownMethod("no method \(call.member) in \(propertiesInterface)"))
        }
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
