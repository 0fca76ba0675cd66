import BatonCore
import Testing

@Suite struct WakeScheduleTests {
    let epoch = Protocol.epochSeconds

    @Test func sleepsUntilTheNextEpochBoundaryWhenNothingIsDue() {
        let start = 2_000 * epoch
        #expect(WakeSchedule.nextEpochBoundary(after: start) == start + epoch)
        #expect(WakeSchedule.nextEpochBoundary(after: start + 1) == start + epoch)
        #expect(WakeSchedule.nextEpochBoundary(after: start + epoch - 1) == start + epoch)
        #expect(WakeSchedule.nextWake(nowSeconds: start + 100) == start + epoch)
        #expect(WakeSchedule.secondsUntilWake(nowSeconds: start + 100) == epoch - 100)
    }

    @Test func anEarlierDeadlineWinsAndAPastOneMeansNow() {
        let now = 3_000 * epoch + 10
        #expect(WakeSchedule.nextWake(nowSeconds: now, deadlines: [now + 130, now + 5_000]) == now + 130)
        #expect(WakeSchedule.nextWake(nowSeconds: now, deadlines: [now + 2 * epoch]) == 3_001 * epoch)
        #expect(WakeSchedule.nextWake(nowSeconds: now, deadlines: [now - 30]) == now)
        #expect(WakeSchedule.secondsUntilWake(nowSeconds: now, deadlines: [now - 30]) == 0)
    }

    @Test func extremeClocksDoNotTrap() {
        #expect(WakeSchedule.nextEpochBoundary(after: -5) == 0)
        #expect(WakeSchedule.nextEpochBoundary(after: Int64.max) == Int64.max)
        #expect(WakeSchedule.nextWake(nowSeconds: Int64.max - 1, deadlines: [Int64.min]) == Int64.max - 1)
    }
}
