// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import Glibc
import BatonCore
import BatonDBus

/// Delivery to handlers: WillContinue before the fetch, then Continue or FailedToContinue with a
/// continuation failure category. An app that is not running is started by the user's session
/// agent (Agent1.Launch on the agent's connection to this bus); batond starts no programs itself.
extension ActivityService: ContinuationActivities {
    /// Every activity type some local user can continue: registered handlers and installed apps.
    public func allHandledTypes() -> Set<String> {
        var types = Set(handlers.values.flatMap(\.types))
        for entry in desktopEntries.entries() { types.formUnion(entry.activityTypes) }
        return types
    }

    /// WillContinue then Continue in one go (Ring1.Continue's tests, the prefetched path).
    public func deliver(activity record: ActivityRecord, from device: String, to uid: UInt32) async -> DeliveryOutcome {
        switch await willContinue(type: record.activityType, from: device, uid: uid) {
        case .refused(let outcome): outcome
        case .accepted(let ticket): await deliver(activity: record, from: device, to: ticket)
        }
    }

    /// Finds `uid`'s newest handler for `type`, or has the user's session agent launch the
    /// installed app and waits for it to register; then asks WillContinue.
    public func willContinue(type: String, from device: String, uid: UInt32) async -> HandlerAnswer {
        var handler = newestHandler(for: type, uid: uid)
        if handler == nil {
            guard let entry = desktopEntries.entries().first(where: { $0.activityTypes.contains(type) }) else { return .refused(.noHandler) }
            guard let agent = agents[uid] else {
                logger.log("batond: no session agent runs for user \(uid): cannot start \(entry.id)")
                recordError(.noAgent)
                return .refused(.noAgent)
            }
            do {
                let reply = try await connection.call(destination: agent.connection, path: agent.path, interface: BatonInterface.agent,
                                                      method: "Launch", arguments: [.string(type)], timeout: configuration.handlerCallTimeout)
                logger.log("batond: the session agent launched \(reply.first?.stringValue ?? entry.id) for an incoming activity")
            } catch {
                logger.log("batond: the session agent cannot launch \(entry.id): \(error)")
                recordError(.launchFailed)
                return .refused(.launchFailed)
            }
            handler = await waitForHandler(type: type, uid: uid)
            guard handler != nil else {
                logger.log("batond: \(entry.id) registered no handler in time")
                recordError(.launchFailed)
                return .refused(.launchFailed)
            }
        }
        guard let handler else { return .refused(.noHandler) }
        let target = handler.key
        do {
            let reply = try await connection.call(destination: target.connection, path: target.path, interface: BatonInterface.handler,
                                                  method: "WillContinue", arguments: [.string(type), .string(device)],
                                                  timeout: configuration.handlerCallTimeout)
            guard reply.count == 1, case .boolean(let answer) = reply[0] else {
                recordError(.handlerFailed)
                return .refused(.failed)
            }
            return answer ? .accepted(HandlerTicket(uid: uid, type: type, handler: target)) : .refused(.declined)
        } catch {
            recordError(.handlerFailed)
            return .refused(.failed)
        }
    }

    /// Continue to the handler that accepted; when that call fails the handler hears
    /// FailedToContinue "cancelled" (it refused what it had accepted) or "timedOut".
    public func deliver(activity record: ActivityRecord, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        await deliver(activity: record, document: nil, from: device, to: ticket)
    }

    /// As above, with the activity's document handed to the handler beside the userInfo (a read-only
    /// descriptor, ActivityService+Documents).
    public func deliver(activity record: ActivityRecord, document: PulledDocument?, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        guard let target = ticket.handler else { return .noHandler }
        var info: [String: DBusValue] = ["Version": .int64(record.version), "Device": .string(device)]
        if let url = record.webpageURL { info["WebpageURL"] = .string(url) }
        var descriptor: Int32?
        if let document {
            guard let (value, opened) = Self.handlerDocument(document) else {
                recordError(.handlerFailed)
                await failedToContinue(ticket, .interrupted, detail: "the document cannot be opened")
                return .failed
            }
            info["Document"] = value
            descriptor = opened
        }
        // The message carries its own duplicate: ours closes once the call is done.
        defer { if let descriptor { close(descriptor) } }
        do {
            _ = try await connection.call(destination: target.connection, path: target.path, interface: BatonInterface.handler,
                                          method: "Continue",
                                          arguments: [.string(record.activityType), .string(record.title),
                                                      PropertyValueCoding.encodeUserInfo(record.userInfo), .propertyDictionary(info)],
                                          timeout: configuration.handlerCallTimeout)
            logger.log("batond: activity delivered to \(target.connection)")
            return .delivered
        } catch {
            recordError(.handlerFailed)
            let timedOut = (error as? DBusError)?.name == DBusError.noReplyName
            await failedToContinue(ticket, timedOut ? .timedOut : .cancelled, detail: "the handler did not accept the activity")
            return .failed
        }
    }

    /// FailedToContinue(type, category, "category: detail") to the handler that accepted.
    public func failedToContinue(_ ticket: HandlerTicket, _ failure: ContinuationFailure, detail: String) async {
        guard let target = ticket.handler else { return }
        _ = try? await connection.call(destination: target.connection, path: target.path, interface: BatonInterface.handler,
                                       method: "FailedToContinue",
                                       arguments: [.string(ticket.type), .string(failure.rawValue), .string(failure.message(detail))],
                                       timeout: configuration.handlerCallTimeout)
    }

    // MARK: Session agents

    /// Manager1.RegisterAgent(o): the caller's connection serves org.baton.Agent1 at `path` for its
    /// user; the newest registration wins, and it ends when that connection closes.
    func registerAgent(_ call: DBusMethodCall) async throws {
        let uid = try await callerUID(call.sender)
        guard let path = call.arguments.first?.objectPathValue, path != "/" else {
            throw DBusError.invalidArguments("RegisterAgent takes (o agent), a path other than /")
        }
        guard !recentlyVanished.contains(call.sender) else { throw DBusError.failed("the calling connection has closed") }
        agents[uid] = HandlerKey(connection: call.sender, path: path)
        logger.log("batond: session agent registered by \(call.sender) for user \(uid)")
    }

    /// Whether `uid` has a session agent that can launch apps (GetStatus "SessionAgent").
    func hasAgent(uid: UInt32) -> Bool { agents[uid] != nil }
}
