// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc

/// What an incoming method call gets, decided from the call and the exported objects: an answer
/// now (an error, Introspect, Peer), or a handler to run (admitted by `CallAdmission` first, and
/// replied to with what it returns). The connection performs the decision. Arguments are read only
/// once the call is routed, within the budget of the method it names, so a call that is refused (no
/// such method, wrong signature, over budget) never costs more than that budget. Reading an `h`
/// argument duplicates its descriptor, so this is not free of system calls: a descriptor no
/// receiver takes is closed here.
struct IncomingCallRouter {
    let registry: ObjectRegistry
    let incomingDescriptors: DBusDescriptorPolicy
    /// Emits PropertiesChanged after a `Set` whose property says so (on the connection's queue).
    let propertyChanged: @Sendable (_ path: String, _ interface: String, _ name: String, _ value: DBusValue) -> Void

    enum Decision {
        /// Answer now.
        case reply(CallOutcome)
        /// Refused for the size of its arguments: memory was freed that the process may give back.
        case replyReleasingMemory(DBusError)
        /// Run `work` and reply with what it returns (checked against `expectedSignature`);
        /// `discard` runs instead if the connection closes before it starts.
        case run(expectedSignature: String?, discard: @Sendable () -> Void, work: @Sendable () async throws -> [DBusValue])

        static func fail(_ error: DBusError) -> Decision { .reply(.failure(error)) }
        static func run(_ expectedSignature: String?, _ work: @escaping @Sendable () async throws -> [DBusValue]) -> Decision {
            .run(expectedSignature: expectedSignature, discard: {}, work: work)
        }
    }

    /// `org.freedesktop.DBus.Peer`, which every connection answers for every path.
    static func answerPeer(member: String, signature: String) -> CallOutcome {
        switch member {
        case "Ping" where signature.isEmpty:
            return .success([])
        case "GetMachineId" where signature.isEmpty:
            guard let machineID = MachineID.value else { return .failure(.failed("no machine id in /etc/machine-id or /var/lib/dbus/machine-id")) }
            return .success([.string(machineID)])
        case "Ping", "GetMachineId":
            return .failure(.invalidArgs("\(member) takes no arguments"))
        default:
            return .failure(.unknownMethod("no method \(member) in \(peerInterface)"))
        }
    }

