// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch
import Glibc

// Incoming method calls: routing, argument reading within a budget, replies.

extension ConnectionCore {
    // MARK: - Incoming method calls

    /// Runs on the queue during dispatch, for every method call. Arguments are read only once the
    /// call is routed, within the budget of the method it names, so a call that is refused (no
    /// such method, wrong signature, over budget) never costs more than that budget.
    func handleObjectMessage(_ message: DBusMessage) {
        let call = DBusMethodCall(sender: message.sender ?? "", path: message.path ?? "/", interface: message.interface,
                                  member: message.member ?? "", arguments: [])
        let address = ReplyAddress(sender: message.sender, serial: message.serial, expectsReply: message.expectsReply)
        if call.interface == peerInterface {
            return answerPeer(call, signature: message.signatureString, address: address)
        }
        route(call, message: message, address: address)
    }

    /// `org.freedesktop.DBus.Peer`, which every connection answers for every path.
    private func answerPeer(_ call: DBusMethodCall, signature: String, address: ReplyAddress) {
        switch call.member {
        case "Ping" where signature.isEmpty:
            reply(to: address, with: .success([]), expectedSignature: nil)
        case "GetMachineId" where signature.isEmpty:
            if let machineID = MachineID.value {
                reply(to: address, with: .success([.string(machineID)]), expectedSignature: nil)
            } else {
                reply(to: address, with: .failure(.failed("no machine id in /etc/machine-id or /var/lib/dbus/machine-id")), expectedSignature: nil)
            }
        case "Ping", "GetMachineId":
            reply(to: address, with: .failure(.invalidArgs("\(call.member) takes no arguments")), expectedSignature: nil)
        default:
            reply(to: address, with: .failure(.unknownMethod("no method \(call.member) in \(peerInterface)")), expectedSignature: nil)
        }
    }

    /// Sends the reply now (synchronous outcome). Must run on the queue.
    private func reply(to address: ReplyAddress, with outcome: CallOutcome, expectedSignature: String?) {
        guard !isClosed, address.expectsReply else { return }
        var outcome = outcome
        if case .success(let values) = outcome, let expectedSignature {
            let actual = values.map(\.signature).joined()
            if actual != expectedSignature {
                outcome = .failure(.failed("handler replied with signature '\(actual)', declared '\(expectedSignature)'"))
            }
        }
        if case .success(let values) = outcome {
            var reply = address.reply(kind: .methodReturn)
            do throws(DBusError) {
                try send(&reply, body: values)
                return
            } catch {
                outcome = .failure(error)
            }
        }
        guard case .failure(let error) = outcome else { return }
        var reply = address.reply(kind: .error)
        reply.errorName = DBusValidate.isValidErrorName(error.name) ? error.name : DBusError.failedName
        // An error text never echoes unbounded caller input (a path, a name from the arguments).
        let text = String(String.UnicodeScalarView(quoted(error.message, limit: 1024).unicodeScalars.filter { $0 != "\0" }))
        _ = try? send(&reply, body: [.string(text)])
    }

    /// Answers a method call refused for its size as it streamed in, with the error its method's
    /// budget names; the text gives only sizes, nothing of the caller's message.
    /// A reply over `maxReplyBytes` to one of our calls fails that call at once, saying so (it used
    /// to be dropped and the call waited out its 25 s timeout).
    func refuseOversized(_ message: OversizedMessage) {
        if message.isReply {
            guard !isClosed, let serial = message.replySerial, let reply = inflight[serial],
                  ReplyMatch.accepts(expectedSender: reply.expectedSender, sender: message.sender, isError: message.type == OversizedMessage.error)
            else { return }
            let who = message.sender.map { " from \(quoted($0))" } ?? ""
            reply.finish(.failure(DBusError(name: DBusError.replyTooLargeName,
                message: "the reply\(who) was \(message.totalBytes) bytes, over this connection's limit of \(configuration.replyLimit) bytes for replies; it was dropped unread")))
            return
        }
        guard !isClosed, message.expectsReply, let sender = message.sender, DBusNames.isValidBusName(sender.utf8, asReceived: true) else { return }
        var name = DBusError.limitsExceededName
        if let path = message.path, let member = message.member, let object = objects[path] {
            let interface = message.interface.flatMap { object.interface(named: $0) }
                ?? object.interfaces.first { $0.method(named: member) != nil }
            if let budgetName = interface?.method(named: member)?.budget.tooLargeErrorName,
               DBusValidate.isValidErrorName(budgetName) { name = budgetName }
        }
        var error = ReplyAddress(sender: sender, serial: message.serial, expectsReply: true).reply(kind: .error)
        error.errorName = name
        _ = try? send(&error, body: [.string("message of \(message.totalBytes) bytes is over the limit of \(configuration.incomingLimit) bytes")])
    }

