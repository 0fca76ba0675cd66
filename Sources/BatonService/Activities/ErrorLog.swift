// SPDX-License-Identifier: GPL-2.0-or-later
/// Categories the daemon records. Closed and short: records never carry payloads, titles, keys or paths.
public enum ErrorCategory: String, Sendable, Codable, Hashable, CaseIterable {
    case sourceTimeout = "source-timeout"
    case sourceGone = "source-gone"
    case radioUnavailable = "radio-unavailable"
    case advertRejected = "advert-rejected"
    case transferFailed = "transfer-failed"
    case handlerFailed = "handler-failed"
    case launchFailed = "launch-failed"
    /// An installed app could have taken a continued activity, but its user runs no session agent.
    case noAgent = "no-agent"
    case statusWriteFailed = "status-write-failed"
    /// A journalled edit-session claim was abandoned: the machine it was sent to left the ring (§6.6).
    case editSessionLost = "edit-session-lost"

    /// The same category (FailureCategory is this enum's name on the activities' side).
    public init(_ failure: FailureCategory) { self = failure }
}

public struct ErrorRecord: Sendable, Hashable, Codable {
    /// Unix seconds of the latest occurrence.
    public var time: Int64
    public var category: ErrorCategory
    public var count: UInt32
}

/// The last `capacity` error records. A repeat of the newest record's category bumps its count
/// instead of adding a record, so a flapping failure cannot push everything else out.
public struct ErrorLog: Sendable, Hashable {
    public static let capacity = 32
    public private(set) var records: [ErrorRecord] = []

    public init() {}

    public mutating func record(_ category: ErrorCategory, at time: Int64) {
        if let last = records.indices.last, records[last].category == category {
            records[last].count = records[last].count == UInt32.max ? UInt32.max : records[last].count + 1
            records[last].time = time
            return
        }
        records.append(ErrorRecord(time: time, category: category, count: 1))
        if records.count > Self.capacity { records.removeFirst(records.count - Self.capacity) }
    }
}
