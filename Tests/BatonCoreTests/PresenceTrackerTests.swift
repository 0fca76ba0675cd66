// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

/// Issue 13: a suggestion is shown only while its member is near; recorded RSSI traces (time in
/// seconds, RSSI in dBm, 127 unknown) replayed through the tracker.
@Suite struct PresenceTrackerTests {
    let member = DeviceID(identityKey: [UInt8](repeating: 7, count: 32))
    let other = DeviceID(identityKey: [UInt8](repeating: 8, count: 32))

    /// Replays a trace; returns the near/far answer after each sample.
    func replay(_ trace: [(Double, Int)], _ tracker: inout PresenceTracker) -> [Bool] {
        trace.map { tracker.heard(member, rssi: $0.1, at: $0.0) }
    }

    @Test func aMemberAtTheDeskIsNearFromItsFirstAdvert() {
        var tracker = PresenceTracker()
        #expect(replay([(0, -55), (1, -58), (2, -52)], &tracker) == [true, true, true])
    }

    @Test func aMemberInTheNextRoomIsNeverNear() {
        var tracker = PresenceTracker()
        #expect(replay([(0, -85), (1, -88), (2, -83), (3, -86), (4, -84)], &tracker) == [false, false, false, false, false])
        #expect(!tracker.isNear(member))
    }

    @Test func unknownRSSIIsNear() {
        var tracker = PresenceTracker()
        #expect(replay([(0, 127), (1, 127)], &tracker) == [true, true])
        let third = tracker.heard(member, rssi: nil, at: 2)
        #expect(third)
    }

    /// Walking up to the desk: near once the smoothed value reaches the threshold, not on one strong outlier.
    @Test func approachingBecomesNearWhenTheSmoothedValueCrossesTheThreshold() {
        var tracker = PresenceTracker()
        let answers = replay([(0, -90), (0.5, -60), (1, -88), (1.5, -75), (2, -68), (2.5, -62), (3, -60), (3.5, -58)], &tracker)
        // One -60 among -90s does not make it near (smoothed -82.5).
        #expect(answers[1] == false)
        #expect(answers.last == true)
        let firstNear = answers.firstIndex(of: true) ?? 0
        #expect(answers[firstNear...].allSatisfy { $0 }, "\(answers)")
    }

    /// At the edge: dips below the leave threshold shorter than leaveAfter keep it near (time
    /// hysteresis), values between the thresholds keep it near (dB hysteresis).
    @Test func aMemberAtTheEdgeDoesNotFlicker() {
        var tracker = PresenceTracker()
        let trace: [(Double, Int)] = [(0, -65), (1, -74), (2, -77), (3, -72), (4, -95), (5, -95), (5.5, -60), (6, -62), (7, -76), (8, -78)]
        #expect(replay(trace, &tracker).allSatisfy { $0 })
    }

    /// Walking away: far only once the smoothed RSSI stayed under leaveNear for leaveAfter seconds.
    @Test func walkingAwayBecomesFarAfterTheHoldTime() {
        var tracker = PresenceTracker(.init(enterNear: -70, hysteresisDB: 10, leaveAfter: 3, silenceTimeout: 10))
        let trace: [(Double, Int)] = [(0, -60), (1, -65), (2, -90), (3, -95), (4, -96), (5, -97), (6, -97), (7, -98), (8, -98), (9, -98)]
        let answers = replay(trace, &tracker)
        // Smoothed: -60, -61.25, -68.4, -75.1, -80.3 (t=4, first under -80), ... far at t>=7.
        #expect(answers[..<7].allSatisfy { $0 }, "\(answers)")
        #expect(answers[7...].allSatisfy { !$0 }, "\(answers)")
        // Coming back needs the enter threshold again, not just the leave one.
        let halfway = tracker.heard(member, rssi: -75, at: 10)
        #expect(!halfway)
        let back = replay([(11, -55), (12, -50), (13, -50), (14, -50), (15, -50)], &tracker)
        #expect(back.last == true)
    }

    @Test func aMemberNotHeardForTheSilenceTimeoutIsSilenced() {
        var tracker = PresenceTracker(.init(silenceTimeout: 10))
        tracker.heard(member, rssi: -50, at: 0)
        tracker.heard(other, rssi: -50, at: 5)
        let early = tracker.silenced(at: 9.9)
        #expect(early.isEmpty)
        let first = tracker.silenced(at: 10)
        #expect(first == [member])
        #expect(!tracker.isNear(member) && tracker.isNear(other))
        let second = tracker.silenced(at: 15)
        #expect(second == [other])
        #expect(tracker.isEmpty)
        // Heard again: starts afresh (near at once when strong).
        let again = tracker.heard(member, rssi: -50, at: 20)
        #expect(again)
    }

    @Test func thresholdsKeepLeaveBelowEnter() {
        let thresholds = PresenceTracker.Thresholds(enterNear: -60, hysteresisDB: -5, leaveAfter: -1, silenceTimeout: -1)
        #expect(thresholds.leaveNear == -60 && thresholds.leaveAfter == 0 && thresholds.silenceTimeout == 0)
        #expect(PresenceTracker.Thresholds().leaveNear == -80)
    }
}