    /// A message dropped for its header (the connection goes on): a call whose caller waits gets
    /// an error saying so; a malformed reply from whom one of our calls went to ends that call.
    func refuseMalformed(_ attempt: HeaderAttempt) {
        guard !isClosed else { return }
        if let serial = attempt.replySerial, attempt.type == DBusMessage.Kind.methodReturn.rawValue || attempt.type == DBusMessage.Kind.error.rawValue,
           let reply = inflight[serial], ReplyMatch.accepts(expectedSender: reply.expectedSender, sender: attempt.sender, isError: false) {
            reply.finish(.failure(DBusError(name: DBusError.invalidArgsName,
                                            message: "the reply could not be read: malformed message header (\(attempt.reason))")))
            return
        }
        guard attempt.expectsReply, let sender = attempt.sender, DBusNames.isValidBusName(sender.utf8, asReceived: true) else { return }
        var error = ReplyAddress(sender: sender, serial: attempt.serial, expectsReply: true).reply(kind: .error)
        error.errorName = DBusError.invalidArgsName
        _ = try? send(&error, body: [.string("malformed message header: \(attempt.reason)")])
    }

    /// Runs `work` as a task and replies when it finishes. A caller has at most
    /// `runningPerSender` handlers running at once; its further calls wait, in order, for one of
    /// them to finish (as messages, not replies: 128 pipelined GetManagedObjects of 4 MB each held
    /// 555 MiB when all ran at once). `discard` runs instead of `work` if the connection closes first.
    private func replyLater(to address: ReplyAddress, sender: String, expectedSignature: String?,
                            discard: @escaping @Sendable () -> Void = {},
                            _ work: @escaping @Sendable () async throws -> [DBusValue]) {
        handlersBySender[sender, default: 0] += 1
        let handler = PendingHandler(address: address, expectedSignature: expectedSignature, work: work, discard: discard)
        if runningBySender[sender, default: 0] < configuration.runningPerSender, mayStartHandler {
            runningBySender[sender, default: 0] += 1
            start(handler, for: sender)
        } else {
            waitingBySender[sender, default: []].append(handler)
        }
    }

    /// Whether a handler may start now: the bus keeps up with the replies, and fewer than
    /// `runningAtMost` run (with handlers slower than the stream, every call read would otherwise
    /// start before the first reply counted against the outbox).
    var mayStartHandler: Bool { !outboxIsFull && handlersRunning < configuration.runningAtMost }

    /// Starts waiting handlers of every caller with a free slot (after the outbox drained, or a
    /// handler finished).
    func startWaitingHandlers() {
        for sender in Array(waitingBySender.keys) {
            while mayStartHandler, runningBySender[sender, default: 0] < configuration.runningPerSender,
                  var waiting = waitingBySender[sender], !waiting.isEmpty {
                let next = waiting.removeFirst()
                waitingBySender[sender] = waiting.isEmpty ? nil : waiting
                runningBySender[sender, default: 0] += 1
                start(next, for: sender)
            }
        }
    }

    private func start(_ handler: PendingHandler, for sender: String) {
        handlersRunning += 1
        mostHandlersRunning = max(mostHandlersRunning, handlersRunning)
        Task {
            let outcome: CallOutcome
            do {
                outcome = .success(try await DBusCallContext.$sender.withValue(sender) { try await handler.work() })
            } catch let error as DBusError {
                outcome = .failure(error)
            } catch {
                outcome = .failure(.failed(String(describing: error)))
            }
            self.queue.async {
                self.reply(to: handler.address, with: outcome, expectedSignature: handler.expectedSignature)
                if let left = self.handlersBySender[sender], left > 1 { self.handlersBySender[sender] = left - 1 } else { self.handlersBySender[sender] = nil }
                self.handlersRunning -= 1
                // A waiting call starts only while the bus keeps up with the replies: those of calls
                // started regardless made the outbox (not the handlers) hold 1 GiB in an attack.
                if self.mayStartHandler, var waiting = self.waitingBySender[sender], !waiting.isEmpty {
                    let next = waiting.removeFirst()
                    self.waitingBySender[sender] = waiting.isEmpty ? nil : waiting
                    self.start(next, for: sender)
                } else if let running = self.runningBySender[sender], running > 1 {
                    self.runningBySender[sender] = running - 1
                } else {
                    self.runningBySender[sender] = nil
                }
                // Another caller's call may have waited for this slot.
                if !self.waitingBySender.isEmpty, self.mayStartHandler { self.startWaitingHandlers() }
                if self.handlersRunning == 0, self.mostHandlersRunning >= self.configuration.burstHandlers {
                    self.mostHandlersRunning = 0
                    self.configuration.memoryReleasable?()
                }
            }
        }
    }

