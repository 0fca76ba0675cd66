// SPDX-License-Identifier: LGPL-2.1-or-later
/// RSSI bookkeeping for one advertiser (§ issue 4). HCI reports 127 when the controller does
/// not know the RSSI (the lab's emulated controllers always do): such samples are counted but
/// never move the statistics, and an advertiser with only unknown samples is not "far".
public struct RSSIStatistics: Hashable, Sendable {
    public static let unknown: Int = 127
    /// Weight of a new sample in the exponential moving average.
    public static let smoothingFactor = 0.25

    public private(set) var last: Int?
    public private(set) var minimum: Int?
    public private(set) var maximum: Int?
    public private(set) var smoothed: Double?
    public private(set) var knownSamples = 0
    public private(set) var unknownSamples = 0

    public init() {}

    public static func isKnown(_ rssi: Int) -> Bool { rssi != unknown && rssi >= -127 && rssi <= 20 }

    public mutating func record(_ rssi: Int) {
        guard Self.isKnown(rssi) else { unknownSamples += 1; return }
        knownSamples += 1
        last = rssi
        minimum = min(minimum ?? rssi, rssi)
        maximum = max(maximum ?? rssi, rssi)
        smoothed = smoothed.map { $0 + Self.smoothingFactor * (Double(rssi) - $0) } ?? Double(rssi)
    }
}

/// Near/far decision with hysteresis, so a device at the edge does not make suggestions flicker.
public struct ProximityDetector: Hashable, Sendable {
    public enum Range: Hashable, Sendable {
        case near
        case far
        /// Only unknown RSSI so far: treated as near enough to suggest (never hides a member).
        case unknown
    }

    public let enterNear: Double
    public let leaveNear: Double
    public private(set) var range: Range = .unknown

    /// Near when the smoothed RSSI reaches `enterNear`; far again only below `leaveNear`.
    public init(enterNear: Double = -70, leaveNear: Double = -80) {
        self.enterNear = max(enterNear, leaveNear)
        self.leaveNear = min(enterNear, leaveNear)
    }

    public var allowsSuggestion: Bool { range != .far }

    @discardableResult
    public mutating func update(_ statistics: RSSIStatistics) -> Range {
        guard let smoothed = statistics.smoothed else { return range }
        switch range {
        case .near: if smoothed < leaveNear { range = .far }
        case .far: if smoothed >= enterNear { range = .near }
        case .unknown: range = smoothed >= enterNear ? .near : (smoothed < leaveNear ? .far : .near)
        }
        return range
    }
}

/// Whether a ring member is close enough for its suggestion to be shown (issue 13), from its
/// adverts' RSSI and their timing, with hysteresis in dB and in time so a device at the edge or a
/// missed advert does not make suggestions flicker:
/// - it becomes near when its smoothed RSSI reaches `enterNear` (an advert with unknown RSSI, HCI's
///   127, counts as near: a controller that cannot measure never hides a member);
/// - it stays near until the smoothed RSSI has stayed below `leaveNear` for `leaveAfter` seconds
///   (walking away), or no advert was heard for `silenceTimeout` seconds (the advert stopped).
/// Times are seconds on a monotonic clock; pure, so recorded traces test it.
public struct PresenceTracker: Sendable {
    public struct Thresholds: Hashable, Sendable {
        public var enterNear: Double
        public var leaveNear: Double
        public var leaveAfter: Double
        public var silenceTimeout: Double

        /// `enterNear` -70 dBm; far again 10 dB lower for 3 s, or after 10 s without an advert.
        public init(enterNear: Double = -70, hysteresisDB: Double = 10, leaveAfter: Double = 3, silenceTimeout: Double = 10) {
            self.enterNear = enterNear
            self.leaveNear = enterNear - max(0, hysteresisDB)
            self.leaveAfter = max(0, leaveAfter)
            self.silenceTimeout = max(0, silenceTimeout)
        }
    }

    private struct Member {
        var statistics = RSSIStatistics()
        var near = false
        var lastHeard: Double
        /// Since when the smoothed RSSI has been below `leaveNear` while near.
        var weakSince: Double?
    }

    public let thresholds: Thresholds
    private var members: [DeviceID: Member] = [:]

    public init(_ thresholds: Thresholds = Thresholds()) { self.thresholds = thresholds }

    /// Records an advert of `member` heard at `time` with `rssi` (nil or 127: unknown); returns
    /// whether the member is near now.
    @discardableResult
    public mutating func heard(_ member: DeviceID, rssi: Int?, at time: Double) -> Bool {
        var entry = members[member] ?? Member(lastHeard: time)
        entry.lastHeard = time
        if let rssi, RSSIStatistics.isKnown(rssi) {
            entry.statistics.record(rssi)
        } else if entry.statistics.knownSamples == 0 {
            // Only unknown RSSI so far: near enough to suggest.
            entry.near = true
        }
        if let smoothed = entry.statistics.smoothed {
            if !entry.near {
                if smoothed >= thresholds.enterNear { entry.near = true }
                entry.weakSince = nil
            } else if smoothed < thresholds.leaveNear {
                let since = entry.weakSince ?? time
                entry.weakSince = since
                if time - since >= thresholds.leaveAfter {
                    entry.near = false
                    entry.weakSince = nil
                }
            } else {
                entry.weakSince = nil
            }
        }
        members[member] = entry
        return entry.near
    }

    public func isNear(_ member: DeviceID) -> Bool { members[member]?.near ?? false }

    /// The members tracked now (heard since their last silence).
    public var trackedMembers: [DeviceID] { Array(members.keys) }

    /// No member is tracked (nothing heard since the last silence).
    public var isEmpty: Bool { members.isEmpty }

    /// The members that were near and have not been heard for `silenceTimeout` seconds at `time`:
    /// they are far now (and forgotten, so their next advert starts afresh).
    public mutating func silenced(at time: Double) -> [DeviceID] {
        let gone = members.filter { time - $0.value.lastHeard >= thresholds.silenceTimeout }.map(\.key)
        for member in gone { members[member] = nil }
        return gone.sorted { $0.description < $1.description }
    }

    /// Forgets a member (it left the ring).
    public mutating func forget(_ member: DeviceID) { members[member] = nil }
}
