// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonStore

/// What the activities tell the objects that show them (Activity1 objects on D-Bus, Bus/ActivityBus).
/// Called in order from the activities' actor; no requirement has a default.
public protocol ActivityObjects: Sendable {
    /// A new activity: its object appears (before its creator hears the path).
    func activityAdded(_ id: ActivityID) async throws
    func activityRemoved(_ id: ActivityID)
    /// `fields` of `activity` changed: the public ones are announced to all, the others to its owner only.
    func activityChanged(_ activity: Activity, fields: Set<ActivityField>)
    /// The edit session of the activity's document moved; `owner` is "this", a device id in hex or "".
    func editSessionChanged(_ activity: Activity, owner: String)
}

/// How the activities get a user's current activity onto the air (the radio, RadioService;
/// without one, BecomeCurrent ends in failed(radio-unavailable)). Called in the registry's order,
/// one call at a time. No requirement has a default.
public protocol ActivityPublisher: Sendable {
    /// Advertises `record` as `uid`'s current activity; the receipt names the device-wide advert
    /// revision (§4.2) it is served under and what the radio does now.
    func publish(_ record: ActivityRecord, uid: UInt32) async throws(RadioError) -> PublishReceipt
    /// `uid` has no current activity any more.
    func withdraw(uid: UInt32) async
}

/// A publisher's answer to a publication, in its one reply.
public struct PublishReceipt: Sendable, Hashable {
    /// The advert revision (§4.2) the record is served under: FetchActivity takes it, Activity1.Revision shows it.
    public var advertRevision: UInt32
    /// What the radio does now, for the status (nil: the publisher cannot say).
    public var radio: RadioSummary?

    public init(advertRevision: UInt32, radio: RadioSummary?) {
        self.advertRevision = advertRevision
        self.radio = radio
    }
}

/// The calls to an activity's source application (ActivitySource1 on D-Bus, Bus/ActivityApps),
/// typed here and coded at the bus edge. No requirement has a default.
public protocol SourceCalls: Sendable {
    /// ActivitySource1.WillSave: the changes the source answered with, or why it did not.
    func willSave(_ activity: Activity, source: String) async -> WillSaveAnswer
    /// ActivitySource1.WasContinued; false when the source could not be told.
    func wasContinued(_ activity: Activity, source: String, device: String) async -> Bool
}

/// A source's answer to WillSave.
public enum WillSaveAnswer: Sendable {
    case changes(ActivityChanges)
    case failed(FailureCategory)
}

/// Why an activity call was refused. The activities throw these; the bus maps them to
/// org.baton.Error.* names (Bus/ActivityBus.swift).
public enum ActivityFailure: Error, Sendable {
    case registry(RegistryError)
    case service(ServiceFailure)
    case alreadyExists(String)
    case snapshot(SnapshotError)
    case editSession(EditSessionFailure)
    /// A generic failure (org.freedesktop.DBus.Error.Failed at the bus).
    case failed(String)

    static func notPermitted(_ message: String) -> ActivityFailure { .service(.notPermitted(message)) }
    static func invalidArguments(_ message: String) -> ActivityFailure { .service(.invalidArguments(message)) }
}

/// Runs a registry call, its refusal as an ActivityFailure.
func checked<T>(_ body: () throws(RegistryError) -> T) throws(ActivityFailure) -> T {
    do { return try body() } catch { throw .registry(error) }
}
