// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import Testing

/// `Backpressure` without a socket: when reading pauses and resumes, which calls are held, and
/// that replies to our own calls keep their own budget (issue 24, item 4).
@Suite("BatonDBus core: Backpressure")
struct BackpressureTests {
    static let configuration = DBusConnectionConfiguration(outboxHighWater: 100, outboxLowWater: 10, heldCallBytes: 50)

    static func message(_ kind: DBusMessage.Kind, bytes: Int, serial: UInt32 = 0) -> DBusMessage {
        var message = DBusMessage(kind: kind)
        message.bytes = [UInt8](repeating: 0, count: bytes)
        message.serial = serial
        return message
    }

    typealias Load = Backpressure.Load

    @Test func belowTheHighMarkEverythingIsReadAndDispatched() {
        var pressure = Backpressure(configuration: Self.configuration)
        let load = Load(outboxBytes: 99, awaitingReplies: false)
        #expect(!pressure.mustPauseReading(load))
        #expect(pressure.updateReading(load) == .none)
        guard case .receive(let holding) = pressure.nextStep(load) else { Issue.record("not receiving"); return }
        #expect(!holding)
        #expect(!pressure.holds(Self.message(.methodCall, bytes: 10), holdingCalls: holding))
    }

    @Test func aFullOutboxPausesReadingUntilTheLowMark() {
        var pressure = Backpressure(configuration: Self.configuration)
        let full = Load(outboxBytes: 100, awaitingReplies: false)
        #expect(pressure.mustPauseReading(full))
        guard case .waitForOutbox = pressure.nextStep(full) else { Issue.record("dispatched over the high mark"); return }
        #expect(pressure.dispatchPending)
        #expect(pressure.updateReading(full) == .pause)
        #expect(pressure.updateReading(full) == .none)
        // The bus took some, not down to the low mark: what was received waits, reading stays paused.
        let between = Load(outboxBytes: 50, awaitingReplies: false)
        #expect(pressure.afterWrite(outboxBytes: 50) == .none)
        pressure.beginDispatch()
        #expect(pressure.updateReading(between) == .none)
        #expect(pressure.readingPaused)
        // At the low mark it resumes.
        let drained = Load(outboxBytes: 10, awaitingReplies: false)
        #expect(pressure.afterWrite(outboxBytes: 10) == .updateReading)
        #expect(pressure.updateReading(drained) == .resume)
        #expect(!pressure.readingPaused)
    }

    @Test func pendingDispatchIsFinishedBeforeReadingResumes() {
        var pressure = Backpressure(configuration: Self.configuration)
        _ = pressure.nextStep(Load(outboxBytes: 200, awaitingReplies: false))
        #expect(pressure.updateReading(Load(outboxBytes: 200, awaitingReplies: false)) == .pause)
        // Drained, but messages received are still undispatched: dispatch them first.
        #expect(pressure.afterWrite(outboxBytes: 0) == .dispatchThenUpdateReading)
        #expect(pressure.updateReading(Load(outboxBytes: 0, awaitingReplies: false)) == .none)
        pressure.beginDispatch()
        #expect(pressure.updateReading(Load(outboxBytes: 0, awaitingReplies: false)) == .resume)
    }

    @Test func repliesToOurCallsAreReadWhileCallsAreHeldUpToTheirBudget() {
        var pressure = Backpressure(configuration: Self.configuration)
        let full = Load(outboxBytes: 500, awaitingReplies: true)
        #expect(!pressure.mustPauseReading(full))
        guard case .receive(let holding) = pressure.nextStep(full) else { Issue.record("stopped reading for replies"); return }
        #expect(holding)
        // Calls are held, replies and signals go on.
        #expect(pressure.holds(Self.message(.methodCall, bytes: 30), holdingCalls: holding))
        #expect(!pressure.holds(Self.message(.methodReturn, bytes: 30), holdingCalls: holding))
        #expect(!pressure.holds(Self.message(.error, bytes: 30), holdingCalls: holding))
        #expect(!pressure.holds(Self.message(.signal, bytes: 30), holdingCalls: holding))
        pressure.hold(Self.message(.methodCall, bytes: 30, serial: 1))
        #expect(!pressure.mustPauseReading(full))
        pressure.hold(Self.message(.methodCall, bytes: 30, serial: 2))
        // Over the held budget: reading pauses even for replies.
        #expect(pressure.heldBytes == 60)
        #expect(pressure.mustPauseReading(full))
        guard case .waitForOutbox = pressure.nextStep(full) else { Issue.record("read past the held budget"); return }
        #expect(pressure.updateReading(full) == .pause)
        // Without a call of ours waiting, the same outbox pauses reading at once.
        let other = Backpressure(configuration: Self.configuration)
        #expect(other.mustPauseReading(Load(outboxBytes: 500, awaitingReplies: false)))
    }

    @Test func heldCallsGoFirstAndInOrderOnceTheOutboxIsBelowTheHighMark() {
        var pressure = Backpressure(configuration: Self.configuration)
        let full = Load(outboxBytes: 100, awaitingReplies: true)
        for serial in 1...3 { pressure.hold(Self.message(.methodCall, bytes: 5, serial: UInt32(serial))) }
        #expect(pressure.hasHeld)
        // Still full: nothing held is dispatched, and calls received now queue behind them.
        guard case .receive(true) = pressure.nextStep(full) else { Issue.record("dispatched a held call while full"); return }
        let below = Load(outboxBytes: 99, awaitingReplies: false)
        var order: [UInt32] = []
        while case .dispatch(let message) = pressure.nextStep(below) { order.append(message.serial) }
        #expect(order == [1, 2, 3])
        #expect(pressure.heldBytes == 0 && !pressure.hasHeld)
        guard case .receive(false) = pressure.nextStep(below) else { Issue.record("not receiving after the held calls"); return }
    }

    @Test func whileCallsAreHeldNewCallsQueueBehindThemEvenBelowTheHighMark() {
        var pressure = Backpressure(configuration: Self.configuration)
        pressure.hold(Self.message(.methodCall, bytes: 5, serial: 1))
        // Not full, but a held call exists: `nextStep` dispatches it first...
        guard case .dispatch(let first) = pressure.nextStep(Load(outboxBytes: 0, awaitingReplies: false)), first.serial == 1 else {
            Issue.record("held call not first")
            return
        }
        // ...and a call read while others are held would be held too.
        pressure.hold(Self.message(.methodCall, bytes: 5, serial: 2))
        #expect(pressure.afterWrite(outboxBytes: 0) == .dispatchThenUpdateReading)
    }

    @Test func closingResumesAPausedSourceAndDropsHeldCalls() {
        var pressure = Backpressure(configuration: Self.configuration)
        pressure.hold(Self.message(.methodCall, bytes: 20))
        _ = pressure.nextStep(Load(outboxBytes: 100, awaitingReplies: false))
        #expect(pressure.updateReading(Load(outboxBytes: 100, awaitingReplies: false)) == .pause)
        #expect(pressure.close() == .resume)
        #expect(!pressure.readingPaused && !pressure.hasHeld && pressure.heldBytes == 0)
        #expect(pressure.close() == .none)
    }
}
