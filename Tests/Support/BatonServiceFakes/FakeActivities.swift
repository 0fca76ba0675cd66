// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonService
import BatonStore
import Synchronization

/// The activities side as the transfer and the continuation see it, in memory: a fake. It holds
/// one current activity, records what was delivered and which activities were continued elsewhere.
/// Its handlers have no objects: every WillContinue is accepted, delivery goes by user.
public final class FakeActivities: TransferActivities, ContinuationActivities {
    private struct State {
        var current: (ActivityID, ActivityRecord)?
        var delivered: [(record: ActivityRecord, from: String, uid: UInt32)] = []
        var continued: [(ActivityID, String)] = []
        var transferDelay: Duration?
        var versions: ActivityVersions?
        var document: AttachedDocument?
        var failures: [ContinuationFailure] = []
        var transferRequests = 0
        var inbox: DocumentInbox?
        var deliveredDocuments: [PulledDocument?] = []
        var editSessions: EditSessions?
        var savedDigest: [UInt8]?
        var saves = 0
        var saveDelay: Duration?
        var lostEditSessions: [LostEditSession] = []
    }
    private let state = Mutex(State())
    /// Runs when the source side is asked for its activity, as an app's WillSave would (nil: nothing).
    private let onTransfer = Mutex<(@Sendable () async -> Void)?>(nil)
    public let handled: Set<String>
    public let outcome: DeliveryOutcome

    public init(handled: Set<String> = [], outcome: DeliveryOutcome = .delivered) {
        self.handled = handled
        self.outcome = outcome
    }

    public func setCurrent(_ id: ActivityID, _ record: ActivityRecord) { state.withLock { $0.current = (id, record) } }
    /// Makes the source's side slow to hand its activity out, as a hanging WillSave would.
    public func setTransferDelay(_ delay: Duration?) { state.withLock { $0.transferDelay = delay } }
    /// Runs `hook` each time the source side is asked for its activity (a WillSave that changes it).
    public func setOnTransfer(_ hook: (@Sendable () async -> Void)?) { onTransfer.withLock { $0 = hook } }
    /// The versions the (fake) handlers accept; nil: every version.
    public func setAcceptedVersions(_ versions: ActivityVersions?) { state.withLock { $0.versions = versions } }
    public func acceptsVersion(_ version: Int64, type: String, uid: UInt32) async -> Bool {
        state.withLock { $0.versions?.accepts(version) ?? true }
    }
    public func versionDeclarations(type: String, uid: UInt32?) async -> [ActivityVersions]? {
        state.withLock { $0.versions.map { [$0] } }
    }
    /// No handler objects: the user's declaration.
    public func versionDeclarations(of ticket: HandlerTicket) async -> [ActivityVersions]? {
        await versionDeclarations(type: ticket.type, uid: ticket.uid)
    }
    public var delivered: [(record: ActivityRecord, from: String, uid: UInt32)] { state.withLock { $0.delivered } }
    public var continuedDevices: [String] { state.withLock { $0.continued.map(\.1) } }

    /// How often the source side was asked for its activity (a fetch reached it).
    public var transferRequests: Int { state.withLock { $0.transferRequests } }
    public func recordForTransfer(uid: UInt32) async -> (ActivityID, ActivityRecord)? {
        state.withLock { $0.transferRequests += 1 }
        if let delay = state.withLock({ $0.transferDelay }) { try? await Task.sleep(for: delay) }
        if let hook = onTransfer.withLock({ $0 }) { await hook() }
        return state.withLock { state in state.current.flatMap { $0.0.uid == uid ? $0 : nil } }
    }
    public func notifyWasContinued(_ id: ActivityID, device: String) async { state.withLock { $0.continued.append((id, device)) } }
    public func setDocument(_ document: AttachedDocument?) { state.withLock { $0.document = document } }
    public func documentForTransfer(uid: UInt32) async -> AttachedDocument? {
        state.withLock { state in state.current?.0.uid == uid ? state.document : nil }
    }
    public func currentActivityForTransfer(uid: UInt32) async -> ActivityID? {
        state.withLock { state in state.current.flatMap { $0.0.uid == uid ? $0.0 : nil } }
    }
    /// Edit sessions (§6.6) and what the (fake) app's save commits: nil, it does not save in time.
    public func setEditSessions(_ sessions: EditSessions?, savedDigest: [UInt8]?) {
        state.withLock { $0.editSessions = sessions; $0.savedDigest = savedDigest }
    }
    public var saves: Int { state.withLock { $0.saves } }
    /// Claims the continuation abandoned because their owner left the ring (§6.6), as it told them.
    public var lostEditSessions: [LostEditSession] { state.withLock { $0.lostEditSessions } }
    public func editSessionsLost(_ lost: [LostEditSession]) async { state.withLock { $0.lostEditSessions += lost } }
    public func editSessionsForTransfer() async -> EditSessions? { state.withLock { $0.editSessions } }
    public func editSessionsForContinue() async -> EditSessions? { state.withLock { $0.editSessions } }
    public func holdsReceivedDocument(digest: [UInt8]) async -> Bool { state.withLock { $0.inbox }?.received(digest: digest) != nil }
    public func savedDocument(documentID: String, uid: UInt32) async -> [UInt8]? {
        let delay = state.withLock { state in
            state.saves += 1
            return state.saveDelay
        }
        if let delay { try? await Task.sleep(for: delay) }
        return state.withLock { $0.savedDigest }
    }
    /// Makes the app slow to save for a claim (counted in `saves` as it starts).
    public func setSaveDelay(_ delay: Duration?) { state.withLock { $0.saveDelay = delay } }
    public func allHandledTypes() async -> Set<String> { handled }
    /// Always accepted; the ticket names no handler object.
    public func willContinue(type: String, from device: String, uid: UInt32) async -> HandlerAnswer {
        .accepted(HandlerTicket(uid: uid, type: type))
    }
    public func deliver(activity: ActivityRecord, from device: String, to uid: UInt32) async -> DeliveryOutcome {
        state.withLock { $0.delivered.append((activity, device, uid)) }
        return outcome
    }
    public func deliver(activity: ActivityRecord, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        await deliver(activity: activity, from: device, to: ticket.uid)
    }
    /// The categories the (fake) accepting handler heard in FailedToContinue, in order.
    public var failures: [ContinuationFailure] { state.withLock { $0.failures } }
    public func failedToContinue(_ ticket: HandlerTicket, _ failure: ContinuationFailure, detail: String) async {
        state.withLock { $0.failures.append(failure) }
    }
    /// Where pulled documents go; nil (the default): none are pulled.
    public func setInbox(_ inbox: DocumentInbox?) { state.withLock { $0.inbox = inbox } }
    public func documentInbox(uid: UInt32) async -> DocumentInbox? { state.withLock { $0.inbox } }
    /// The document of each delivery, in order (nil: delivered without one).
    public var deliveredDocuments: [PulledDocument?] { state.withLock { $0.deliveredDocuments } }
    public func deliver(activity: ActivityRecord, document: PulledDocument?, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        state.withLock { $0.deliveredDocuments.append(document) }
        return await deliver(activity: activity, from: device, to: ticket.uid)
    }
}
