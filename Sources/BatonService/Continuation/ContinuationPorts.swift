// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

/// What the continuation needs from the activities: which types some local user can continue,
/// and delivery to a user's handler. `Handlers` conforms; no requirement has a default, so
/// a conformer that misspells one does not compile (fakes: Tests/Support/BatonServiceFakes).
public protocol ContinuationActivities: Sendable {
    func allHandledTypes() async -> Set<String>
    /// Whether some handler of `uid` for `type` (registered, or an installed app) accepts this
    /// activity version; checked before any handler is asked (versionUnsupported otherwise).
    func acceptsVersion(_ version: Int64, type: String, uid: UInt32) async -> Bool
    /// The version declarations of the handlers that decide for `type`: `uid`'s, or for nil (a
    /// prefetch, before anyone accepted) every local user's. nil: one of them accepts every version.
    /// The fetch names them (FetchActivityOfVersions), so the source refuses a mismatch before it sends.
    func versionDeclarations(type: String, uid: UInt32?) async -> [ActivityVersions]?
    /// The declaration of the handler that accepted WillContinue, as registered now: it gets the
    /// activity, so it decides, whatever registered since (nil: every version).
    func versionDeclarations(of ticket: HandlerTicket) async -> [ActivityVersions]?
    /// Finds (or has the session agent launch) `uid`'s handler and asks WillContinue, before the fetch.
    func willContinue(type: String, from device: String, uid: UInt32) async -> HandlerAnswer
    /// Tells the handler that accepted that the continuation ended without an activity.
    func failedToContinue(_ ticket: HandlerTicket, _ failure: ContinuationFailure, detail: String) async
    /// Delivery to the handler that accepted, with the activity's document (pulled and checked)
    /// beside the userInfo.
    func deliver(activity: ActivityRecord, document: PulledDocument?, from device: String, to ticket: HandlerTicket) async -> DeliveryOutcome
    /// Where `uid`'s incoming documents are kept; nil: documents are not pulled (delivered without).
    func documentInbox(uid: UInt32) async -> DocumentInbox?
    /// This machine's edit sessions (§6.6): a continued document's session is claimed before the
    /// handler gets it. nil: no sessions (the document is delivered without a claim).
    func editSessionsForContinue() async -> EditSessions?
    /// Whether a document with this digest was received whole here (any user's inbox): a replayed
    /// claim's grant is imported only then.
    func holdsReceivedDocument(digest: [UInt8]) async -> Bool
    /// Journalled claims abandoned because their owner left the ring (§6.6): their users are told
    /// (an `edit-session-lost` error record and a sentence in the log).
    func editSessionsLost(_ lost: [LostEditSession]) async
}

/// A journalled edit-session claim abandoned because the member it was sent to left the ring.
public struct LostEditSession: Sendable, Hashable {
    /// The user the claim was journalled for (nil: journalled before claims were per user).
    public var uid: UInt32?
    public var documentID: String
    public var member: DeviceID
    /// The member's name as this machine last knew it (its short id when it never did).
    public var memberName: String

    public init(uid: UInt32?, documentID: String, member: DeviceID, memberName: String) {
        self.uid = uid
        self.documentID = documentID
        self.member = member
        self.memberName = memberName
    }

    /// Words for the person whose session it was; the names (the app's and the member's own
    /// words) are quoted, cut and stripped of control characters.
    public func sentence(documentName: String) -> String {
        "The edit session of \(echoed(documentName, limit: 64)) was being taken over from \(echoed(memberName, limit: 40)) "
            + "(\(member.shortForm)), "
            + "which left the ring; it is lost. Open the document on this machine to edit it here."
    }
}

/// A handler that answered WillContinue with yes before the fetch: it gets the activity
/// (`deliver(activity:document:from:to:)`) or FailedToContinue with the category (`failedToContinue`).
public struct HandlerTicket: Sendable, Hashable {
    public let uid: UInt32
    public let type: String
    /// The registered handler object; nil for activities without handler objects (fakes).
    package let handler: HandlerKey?

    public init(uid: UInt32, type: String) {
        self.init(uid: uid, type: type, handler: nil)
    }

    package init(uid: UInt32, type: String, handler: HandlerKey?) {
        self.uid = uid
        self.type = type
        self.handler = handler
    }
}

/// The handler's answer before any fetch.
public enum HandlerAnswer: Sendable, Hashable {
    case accepted(HandlerTicket)
    /// Nobody takes it: declined, no handler, no agent to launch one, launch or handler failure.
    case refused(DeliveryOutcome)
}

/// Where suggestions are shown (Suggestion1 objects on D-Bus; a fake in tests). No defaults.
public protocol SuggestionBoard: Sendable {
    func offer(_ shown: ShownSuggestion) async throws
    func withdraw(_ shown: ShownSuggestion) async
    /// The activity of a shown suggestion was fetched ahead: its title is known now.
    func titleKnown(_ shown: ShownSuggestion, title: String) async
    /// How far a continuation's document pull is, for the caller of Continue only (rate-limited by
    /// the continuation).
    func documentProgress(_ progress: DocumentProgress, to caller: String) async
}

/// Bytes of a continuation's document received so far (Manager1.DocumentProgress).
public struct DocumentProgress: Sendable, Equatable {
    public var activityType: String
    public var received: UInt64
    public var total: UInt64
}

/// A suggestion of the book (`BatonCore.Suggestion`) as the board shows it: an
/// org.baton.Suggestion1 object under /org/baton (so InterfacesAdded announces it), listed by
/// `baton suggestions`, taken with Suggestion1.Continue or `baton continue PATH`.
public struct ShownSuggestion: Sendable, Equatable {
    public var suggestion: BatonCore.Suggestion
    public var memberName: String
    /// Proximity allowed it when it was offered (RSSI, §4.4).
    public var near: Bool

    public var path: String { Self.path(of: suggestion.number) }
    public var member: DeviceID { suggestion.member }
    public var activityType: String { suggestion.activityType }
    public var revision: UInt32 { suggestion.revision }
    public var hasWebpageURL: Bool { suggestion.hasWebpageURL }
    /// "browser" when no local handler has the type and only the webpage URL can serve; "" otherwise.
    public var fallback: String { suggestion.opensInBrowser ? "browser" : "" }

    static func path(of number: Int) -> String { "\(BatonObjectPath.suggestionPrefix)/\(number)" }

    /// The suggestion number a path names; nil for any other path.
    static func number(inPath path: String) -> Int? {
        let prefix = BatonObjectPath.suggestionPrefix + "/"
        guard path.hasPrefix(prefix), let number = Int(path.dropFirst(prefix.count)), path == Self.path(of: number) else { return nil }
        return number
    }
}
