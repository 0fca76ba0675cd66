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
