// SPDX-License-Identifier: GPL-2.0-or-later
@testable import BatonDBus
import Testing

/// `CallAdmission` without a socket or a task: refusal at the per-caller limit, handlers that wait
/// their turn, the outbox holding them back, and the end of a burst.
@Suite("BatonDBus core: CallAdmission")
struct CallAdmissionTests {
    static let configuration = DBusConnectionConfiguration(runningPerSender: 2, runningAtMost: 3, maxHandlersPerSender: 4, burstHandlers: 3)

    @Test func aCallerAtTheLimitIsRefusedAndAFinishedCallFreesASlot() {
        var admission = CallAdmission<String>(configuration: Self.configuration)
        for number in 1...4 {
            #expect(admission.refusal(for: ":1.5") == nil)
            _ = admission.enqueue("a\(number)", from: ":1.5", outboxFull: false)
        }
        #expect(admission.refusal(for: ":1.5") == 4)
        // Another caller is not affected.
        #expect(admission.refusal(for: ":1.6") == nil)
        _ = admission.finished(for: ":1.5", outboxFull: false)
        #expect(admission.refusal(for: ":1.5") == nil)
        #expect(admission.served(by: ":1.5") == 3)
    }

    @Test func aCallersFurtherCallsWaitInOrderForItsRunningOnes() {
        var admission = CallAdmission<String>(configuration: Self.configuration)
        #expect(admission.enqueue("a1", from: ":1.5", outboxFull: false) == "a1")
        #expect(admission.enqueue("a2", from: ":1.5", outboxFull: false) == "a2")
        #expect(admission.enqueue("a3", from: ":1.5", outboxFull: false) == nil)
        #expect(admission.enqueue("a4", from: ":1.5", outboxFull: false) == nil)
        #expect(admission.running == 2 && admission.hasWaiting)
        let first = admission.finished(for: ":1.5", outboxFull: false)
        #expect(first.start.map(\.handler) == ["a3"])
        let second = admission.finished(for: ":1.5", outboxFull: false)
        #expect(second.start.map(\.handler) == ["a4"])
        #expect(!admission.hasWaiting && admission.running == 2)
        #expect(admission.finished(for: ":1.5", outboxFull: false).start.isEmpty)
        #expect(admission.finished(for: ":1.5", outboxFull: false).start.isEmpty)
        #expect(admission.running == 0 && admission.served(by: ":1.5") == 0)
    }

    @Test func noMoreThanRunningAtMostRunInAllAndAFreedSlotGoesToAnotherCaller() {
        var admission = CallAdmission<String>(configuration: Self.configuration)
        #expect(admission.enqueue("a1", from: ":1.5", outboxFull: false) != nil)
        #expect(admission.enqueue("a2", from: ":1.5", outboxFull: false) != nil)
        #expect(admission.enqueue("b1", from: ":1.6", outboxFull: false) != nil)
        #expect(admission.enqueue("b2", from: ":1.6", outboxFull: false) == nil)
        #expect(admission.running == 3)
        // a1 ends: :1.5 has nothing waiting, so the slot goes to :1.6's waiting call.
        let finished = admission.finished(for: ":1.5", outboxFull: false)
        #expect(finished.start.map(\.handler) == ["b2"])
        #expect(finished.start.map(\.sender) == [":1.6"])
    }

    @Test func noHandlerStartsWhileTheOutboxIsFull() {
        var admission = CallAdmission<String>(configuration: Self.configuration)
        #expect(admission.enqueue("a1", from: ":1.5", outboxFull: true) == nil)
        #expect(admission.enqueue("b1", from: ":1.6", outboxFull: true) == nil)
        #expect(admission.running == 0)
        #expect(admission.startWaiting(outboxFull: true).isEmpty)
        let started = admission.startWaiting(outboxFull: false)
        #expect(started.map(\.handler) == ["a1", "b1"])
        #expect(admission.running == 2 && !admission.hasWaiting)
        // A handler that ends while the outbox is full starts nobody's next call.
        _ = admission.enqueue("a2", from: ":1.5", outboxFull: true)
        #expect(admission.finished(for: ":1.5", outboxFull: true).start.isEmpty)
        #expect(admission.startWaiting(outboxFull: false).map(\.handler) == ["a2"])
    }

    @Test func theEndOfABurstAsksForMemoryBackOnce() {
        var admission = CallAdmission<String>(configuration: Self.configuration)
        _ = admission.enqueue("a1", from: ":1.5", outboxFull: false)
        _ = admission.enqueue("b1", from: ":1.6", outboxFull: false)
        #expect(!admission.finished(for: ":1.5", outboxFull: false).releaseMemory)
        #expect(!admission.finished(for: ":1.6", outboxFull: false).releaseMemory)
        // Three at once is a burst: released when the last of them ends.
        for sender in [":1.5", ":1.6", ":1.7"] { _ = admission.enqueue("x", from: sender, outboxFull: false) }
        #expect(!admission.finished(for: ":1.5", outboxFull: false).releaseMemory)
        #expect(!admission.finished(for: ":1.6", outboxFull: false).releaseMemory)
        #expect(admission.finished(for: ":1.7", outboxFull: false).releaseMemory)
        _ = admission.enqueue("y", from: ":1.5", outboxFull: false)
        #expect(!admission.finished(for: ":1.5", outboxFull: false).releaseMemory)
    }

