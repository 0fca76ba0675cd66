// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

/// §6.6 under SIGKILL: two machines' state directories, a document handed back and forth, each step
/// a run of baton-docsync-torture that is killed at a random moment or whose frame is dropped on the
/// way (a lost request, a lost answer: the connection cut during the save). After every round the
/// document has exactly one owner, both copies are at the same revision, and the owner's revision
/// rose by its own edits plus exactly one save: no claim was applied twice, no edit overwritten.
///
/// The runs block (spawn, sleep, wait), so the rounds run on a thread of their own, never on the
/// cooperative pool that every async test shares (two threads on a two-core machine).
@Suite("Edit sessions survive kill -9 of either side (§6.6)", .serialized)
struct EditSessionTortureTests {
    struct Failure: Error, CustomStringConvertible { var description: String }
    /// Problems found by the rounds, reported by the test once they are over.
    final class Problems: @unchecked Sendable {
        var found: [String] = []
        func check(_ condition: Bool, _ what: @autoclosure () -> String = "check failed") { if !condition { found.append(what()) } }
    }

    struct Run {
        var line: String?
        var killed: Bool
    }

    struct Tally: CustomStringConvertible {
        var rounds = 0, killedClaims = 0, killedAnswers = 0, killedSettles = 0, droppedRequests = 0, droppedAnswers = 0
        var claimsReplayed = 0, answersFromJournal = 0, settledAlreadyApplied = 0, refusedEditsOnNonOwner = 0, attempts = 0
        var description: String {
            "rounds \(rounds), attempts \(attempts); killed: claim \(killedClaims), answer \(killedAnswers), settle \(killedSettles); "
                + "dropped: requests \(droppedRequests), answers \(droppedAnswers); claims replayed with the same id \(claimsReplayed), "
                + "answers from the owner's applied grants \(answersFromJournal), imports already applied \(settledAlreadyApplied); "
                + "edits refused on the non-owner \(refusedEditsOnNonOwner)"
        }
    }

