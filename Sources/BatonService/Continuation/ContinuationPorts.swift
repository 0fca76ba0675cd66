import BatonAPI
import BatonCore
import BatonStore

/// What the continuation needs from the activities: which types some local user can continue,
/// and delivery to a user's handler. `ActivityService` conforms.
public protocol ContinuationActivities: Sendable {
    func allHandledTypes() async -> Set<String>
    func deliver(activity: ActivityRecord, from device: String, to uid: UInt32) async -> DeliveryOutcome
    /// Whether some handler of `uid` for `type` (registered, or an installed app) accepts this
    /// activity version; checked before any handler is asked (versionUnsupported otherwise).
    func acceptsVersion(_ version: Int64, type: String, uid: UInt32) async -> Bool
    /// Delivery with the activity's document, pulled and checked, beside the userInfo.
    func deliver(activity: ActivityRecord, document: PulledDocument?, from device: String, to uid: UInt32) async -> DeliveryOutcome
    /// Where `uid`'s incoming documents are kept; nil: documents are not pulled (delivered without).
    func documentInbox(uid: UInt32) async -> DocumentInbox?
}

extension ContinuationActivities {
    /// Until handlers declare versions (RegisterHandler option Versions, X-Baton-ActivityVersions),
    /// every version is accepted.
    public func acceptsVersion(_ version: Int64, type: String, uid: UInt32) async -> Bool { true }

    /// Conformers without documents (test fakes) deliver the activity alone.
    public func deliver(activity: ActivityRecord, document: PulledDocument?, from device: String, to uid: UInt32) async -> DeliveryOutcome {
        await deliver(activity: activity, from: device, to: uid)
    }

    public func documentInbox(uid: UInt32) async -> DocumentInbox? { nil }
}

/// Where suggestions are shown (Suggestion1 objects on D-Bus; a fake in tests).
public protocol SuggestionBoard: Sendable {
    func offer(_ shown: ShownSuggestion) async throws
    func withdraw(_ shown: ShownSuggestion) async
    /// How far a continuation's document pull is, for the caller of Continue only (rate-limited by
    /// the continuation).
    func documentProgress(_ progress: DocumentProgress, to caller: String) async
}

extension SuggestionBoard {
    public func documentProgress(_ progress: DocumentProgress, to caller: String) async {}
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