    // The limits (handlers per caller and in all, calls served per caller, a burst) are the
    // connection's `DBusConnectionConfiguration`.

    private func route(_ call: DBusMethodCall, message: DBusMessage, address: ReplyAddress) {
        // A caller with `maxHandlersPerSender` calls being served gets LimitsExceeded at once, before
        // its arguments are read or a task is made: one connection's flood of pipelined calls cannot
        // make the service hold thousands of them (nor the descriptors they bring).
        let serving = handlersBySender[call.sender, default: 0]
        guard serving < configuration.maxHandlersPerSender else {
            return reply(to: address, with: .failure(DBusError(name: DBusError.limitsExceededName,
                message: "\(serving) calls of this connection are being served; wait for their replies")), expectedSignature: nil)
        }
        var call = call
        let signature = message.signatureString
        let path = call.path
        let isManagerRoot = objectManagerRoots.contains(path)
        guard let object = objects[path] ?? (isManagerRoot ? ExportedObject(interfaces: []) : nil) else {
            // An intermediate node: only introspection is available.
            if call.member == "Introspect", call.interface == nil || call.interface == introspectableInterface {
                guard signature.isEmpty else { return reply(to: address, with: .failure(.invalidArgs("Introspect takes no arguments")), expectedSignature: nil) }
                return reply(to: address, with: .success([.string(introspectionXML(for: path, object: nil))]), expectedSignature: nil)
            }
            return reply(to: address, with: .failure(.unknownObject("no object at \(quoted(path))")), expectedSignature: nil)
        }

        func fail(_ error: DBusError) { reply(to: address, with: .failure(error), expectedSignature: nil) }
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
                return try message.arguments(budget: budget)
            } catch {
                fail(error)
                if error.name == budget.tooLargeErrorName { configuration.memoryReleasable?() }
                return nil
            }
        }

        let interfaceName = call.interface ?? standardInterface(forMember: call.member, isManagerRoot: isManagerRoot)
            ?? object.interfaces.first { $0.method(named: call.member) != nil }?.name
        guard let interfaceName else { return fail(.unknownMethod("no method \(call.member) at \(quoted(path))")) }

        switch interfaceName {
        case introspectableInterface:
            guard call.member == "Introspect" else { return fail(.unknownMethod("no method \(call.member) in \(interfaceName)")) }
            guard expect("") else { return }
            reply(to: address, with: .success([.string(introspectionXML(for: path, object: object))]), expectedSignature: nil)
        case propertiesInterface:
            // Get, GetAll and Set check their signatures; the standard budget bounds what is read first.
            guard let arguments = readArguments(.standard) else { return }
            // Get, GetAll and Set take no descriptor: any that came are closed now.
            call.arguments = arguments.map { $0.closingDescriptors() }
            handleProperties(call, signature: signature, object: object, address: address, fail: fail, expect: expect)
        case objectManagerInterface where isManagerRoot:
            guard call.member == "GetManagedObjects" else { return fail(.unknownMethod("no method \(call.member) in \(interfaceName)")) }
            guard expect("") else { return }
            let managed = objects.filter { ConnectionCore.isDescendant($0.key, of: path) }
            replyLater(to: address, sender: call.sender, expectedSignature: "a{oa{sa{sv}}}") {
                var entries: [DBusValue: DBusValue] = [:]
                for (objectPath, managedObject) in managed {
                    entries[.objectPath(objectPath)] = await ConnectionCore.interfacesAndProperties(managedObject.interfaces)
                }
                return [.dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", entries)]
            }
        default:
            guard let interface = object.interface(named: interfaceName) else {
                return fail(.unknownInterface("no interface \(interfaceName) at \(quoted(path))"))
            }
            guard let method = interface.method(named: call.member) else {
                return fail(.unknownMethod("no method \(call.member) in \(interfaceName)"))
            }
            guard expect(method.inSignature), let arguments = readArguments(method.budget) else { return }
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
            replyLater(to: address, sender: call.sender, expectedSignature: method.outSignature,
                       discard: { for descriptor in borrowed { _ = close(descriptor) } }) {
                defer { for descriptor in borrowed { _ = close(descriptor) } }
                return try await handler(call)
            }
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

    private func handleProperties(_ call: DBusMethodCall, signature: String, object: ExportedObject, address: ReplyAddress,
                                  fail: (DBusError) -> Void, expect: (String) -> Bool) {
        let arguments = call.arguments
        switch call.member {
        case "Get":
            guard expect("ss"), let interfaceName = arguments[0].stringValue, let name = arguments[1].stringValue else { return }
            guard let interface = object.interface(named: interfaceName) else { return fail(.unknownInterface("no interface \(quoted(interfaceName))")) }
            guard let property = interface.property(named: name) else { return fail(.unknownProperty("no property \(quoted(name)) in \(quoted(interfaceName))")) }
            replyLater(to: address, sender: call.sender, expectedSignature: "v") { [.variant(try await ConnectionCore.read(property))] }
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
                return fail(.unknownInterface("no interface \(quoted(interfaceName))"))
            }
            replyLater(to: address, sender: call.sender, expectedSignature: "a{sv}") {
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
            guard let interface = object.interface(named: interfaceName) else { return fail(.unknownInterface("no interface \(quoted(interfaceName))")) }
            guard let property = interface.property(named: name) else { return fail(.unknownProperty("no property \(quoted(name)) in \(quoted(interfaceName))")) }
            guard property.access == .readwrite, let setter = property.set else { return fail(.propertyReadOnly("property \(quoted(name)) is read-only")) }
            guard value.signature == property.signature else {
                return fail(.invalidArgs("property \(quoted(name)) has type '\(property.signature)', got '\(value.signature)'"))
            }
            let path = call.path
            replyLater(to: address, sender: call.sender, expectedSignature: "") {
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

/// `text` cut to at most `limit` UTF-8 bytes (on a character boundary), marked with "…" when cut:
/// for caller input quoted in an error text.
func quoted(_ text: String, limit: Int = 255) -> String {
    guard text.utf8.count > limit else { return text }
    var cut = ""
    for character in text {
        guard cut.utf8.count + character.utf8.count <= limit else { break }
        cut.append(character)
    }
    return cut + "…"
}

extension DBusValue {
    /// The value with every descriptor in it closed and replaced by -1: for values whose receiver
    /// takes no descriptor there (each read of an `h` made a duplicate someone must close).
    func closingDescriptors() -> DBusValue {
        switch self {
        case .unixFD(let descriptor):
            if descriptor >= 0 { _ = close(descriptor) }
            return .unixFD(-1)
        case .array(let signature, let elements):
            guard signature.utf8.contains(UInt8(ascii: "h")) || signature.utf8.contains(UInt8(ascii: "v")) else { return self }
            return .array(elementSignature: signature, elements.map { $0.closingDescriptors() })
        case .dictionary(let key, let value, let entries):
            guard (key + value).utf8.contains(UInt8(ascii: "h")) || value.utf8.contains(UInt8(ascii: "v")) else { return self }
            var closed: [DBusValue: DBusValue] = [:]
            for (entryKey, entryValue) in entries { closed[entryKey.closingDescriptors()] = entryValue.closingDescriptors() }
            return .dictionary(keySignature: key, valueSignature: value, closed)
        case .structure(let fields): return .structure(fields.map { $0.closingDescriptors() })
        case .variant(let inner): return .variant(inner.closingDescriptors())
        default: return self
        }
    }
}

/// Where the reply to an incoming call goes.
struct ReplyAddress: Sendable {
    let sender: String?
    let serial: UInt32
    let expectsReply: Bool

    func reply(kind: DBusMessage.Kind) -> DBusMessage {
        var reply = DBusMessage(kind: kind)
        reply.flags = DBusMessage.noReplyExpectedFlag
        reply.replySerial = serial
        reply.destination = sender
        return reply
    }
}

/// This machine's D-Bus machine id (for `Peer.GetMachineId`), read once.
enum MachineID {
    static let value: String? = {
        for path in ["/etc/machine-id", "/var/lib/dbus/machine-id"] {
            guard let file = fopen(path, "r") else { continue }
            defer { fclose(file) }
            var buffer = [CChar](repeating: 0, count: 64)
            guard fgets(&buffer, Int32(buffer.count), file) != nil else { continue }
            let text = String(cString: buffer).trimmingWhitespace
            if text.utf8.count == 32, text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) { return text }
        }
        return nil
    }()
}

private extension String {
    var trimmingWhitespace: String {
        String(decoding: utf8.filter { $0 != 0x0A && $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }, as: UTF8.self)
    }
}
