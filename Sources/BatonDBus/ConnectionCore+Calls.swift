internal import CDBus
import Dispatch

// Incoming method calls: routing, argument reading within a budget, replies.

extension ConnectionCore {
    // MARK: - Incoming method calls

    /// Object-path handler: runs on the queue during dispatch. Arguments are read only once the
    /// call is routed, within the budget of the method it names, so a call that is refused (no
    /// such method, wrong signature, over budget) never costs more than that budget.
    func handleObjectMessage(_ message: OpaquePointer) -> DBusHandlerResult {
        guard dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_METHOD_CALL else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
        let incoming = RetainedMessage(message)
        let call = DBusMethodCall(sender: optionalString(dbus_message_get_sender(message)) ?? "",
                                  path: optionalString(dbus_message_get_path(message)) ?? "/",
                                  interface: optionalString(dbus_message_get_interface(message)),
                                  member: optionalString(dbus_message_get_member(message)) ?? "", arguments: [])
        route(call, signature: optionalString(dbus_message_get_signature(message)) ?? "", message: incoming)
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

    /// Answers a method call the gate kept from libdbus for its size, with the error its method's
    /// budget names; the text gives only sizes, nothing of the caller's message.
    func refuseOversized(_ message: OversizedMessage) {
        guard !isClosed, message.expectsReply, let sender = message.sender, DBusValidate.isValidBusName(sender),
              let error = dbus_message_new(DBUS_MESSAGE_TYPE_ERROR) else { return }
        defer { dbus_message_unref(error) }
        var name = DBusError.limitsExceededName
        if let path = message.path, let member = message.member, let object = objects[path] {
            let interface = message.interface.flatMap { object.interface(named: $0) }
                ?? object.interfaces.first { $0.method(named: member) != nil }
            if let budgetName = interface?.method(named: member)?.budget.tooLargeErrorName,
               DBusValidate.isValidErrorName(budgetName) { name = budgetName }
        }
        let limit = gate?.limit ?? 0
        guard dbus_message_set_error_name(error, name) != 0, dbus_message_set_destination(error, sender) != 0,
              dbus_message_set_reply_serial(error, message.serial) != 0 else { return }
        dbus_message_set_no_reply(error, 1)
        guard (try? DBusMarshal.append([.string("message of \(message.totalBytes) bytes is over the limit of \(limit) bytes")],
                                       to: error)) != nil else { return }
        _ = dbus_connection_send(raw, error, nil)
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
        var call = call
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
        /// The arguments within `budget`, or nil after replying with the refusal.
        func readArguments(_ budget: DBusArgumentBudget) -> [DBusValue]? {
            do {
                return try DBusMarshal.read(message.raw, budget: budget)
            } catch {
                fail(error)
                if error.name == budget.tooLargeErrorName { MemoryRelease.afterOversizedMessage() }
                return nil
            }
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
            // Get, GetAll and Set check their signatures; the standard budget bounds what is read first.
            guard let arguments = readArguments(.standard) else { return }
            call.arguments = arguments
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
            guard expect(method.inSignature), let arguments = readArguments(method.budget) else { return }
            call.arguments = arguments
            let handler = method.handler
            let call = call
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
}