    static func executable() -> String? {
        var candidates: [String] = []
        if let running = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append((running as NSString).deletingLastPathComponent + "/baton-docsync-torture")
        }
        candidates.append(FileManager.default.currentDirectoryPath + "/.build/debug/baton-docsync-torture")
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs one step; with `killAfter` it is SIGKILLed that long after it started (if still running).
    func run(_ executable: String, _ arguments: [String], killAfter microseconds: UInt32? = nil) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = ChildPipe()
        process.standardOutput = output
        try launch(process)
        var killed = false
        if let microseconds {
            usleep(microseconds)
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                killed = true
            }
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        if process.terminationReason == .uncaughtSignal { killed = true }
        // A whole line was written before the kill: the step's effect is complete.
        let text = String(decoding: data, as: UTF8.self)
        let line = text.hasSuffix("\n") ? text.split(separator: "\n").last.map(String.init) : nil
        if !killed && process.terminationStatus != 0 { throw Failure(description: "\(arguments): \(text)") }
        return Run(line: line, killed: killed && line == nil)
    }

    func state(_ executable: String, _ directory: String) throws -> (revision: UInt64, owner: String, pending: Int) {
        guard let line = try run(executable, ["show", directory, "doc"]).line else { throw Failure(description: "show printed nothing") }
        let parts = line.split(separator: " ")
        return (UInt64(parts[1])!, String(parts[2]), Int(parts[3])!)
    }

    @Test func aDocumentHandedBackAndForthUnderRandomKillsIsAppliedExactlyOnceEachTime() async throws {
        let executable = try #require(Self.executable(), "baton-docsync-torture is built with the tests")
        let rounds = Int(ProcessInfo.processInfo.environment["BATON_DOCSYNC_ROUNDS"] ?? "") ?? 40
        let problems = Problems()
        let tally: Tally = try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try self.handOver(executable, rounds: rounds, problems) })
            }.start()
        }
        print("EditSessionTortureTests: \(tally)")
        #expect(problems.found.isEmpty, "\(problems.found.prefix(10))")
        #expect(tally.rounds == rounds)
    }

    func handOver(_ executable: String, rounds: Int, _ problems: Problems) throws -> Tally {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("docsync-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let machines = [(dir: root + "/a", byte: "0a"), (dir: root + "/b", byte: "0b")]
        var generator = SystemRandomNumberGenerator()
        var tally = Tally()
        var requestID: UInt32 = 100
        var edit = 0
        problems.check(try run(executable, ["edit", machines[0].dir, "doc", "0"]).line == "edit 1")
        var ownerIndex = 0
        // Kill moments spread over a step's whole run (a debug build takes a few milliseconds).
        func killMoment() -> UInt32? { Bool.random(using: &generator) ? UInt32.random(in: 0...12_000, using: &generator) : nil }
        for _ in 0..<rounds {
            let owner = machines[ownerIndex], claimer = machines[1 - ownerIndex]
            // The owner edits (newer versions).
            for _ in 0..<Int.random(in: 0...2, using: &generator) {
                edit += 1
                problems.check(try run(executable, ["edit", owner.dir, "doc", "\(edit)"]).line?.hasPrefix("edit ") == true)
            }
            let before = try state(executable, owner.dir)
            let claimerBefore = try state(executable, claimer.dir)
            // The other copy (once it has one: without, an edit there starts a separate document) may not.
            if claimerBefore.revision > 0 {
                edit += 1
                let refused = try run(executable, ["edit", claimer.dir, "doc", "\(edit)"]).line ?? ""
                problems.check(refused.hasPrefix("edit refused session(BatonCore.EditSessionError.notOwner"), "\(refused)")
                tally.refusedEditsOnNonOwner += 1
            }
            var settled = false
            while !settled {
                tally.attempts += 1
                guard tally.attempts < rounds * 100 else { problems.check(false, "no progress"); return tally }
                requestID += 1
                let claim = try run(executable, ["claim", claimer.dir, owner.byte, "doc", "\(requestID)"], killAfter: killMoment())
                guard let claimLine = claim.line else { tally.killedClaims += 1; continue }
                let claimFrame = String(claimLine.split(separator: " ")[1])
                if !claimFrame.hasPrefix(String(format: "010a0000%08x", requestID)) { tally.claimsReplayed += 1 }
                if Int.random(in: 0..<6, using: &generator) == 0 { tally.droppedRequests += 1; continue }
                let answer = try run(executable, ["answer", owner.dir, claimer.byte, claimFrame], killAfter: killMoment())
                guard let answerLine = answer.line else { tally.killedAnswers += 1; continue }
                let answerParts = answerLine.split(separator: " ")
                if answerParts[1] == "again" { tally.answersFromJournal += 1 }
                if Int.random(in: 0..<6, using: &generator) == 0 { tally.droppedAnswers += 1; continue }
                let settle = try run(executable, ["settle", claimer.dir, owner.byte, String(answerParts[2])], killAfter: killMoment())
                guard let settleLine = settle.line else { tally.killedSettles += 1; continue }
                problems.check(settleLine.hasPrefix("settled "), "\(settleLine)")
                if settleLine == "settled alreadyApplied" { tally.settledAlreadyApplied += 1 }
                settled = settleLine.hasPrefix("settled ")
            }
            let after = try state(executable, owner.dir), taken = try state(executable, claimer.dir)
            // Exactly one save for the claim, whatever was killed or dropped, and one owner.
            problems.check(after.revision == before.revision + 1, "owner went \(before.revision) → \(after.revision)")
            problems.check(after.owner == claimer.byte && taken.owner == "this")
            problems.check(taken.revision == after.revision && taken.revision > claimerBefore.revision)
            problems.check(after.pending == 0 && taken.pending == 0)
            tally.rounds += 1
            ownerIndex = 1 - ownerIndex
        }
        return tally
    }
}