    func route(_ call: DBusMethodCall, message: DBusMessage) -> Decision {
        var call = call
        let signature = message.signatureString
        let path = call.path
        guard let object = registry.object(at: path) else {
            // An intermediate node: only introspection is available.
            if call.member == "Introspect", call.interface == nil || call.interface == introspectableInterface {
                guard signature.isEmpty else { return .fail(.invalidArgs("Introspect takes no arguments")) }
                return .reply(.success([.string(registry.introspectionXML(for: path, object: nil))]))
            }
            return .fail(.unknownObject("no object at \(quoted(path))"))
        }
        func mismatch(_ expected: String) -> Decision? {
            signature == expected ? nil : .fail(.invalidArgs("\(call.member) expects signature '\(expected)', got '\(signature)'"))
        }
        /// The arguments within `budget`, or the refusal.
        func readArguments(_ budget: DBusArgumentBudget) -> Result<[DBusValue], DBusError> {
            Result { () throws(DBusError) in try message.arguments(budget: budget) }
        }
        func refusal(_ error: DBusError, _ budget: DBusArgumentBudget) -> Decision {
            error.name == budget.tooLargeErrorName ? .replyReleasingMemory(error) : .fail(error)
        }

        guard let interfaceName = registry.interfaceName(for: call.member, named: call.interface, object: object, at: path) else {
            return .fail(.unknownMethod("no method \(call.member) at \(quoted(path))"))
        }
        switch interfaceName {
        case introspectableInterface:
            guard call.member == "Introspect" else { return .fail(.unknownMethod("no method \(call.member) in \(interfaceName)")) }
            if let refused = mismatch("") { return refused }
            return .reply(.success([.string(registry.introspectionXML(for: path, object: object))]))
        case propertiesInterface:
            // Get, GetAll and Set check their signatures; the standard budget bounds what is read first.
            switch readArguments(.standard) {
            case .failure(let error): return refusal(error, .standard)
            case .success(let arguments):
                // Get, GetAll and Set take no descriptor: any that came are closed now.
                call.arguments = arguments.map { $0.closingDescriptors() }
            }
            if let refused = mismatch(Self.propertiesSignature(call.member) ?? signature) { return refused }
            return properties(call, object: object)
        case objectManagerInterface where registry.isManagerRoot(path):
            guard call.member == "GetManagedObjects" else { return .fail(.unknownMethod("no method \(call.member) in \(interfaceName)")) }
            if let refused = mismatch("") { return refused }
            let managed = registry.managed(under: path)
            return .run("a{oa{sa{sv}}}") {
                var entries: [DBusValue: DBusValue] = [:]
                for (objectPath, managedObject) in managed {
                    entries[.objectPath(objectPath)] = await PropertyReader.interfacesAndProperties(managedObject.interfaces)
                }
                return [.dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", entries)]
            }
        default:
            guard let interface = object.interface(named: interfaceName) else {
                return .fail(.unknownInterface("no interface \(interfaceName) at \(quoted(path))"))
            }
            guard let method = interface.method(named: call.member) else {
                return .fail(.unknownMethod("no method \(call.member) in \(interfaceName)"))
            }
            if let refused = mismatch(method.inSignature) { return refused }
            let arguments: [DBusValue]
            switch readArguments(method.budget) {
            case .failure(let error): return refusal(error, method.budget)
            case .success(let read): arguments = read
            }
            var lent: [Int32] = []
            switch incomingDescriptors {
            case .handlerOwnsAll:
                call.arguments = arguments
            case .declaredArgumentsOnly:
                // The handler may use the descriptors of the `h` arguments it declares while it runs;
                // they are closed when it returns or throws, and any other (inside a variant, say) is
                // closed now, so a call can never leave one open in the service.
                call.arguments = zip(arguments, method.inArguments).map { value, declared in
                    if declared.signature == "h", case .unixFD(let descriptor) = value { lent.append(descriptor); return value }
                    return value.closingDescriptors()
                }
            }
            let handler = method.handler
            let call = call
            let borrowed = lent
            let closeLent: @Sendable () -> Void = { DescriptorNumbers.close(borrowed) }
            return .run(expectedSignature: method.outSignature, discard: closeLent) {
                defer { closeLent() }
                return try await handler(call)
            }
        }
    }

    /// The signature each Properties method takes (nil: no such method, refused below).
    private static func propertiesSignature(_ member: String) -> String? {
        switch member {
        case "Get": "ss"
        case "GetAll": "s"
        case "Set": "ssv"
        default: nil
        }
    }

    private func properties(_ call: DBusMethodCall, object: ExportedObject) -> Decision {
        let arguments = call.arguments
        switch call.member {
        case "Get":
            guard let interfaceName = arguments[0].stringValue, let name = arguments[1].stringValue else { return .fail(.invalidArgs("Get expects signature 'ss'")) }
            guard let interface = object.interface(named: interfaceName) else { return .fail(.unknownInterface("no interface \(quoted(interfaceName))")) }
            guard let property = interface.property(named: name) else { return .fail(.unknownProperty("no property \(quoted(name)) in \(quoted(interfaceName))")) }
            return .run("v") { [.variant(try await PropertyReader.read(property))] }
        case "GetAll":
            guard let interfaceName = arguments[0].stringValue else { return .fail(.invalidArgs("GetAll expects signature 's'")) }
            let interfaces: [DBusInterface]
            if interfaceName.isEmpty {
                interfaces = object.interfaces
            } else if let interface = object.interface(named: interfaceName) {
                interfaces = [interface]
            } else if standardInterfaces.contains(interfaceName) {
                interfaces = []
            } else {
                return .fail(.unknownInterface("no interface \(quoted(interfaceName))"))
            }
            return .run("a{sv}") {
                var all: [String: DBusValue] = [:]
                for interface in interfaces {
                    all.merge(try await PropertyReader.properties(of: interface, skippingFailures: false)) { first, _ in first }
                }
                return [.propertyDictionary(all)]
            }
        case "Set":
            guard let interfaceName = arguments[0].stringValue, let name = arguments[1].stringValue, let value = arguments[2].variantValue
            else { return .fail(.invalidArgs("Set expects signature 'ssv'")) }
            guard let interface = object.interface(named: interfaceName) else { return .fail(.unknownInterface("no interface \(quoted(interfaceName))")) }
            guard let property = interface.property(named: name) else { return .fail(.unknownProperty("no property \(quoted(name)) in \(quoted(interfaceName))")) }
            guard property.access == .readwrite, let setter = property.set else { return .fail(.propertyReadOnly("property \(quoted(name)) is read-only")) }
            guard value.signature == property.signature else {
                return .fail(.invalidArgs("property \(quoted(name)) has type '\(property.signature)', got '\(value.signature)'"))
            }
            let path = call.path
            let propertyChanged = propertyChanged
            return .run("") {
                try await setter(value)
                if property.emitsChangedOnSet { propertyChanged(path, interfaceName, name, value) }
                return []
            }
        default:
            return .fail(.unknownMethod("no method \(call.member) in \(propertiesInterface)"))
        }
    }
}