    /// The calls a caller has being served are derived from its running and waiting ones: over random
    /// admissions and ends (the outbox full or not) they stay what a plain count of admitted minus
    /// finished says, no caller ever runs more than its share nor the whole more than the limit, and
    /// no waiting call is left behind while a slot is free.
    @Test func servedCallsStayTheAdmittedOnesLessTheFinishedOverRandomOrders() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var admission = CallAdmission<Int>(configuration: Self.configuration)
            let senders = [":1.5", ":1.6", ":1.7"]
            var admitted: [String: Int] = [:]
            var running: [String: Int] = [:]
            var next = 0
            for _ in 0..<60 {
                let sender = senders.randomElement(using: &generator)!
                let outboxFull = Int.random(in: 0..<4, using: &generator) == 0
                if Bool.random(using: &generator) || running[sender, default: 0] == 0 {
                    guard admission.refusal(for: sender) == nil else {
                        #expect(admitted[sender, default: 0] == Self.configuration.maxHandlersPerSender)
                        continue
                    }
                    next += 1
                    admitted[sender, default: 0] += 1
                    if admission.enqueue(next, from: sender, outboxFull: outboxFull) != nil { running[sender, default: 0] += 1 }
                } else {
                    admitted[sender, default: 0] -= 1
                    running[sender, default: 0] -= 1
                    for started in admission.finished(for: sender, outboxFull: outboxFull).start { running[started.sender, default: 0] += 1 }
                }
                if !outboxFull, admission.hasWaiting {
                    for started in admission.startWaiting(outboxFull: false).map(\.sender) { running[started, default: 0] += 1 }
                }
                for name in senders {
                    #expect(admission.served(by: name) == admitted[name, default: 0])
                    #expect(running[name, default: 0] <= Self.configuration.runningPerSender)
                }
                #expect(admission.running == running.values.reduce(0, +))
                #expect(admission.running <= Self.configuration.runningAtMost)
                // Nothing waits while it could run (the outbox has room): every waiting caller is at its share, or the whole at the limit.
                if !outboxFull, admission.hasWaiting, admission.running < Self.configuration.runningAtMost {
                    for name in senders where admitted[name, default: 0] > running[name, default: 0] {
                        #expect(running[name, default: 0] == Self.configuration.runningPerSender)
                    }
                }
            }
        }
    }

    /// Callers that keep their queues full take freed slots in turn: a caller whose name sorts last
    /// (":1.9" after ":1.10" and ":1.11") is not starved by the others' endless calls.
    @Test func freedSlotsGoToWaitingCallersInTurnWhateverTheirNames() {
        var admission = CallAdmission<String>(configuration: Self.configuration)
        let senders = [":1.10", ":1.11", ":1.9"]
        var runningOrder: [(handler: String, sender: String)] = []
        var number = 0
        func topUp() {
            for sender in senders {
                while admission.refusal(for: sender) == nil {
                    number += 1
                    if let now = admission.enqueue("\(sender)#\(number)", from: sender, outboxFull: false) {
                        runningOrder.append((now, sender))
                    }
                }
            }
        }
        topUp()
        #expect(admission.running == Self.configuration.runningAtMost)
        var startsBySender: [String: Int] = [:]
        for _ in 0..<60 {
            // The oldest running handler ends; its caller and the others call again at once.
            let ended = runningOrder.removeFirst()
            for started in admission.finished(for: ended.sender, outboxFull: false).start {
                runningOrder.append(started)
                startsBySender[started.sender, default: 0] += 1
            }
            topUp()
        }
        // 60 freed slots over three callers always waiting: each gets its share, within one turn.
        for sender in senders {
            #expect(startsBySender[sender, default: 0] >= 60 / senders.count - 1, "\(sender): \(startsBySender)")
        }
    }

    /// Over random orders of calls and ends with every caller's queue kept non-empty, no caller waits
    /// more than one round of the others' starts (the slot of each freed handler goes round).
    @Test func noWaitingCallerIsPassedOverMoreThanOnceByEachOtherCaller() {
        var generator = SystemRandomNumberGenerator()
        let configuration = DBusConnectionConfiguration(runningPerSender: 1, runningAtMost: 2, maxHandlersPerSender: 3, burstHandlers: 2)
        for _ in 0..<100 {
            var admission = CallAdmission<Int>(configuration: configuration)
            let senders = (0..<5).map { ":1.\(Int.random(in: 1...40, using: &generator))\($0)" }
            var running: [String] = []
            var passedOver: [String: Int] = [:]
            var number = 0
            func topUp() {
                for sender in senders.shuffled(using: &generator) {
                    while admission.refusal(for: sender) == nil {
                        number += 1
                        if admission.enqueue(number, from: sender, outboxFull: false) != nil { running.append(sender) }
                    }
                }
            }
            topUp()
            for _ in 0..<80 {
                let ended = running.remove(at: Int.random(in: 0..<running.count, using: &generator))
                for started in admission.finished(for: ended, outboxFull: false).start {
                    running.append(started.sender)
                    passedOver[started.sender] = 0
                    // Every other caller that still waits (and is not running its one call) was passed over once more.
                    for other in senders where other != started.sender && !running.contains(other) {
                        passedOver[other, default: 0] += 1
                        #expect(passedOver[other, default: 0] <= senders.count - 1, "\(other) passed over: \(passedOver)")
                    }
                }
                topUp()
            }
        }
    }

    @Test func closingHandsBackEveryHandlerThatNeverStarted() {
        var admission = CallAdmission<String>(configuration: Self.configuration)
        for number in 1...3 { _ = admission.enqueue("a\(number)", from: ":1.5", outboxFull: false) }
        _ = admission.enqueue("b1", from: ":1.6", outboxFull: true)
        #expect(admission.close() == ["a3", "b1"])
        #expect(!admission.hasWaiting)
        #expect(admission.close().isEmpty)
    }
}
