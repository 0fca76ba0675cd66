// SPDX-License-Identifier: LGPL-2.1-or-later
import Dispatch
import Glibc

// Incoming method calls: admission (CallAdmission), routing (IncomingCallRouter), replies and
// the handlers' tasks.

extension ConnectionCore {
    // MARK: - Incoming method calls

    /// Runs on the queue during dispatch, for every method call: Peer is answered by every
    /// connection; a caller with `maxHandlersPerSender` calls being served is refused at once,
    /// before its arguments are read or a task is made (one connection's flood of pipelined calls
    /// cannot make the service hold thousands of them, nor the descriptors they bring); the rest is
    /// what `IncomingCallRouter` decides.
    func handleObjectMessage(_ message: DBusMessage) {
        let call = DBusMethodCall(sender: message.sender ?? "", path: message.path ?? "/", interface: message.interface,
                                  member: message.member ?? "", arguments: [])
        let address = ReplyAddress(sender: message.sender, serial: message.serial, expectsReply: message.expectsReply)
        if call.interface == peerInterface {
            return reply(to: address, with: IncomingCallRouter.answerPeer(member: call.member, signature: message.signatureString),
                         expectedSignature: nil)
        }
        if let serving = admission.refusal(for: call.sender) {
            return reply(to: address, with: .failure(DBusError(name: DBusError.limitsExceededName,
                message: "\(serving) calls of this connection are being served; wait for their replies")), expectedSignature: nil)
        }
        let router = IncomingCallRouter(registry: registry, incomingDescriptors: incomingDescriptors) { [weak self] path, interface, name, value in
            guard let self else { return }
            self.queue.async { try? self.emitPropertiesChangedOnQueue(path: path, interface: interface, changed: [name: value], invalidated: []) }
        }
        switch router.route(call, message: message) {
        case .reply(let outcome):
            reply(to: address, with: outcome, expectedSignature: nil)
        case .replyReleasingMemory(let error):
            reply(to: address, with: .failure(error), expectedSignature: nil)
            configuration.memoryReleasable?()
        case .run(let expectedSignature, let discard, let work):
            replyLater(to: address, sender: call.sender, expectedSignature: expectedSignature, discard: discard, work)
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
            guard !isClosed, let reply = replies.takeCall(endedBy: message.replySerial, from: message.sender,
                                                           isError: message.type == OversizedMessage.error)
            else { return }
            let who = message.sender.map { " from \(quoted($0))" } ?? ""
            reply.finish(.failure(DBusError(name: DBusError.replyTooLargeName,
                message: "the reply\(who) was \(message.totalBytes) bytes, over this connection's limit of \(configuration.replyLimit) bytes for replies; it was dropped unread")))
            return
        }
        guard !isClosed, message.expectsReply, let sender = message.sender, DBusNames.isValidBusName(sender.utf8, asReceived: true) else { return }
        var error = ReplyAddress(sender: sender, serial: message.serial, expectsReply: true).reply(kind: .error)
        error.errorName = registry.tooLargeErrorName(path: message.path, interface: message.interface, member: message.member)
        _ = try? send(&error, body: [.string("message of \(message.totalBytes) bytes is over the limit of \(configuration.incomingLimit) bytes")])
    }

    /// A message dropped for its header (the connection goes on): a call whose caller waits gets
    /// an error saying so; a malformed reply from whom one of our calls went to ends that call.
    func refuseMalformed(_ attempt: HeaderAttempt) {
        guard !isClosed else { return }
        if attempt.type == DBusMessage.Kind.methodReturn.rawValue || attempt.type == DBusMessage.Kind.error.rawValue,
           let reply = replies.takeCall(endedBy: attempt.replySerial, from: attempt.sender, isError: false) {
            reply.finish(.failure(DBusError(name: DBusError.invalidArgsName,
                                            message: "the reply could not be read: malformed message header (\(attempt.reason))")))
            return
        }
        guard attempt.expectsReply, let sender = attempt.sender, DBusNames.isValidBusName(sender.utf8, asReceived: true) else { return }
        var error = ReplyAddress(sender: sender, serial: attempt.serial, expectsReply: true).reply(kind: .error)
        error.errorName = DBusError.invalidArgsName
        _ = try? send(&error, body: [.string("malformed message header: \(attempt.reason)")])
    }

    /// Runs `work` as a task and replies when it finishes, as `CallAdmission` lets it start (now, or
    /// after its caller's earlier calls). `discard` runs instead of `work` if the connection closes first.
    private func replyLater(to address: ReplyAddress, sender: String, expectedSignature: String?,
                            discard: @escaping @Sendable () -> Void = {},
                            _ work: @escaping @Sendable () async throws -> [DBusValue]) {
        let handler = PendingHandler(address: address, expectedSignature: expectedSignature, work: work, discard: discard)
        if let now = admission.enqueue(handler, from: sender, outboxFull: outboxIsFull) { start(now, for: sender) }
    }

    /// Starts waiting handlers of every caller with a free slot (after the outbox drained).
    func startWaitingHandlers() {
        for next in admission.startWaiting(outboxFull: outboxIsFull) { start(next.handler, for: next.sender) }
    }

    private func start(_ handler: PendingHandler, for sender: String) {
        Task {
            let outcome: CallOutcome
            // What the handler keeps alive until its reply is written (DBusCallContext.keepUntilReplied).
            let resources = ReplyResources()
            do {
                outcome = .success(try await DBusCallContext.$sender.withValue(sender) {
                    try await DBusCallContext.$replyResources.withValue(resources) { try await handler.work() }
                })
            } catch let error as DBusError {
                outcome = .failure(error)
            } catch {
                outcome = .failure(.failed(String(describing: error)))
            }
            self.queue.async {
                self.reply(to: handler.address, with: outcome, expectedSignature: handler.expectedSignature)
                withExtendedLifetime(resources) {}
                // A waiting call starts only while the bus keeps up with the replies: those of calls
                // started regardless made the outbox (not the handlers) hold 1 GiB in an attack.
                let finished = self.admission.finished(for: sender, outboxFull: self.outboxIsFull)
                for next in finished.start { self.start(next.handler, for: next.sender) }
                if finished.releaseMemory { self.configuration.memoryReleasable?() }
            }
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
            DescriptorNumbers.close(descriptor)
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
