/// When a daemon that must not wake periodically sleeps until: the next epoch boundary (the advert
/// reseals and the matcher window moves, §4.2) or an earlier deadline of its own (a pairing advert
/// or a suggestion running out), whichever comes first. Real events (bus calls, radio reports)
/// wake it on their own; nothing else should.
public enum WakeSchedule {
    /// The first epoch boundary strictly after `unixSeconds`.
    public static func nextEpochBoundary(after unixSeconds: Int64) -> Int64 {
        let length = Protocol.epochSeconds
        guard unixSeconds >= 0 else { return 0 }
        let (epochs, overflow) = (unixSeconds / length).addingReportingOverflow(1)
        guard !overflow else { return Int64.max }
        let (boundary, overflowBoundary) = epochs.multipliedReportingOverflow(by: length)
        return overflowBoundary ? Int64.max : boundary
    }

    /// The Unix second to wake at: the earliest of the next epoch boundary and the deadlines
    /// still ahead of `nowSeconds`. A deadline already due means now.
    public static func nextWake(nowSeconds: Int64, deadlines: [Int64] = []) -> Int64 {
        var wake = nextEpochBoundary(after: nowSeconds)
        for deadline in deadlines { wake = min(wake, max(deadline, nowSeconds)) }
        return wake
    }

    /// Seconds to sleep from `nowSeconds` until `nextWake`, never negative.
    public static func secondsUntilWake(nowSeconds: Int64, deadlines: [Int64] = []) -> Int64 {
        max(0, nextWake(nowSeconds: nowSeconds, deadlines: deadlines) - nowSeconds)
    }
}
