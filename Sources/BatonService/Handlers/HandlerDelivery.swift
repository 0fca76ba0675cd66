// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

/// Delivery to handlers: WillContinue before the fetch, then Continue or FailedToContinue with a
/// continuation failure category. An app that is not running is started by the user's session
/// agent (Agent1.Launch on the agent's connection to this bus); batond starts no programs itself.
extension Handlers: ContinuationActivities {
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
                await recordError(.noAgent)
                return .refused(.noAgent)
            }
            switch await calls.launch(type: type, agent: agent) {
            case .success(let started):
                logger.log("batond: the session agent launched \(started ?? entry.id) for an incoming activity")
            case .failure(let error):
                logger.log("batond: the session agent cannot launch \(entry.id): \(error)")
                await recordError(.launchFailed)
                return .refused(.launchFailed)
            }
            handler = await waitForHandler(type: type, uid: uid)
            guard handler != nil else {
                logger.log("batond: \(entry.id) registered no handler in time")
                await recordError(.launchFailed)
                return .refused(.launchFailed)
            }
        }
        guard let handler else { return .refused(.noHandler) }
        let target = handler.key
        switch await calls.willContinue(type: type, from: device, handler: target) {
        case .success(let answer):
            return answer ? .accepted(HandlerTicket(uid: uid, type: type, handler: target)) : .refused(.declined)
        case .failure:
            await recordError(.handlerFailed)
            return .refused(.failed)
        }
    }

    /// Continue to the handler that accepted; when that call fails the handler hears
    /// FailedToContinue "cancelled" (it refused what it had accepted) or "timedOut".
    public func deliver(activity record: ActivityRecord, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        await deliver(activity: record, document: nil, from: device, to: ticket)
    }

    /// As above, with the activity's document handed to the handler beside the userInfo (a read-only
    /// descriptor, Bus/ActivityApps.swift).
    public func deliver(activity record: ActivityRecord, document: PulledDocument?, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        guard let target = ticket.handler else { return .noHandler }
        switch await calls.continueActivity(record, document: document, from: device, handler: target) {
        case .delivered:
            logger.log("batond: activity delivered to \(target.connection)")
            return .delivered
        case .documentUnopenable:
            await recordError(.handlerFailed)
            await failedToContinue(ticket, .interrupted, detail: "the document cannot be opened")
            return .failed
        case .failed(let error):
            await recordError(.handlerFailed)
            await failedToContinue(ticket, error == .timedOut ? .timedOut : .cancelled, detail: "the handler did not accept the activity")
            return .failed
        }
    }

    /// FailedToContinue(type, category, "category: detail") to the handler that accepted.
    public func failedToContinue(_ ticket: HandlerTicket, _ failure: ContinuationFailure, detail: String) async {
        guard let target = ticket.handler else { return }
        await calls.failedToContinue(type: ticket.type, failure, message: failure.message(detail), handler: target)
    }

    // MARK: Documents and edit sessions (the continuation's, kept by `Documents`)

    public func documentInbox(uid: UInt32) async -> DocumentInbox? { await documents.documentInbox(uid: uid) }
    public func editSessionsForContinue() async -> EditSessions? { await documents.editSessions }
    public func holdsReceivedDocument(digest: [UInt8]) async -> Bool { await documents.holdsReceivedDocument(digest: digest) }

    /// Claims abandoned because their owner left the ring (§6.6): one `edit-session-lost` record
    /// each, and the words for the person in the log, naming the document by its id (as error
    /// records and the log never carry an activity's title).
    public func editSessionsLost(_ lost: [LostEditSession]) async {
        for claim in lost {
            logger.log("batond: " + claim.sentence(documentName: claim.documentID))
            await recordError(.editSessionLost)
        }
    }
}
