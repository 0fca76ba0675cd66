// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonService
import BatonStore
import Synchronization

/// A fake of one local user's handlers as ActivityService keeps them: registrations in order (the
/// newest decides for WillContinue), an installed app the session agent launches when none runs,
/// registrations that happen while WillContinue is being answered, and another user's declaration
/// that only a prefetch (no user yet) takes into account. Receiver side only: it is never a source,
/// and it pulls no documents.
public final class FakeVersionedHandlers: TransferActivities, ContinuationActivities {
    public struct Delivery: Equatable, Sendable {
        public var path: String
        public var version: Int64

        public init(path: String, version: Int64) {
            self.path = path
            self.version = version
        }
    }
    public struct Failure: Equatable, Sendable {
        public var path: String
        public var category: ContinuationFailure

        public init(path: String, category: ContinuationFailure) {
            self.path = path
            self.category = category
        }
    }
    private struct State {
        var registered: [(path: String, versions: ActivityVersions?)] = []
        var duringWillContinue: (path: String, versions: ActivityVersions?)?
        var installed: (declared: ActivityVersions?, path: String, registering: ActivityVersions?)?
        var otherUsers: ActivityVersions?
        var deliveries: [Delivery] = []
        var failures: [Failure] = []
    }
    private let state = Mutex(State())
    public static let connection = ":fake.1"
    /// The one activity type the handlers take.
    public let handledType: String

    public init(handledType: String) { self.handledType = handledType }

    public func register(_ path: String, _ versions: ActivityVersions?) { state.withLock { $0.registered.append((path, versions)) } }
    public func registerDuringWillContinue(_ path: String, _ versions: ActivityVersions?) {
        state.withLock { $0.duringWillContinue = (path, versions) }
    }
    public func installApp(declaring declared: ActivityVersions?, launches path: String, registering: ActivityVersions?) {
        state.withLock { $0.installed = (declared, path, registering) }
    }
    public func setOtherUsersVersions(_ versions: ActivityVersions?) { state.withLock { $0.otherUsers = versions } }
    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }
    public var failures: [Failure] { state.withLock { $0.failures } }

    /// The newest registration's declaration, else the installed app's (ActivityService's rule).
    private func deciding(_ state: State) -> ActivityVersions?? {
        if let newest = state.registered.last { return .some(newest.versions) }
        if let installed = state.installed { return .some(installed.declared) }
        return .none
    }

    public func allHandledTypes() async -> Set<String> { [handledType] }
    public func acceptsVersion(_ version: Int64, type: String, uid: UInt32) async -> Bool {
        state.withLock { state in deciding(state).map { $0?.accepts(version) ?? true } ?? true }
    }
    public func versionDeclarations(type: String, uid: UInt32?) async -> [ActivityVersions]? {
        state.withLock { state in
            var deciding: [ActivityVersions?] = self.deciding(state).map { [$0] } ?? []
            if uid == nil, let other = state.otherUsers { deciding.append(other) }
            guard !deciding.isEmpty, !deciding.contains(where: { $0 == nil }) else { return nil }
            return deciding.compactMap { $0 }
        }
    }
    public func versionDeclarations(of ticket: HandlerTicket) async -> [ActivityVersions]? {
        state.withLock { state in
            guard let path = ticket.handler?.path, let handler = state.registered.first(where: { $0.path == path }) else { return nil }
            return handler.versions.map { [$0] }
        }
    }
    public func willContinue(type: String, from device: String, uid: UInt32) async -> HandlerAnswer {
        let path: String? = state.withLock { state in
            if state.registered.isEmpty, let installed = state.installed { state.registered.append((installed.path, installed.registering)) }
            let accepting = state.registered.last?.path
            // Another app registers while this one answers WillContinue.
            if let later = state.duringWillContinue { state.registered.append(later) }
            return accepting
        }
        guard let path else { return .refused(.noHandler) }
        return .accepted(HandlerTicket(uid: uid, type: type, handler: HandlerKey(connection: Self.connection, path: path)))
    }
    /// Delivery goes to the handler that accepted WillContinue, never by user alone.
    public func deliver(activity: ActivityRecord, from device: String, to uid: UInt32) async -> DeliveryOutcome { .noHandler }
    public func deliver(activity: ActivityRecord, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        await deliver(activity: activity, document: nil, from: device, to: ticket)
    }
    public func deliver(activity: ActivityRecord, document: PulledDocument?, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome {
        state.withLock { $0.deliveries.append(Delivery(path: ticket.handler?.path ?? "", version: activity.version)) }
        return .delivered
    }
    public func failedToContinue(_ ticket: HandlerTicket, _ failure: ContinuationFailure, detail: String) async {
        state.withLock { $0.failures.append(Failure(path: ticket.handler?.path ?? "", category: failure)) }
    }
    public func documentInbox(uid: UInt32) async -> DocumentInbox? { nil }
    public func editSessionsForContinue() async -> EditSessions? { nil }
    public func holdsReceivedDocument(digest: [UInt8]) async -> Bool { false }
    /// The fake never journals claims: nothing is lost.
    public func editSessionsLost(_ lost: [LostEditSession]) async {}

    public func recordForTransfer(uid: UInt32) async -> (ActivityID, ActivityRecord)? { nil }
    public func notifyWasContinued(_ id: ActivityID, device: String) async {}
    public func documentForTransfer(uid: UInt32) async -> AttachedDocument? { nil }
    public func currentActivityForTransfer(uid: UInt32) async -> ActivityID? { nil }
    public func editSessionsForTransfer() async -> EditSessions? { nil }
    public func savedDocument(documentID: String, uid: UInt32) async -> [UInt8]? { nil }
}
