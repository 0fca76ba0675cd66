// SPDX-License-Identifier: LGPL-2.1-or-later
/// What each local user published and what the ring advert stands for: the one place that says
/// it. The radio carries out its answers (`Air`) through the OnAirPlanner and FetchActivity asks
/// it for the record behind the advert. Pure: no clock, no I/O.
///
/// The advert carries one activity for the whole device: the newest publication. A user who
/// withdraws takes the advert back to presence only when it stood for that user; another user's
/// earlier publication does not come back on its own (it is published again when that user's
/// activity changes or becomes current again).
public struct PublicationBook: Sendable, Hashable {
    /// What the advert must carry after a change.
    public enum Air: Sendable, Hashable {
        /// This activity's content (a new advert revision).
        case activity(AdvertContent)
        /// No activity: presence.
        case presence
        /// What is on the air stays.
        case unchanged
    }

    /// Each user's last published record (kept without a radio: FetchActivity still serves it).
    public private(set) var records: [UInt32: ActivityRecord] = [:]
    /// The user whose activity the advert stands for; nil: presence.
    public private(set) var advertised: UInt32?

    public init() {}

    /// `uid` published `record`: the advert stands for it now.
    public mutating func publish(_ record: ActivityRecord, uid: UInt32) -> Air {
        records[uid] = record
        advertised = uid
        return .activity(AdvertContent(activityType: record.activityType, hasWebpageURL: record.webpageURL != nil))
    }

    /// `uid` has no current activity any more: forgotten, and presence if the advert stood for it.
    public mutating func withdraw(uid: UInt32) -> Air {
        records[uid] = nil
        guard advertised == uid else { return .unchanged }
        advertised = nil
        return .presence
    }

    /// The user and record the advert stands for (what a FetchActivity of it gets); nil: presence.
    public var current: (uid: UInt32, record: ActivityRecord)? {
        guard let uid = advertised, let record = records[uid] else { return nil }
        return (uid, record)
    }

    /// `uid`'s last published record, advertised or not.
    public func record(of uid: UInt32) -> ActivityRecord? { records[uid] }
}
