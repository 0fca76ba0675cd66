// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing
@testable import BatonStore
import BatonTestBus
#if canImport(Glibc)
import Glibc
#endif

/// Kills a writer with SIGKILL at random instants and checks that no acknowledged write is ever
/// lost and no unacknowledged one appears out of nowhere.
@Suite("Fault injection")
struct FaultInjectionTests {
    static let minimumAttempts = 1000
    static let minimumRuns = 40

    /// What one killed run of `baton-store-torture counter` printed.
    struct RunOutput {
        var start: UInt64?
        var begun: [UInt64] = []
        var acknowledged: [UInt64] = []
        var unparsed: [String] = []

        init(_ text: String) {
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 2, let value = UInt64(parts[1]) else {
                    unparsed.append(String(line))
                    continue
                }
                switch parts[0] {
                case "start": start = value
                case "begin": begun.append(value)
                case "ack": acknowledged.append(value)
                default: unparsed.append(String(line))
                }
            }
        }
    }

    // A bound for a writer that stopped making progress, not a timing: loaded runners took over 60 s,
    // and beside two CPU hogs plus three builds on two cores over 300 s.
    @Test(.timeLimit(.minutes(20)))
    func sigkillNeverLosesAnAcknowledgedWrite() async throws {
        let executable = try #require(tortureExecutablePath(), "\(TortureMissing())")
        let path = scratchPath("torture")
        defer { removeTree(path) }
        _ = try StateDirectory(path: path)

        var stored: UInt64 = 0  // value on disk after the previous kill (0: no record yet)
        var attempts = 0
        var runs = 0
        var killedBetweenBeginAndAck = 0
        var staleFilesRemoved = 0
        var generator = SystemRandomNumberGenerator()
        while attempts < Self.minimumAttempts || runs < Self.minimumRuns {
            // A bound that cannot be reached unless the writer stopped making progress.
            try #require(runs < 5000, "only \(attempts) write attempts after \(runs) runs")
            runs += 1
            // The kill comes at a random instant after the writer said it started (start-up takes
            // ~20 ms on a quiet machine and far longer on a loaded one, which would otherwise leave
            // most runs with no write at all): up to 50 ms lets a run complete dozens of writes.
            let delay = UInt32.random(in: 0...50_000, using: &generator)
            // One run in eight is killed without waiting for it, during its start (loading the record
            // and clearing what an earlier kill left) as often as not.
            let duringStart = Int.random(in: 0..<8, using: &generator) == 0
            // The start, the wait and the kill on a thread of their own (not the shared pool).
            let (text, killedBySignal) = try await onOwnThread {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = ["counter", path]
                let output = ChildPipe()
                process.standardOutput = output
                try launch(process)
                var head = Data()
                while !duringStart, !String(decoding: head, as: UTF8.self).contains("start ") {
                    let chunk = output.fileHandleForReading.availableData
                    if chunk.isEmpty { break }  // the writer ended (it never does unless killed or failing)
                    head.append(chunk)
                }
                usleep(delay)
                kill(process.processIdentifier, SIGKILL)
                let text = String(decoding: head + output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                return (text, process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL)
            }
            try #require(killedBySignal, "run \(runs): writer exited by itself: \(text)")

            let run = RunOutput(text)
            try #require(run.unparsed.isEmpty, "run \(runs): unexpected output \(run.unparsed)")
            if let start = run.start {
                #expect(start == stored, "run \(runs): writer started from \(start), disk held \(stored)")
            }
            attempts += run.begun.count
            let reference = run.acknowledged.last ?? run.start ?? stored

            let directory = try StateDirectory(path: path)  // also removes the killed write's temp file
            staleFilesRemoved += directory.removedStaleFiles.count
            let record = try DurableRecord<TortureCounterView>(name: "counter", schemaVersion: 1, in: directory)
            let loaded = try record.load()?.value ?? 0  // throws if the kill left a corrupt record
            #expect(loaded >= reference, "run \(runs): acknowledged \(reference) but disk holds \(loaded)")
            #expect(loaded <= reference + 1, "run \(runs): acknowledged \(reference) but disk holds \(loaded)")
            if loaded == reference + 1 {
                // The only write that may land unacknowledged is the one announced before saving.
                #expect(run.begun.last == loaded, "run \(runs): \(loaded) on disk was never begun")
                killedBetweenBeginAndAck += 1
            }
            #expect(directoryEntries(path).allSatisfy { $0 == "counter" }, "run \(runs): \(directoryEntries(path))")
            stored = loaded
        }
        print("fault injection: \(runs) kills, \(attempts) write attempts, final value \(stored), "
            + "\(killedBetweenBeginAndAck) kills after rename before ack, \(staleFilesRemoved) stale temp files removed")
    }
}
