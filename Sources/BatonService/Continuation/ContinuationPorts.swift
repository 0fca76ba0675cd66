import BatonCore

/// What the continuation needs from the activities: which types some local user can continue,
/// and delivery to a user's handler. `ActivityService` conforms.
public protocol ContinuationActivities: Sendable {
    func allHandledTypes() async -> Set<String>
    func deliver(activity: ActivityRecord, from device: String, to uid: UInt32) async -> DeliveryOutcome
}

/// Where suggestions are shown (Suggestion1 objects on D-Bus; a fake in tests).
public protocol SuggestionBoard: Sendable {
    func offer(_ suggestion: Suggestion) async throws
    func withdraw(_ suggestion: Suggestion) async
}

/// A ring member's activity that this machine can continue: offered on D-Bus as an
/// org.baton.Suggestion1 object under /org/baton (so InterfacesAdded announces it), listed by
/// `baton suggestions`, taken with Suggestion1.Continue or `baton continue PATH`.
public struct Suggestion: Sendable, Equatable {
    public var path: String
    public var member: DeviceID
    public var memberName: String
    public var activityType: String
    public var revision: UInt32
    public var hasWebpageURL: Bool
    /// Proximity allowed it when it was offered (RSSI, §4.4).
    public var near: Bool
}
