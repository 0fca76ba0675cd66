// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Synchronization
import Testing

/// The test harness's own spawning (Tests/Support/BatonTestBus/Spawning.swift): a child started
/// with `launch` holds only its standard descriptors and Foundation's termination socket, however many pipes other threads make while
/// it starts. With Foundation's plain Pipe and Process.run, such pipes leaked into the child, and a
/// lab run waited 120 s for a program's output.
@Suite struct ChildProcessSpawningTests {
    @Test func aChildInheritsNoPipeOtherThreadsMakeWhileItStarts() async throws {
        let stop = Atomic(false)
        let makers = (0..<3).map { _ in
            Thread {
                var kept: [ChildPipe] = []
                while !stop.load(ordering: .relaxed) { kept.append(ChildPipe()); if kept.count > 100 { kept.removeAll() } }
            }
        }
        makers.forEach { $0.start() }
        defer { stop.store(true, ordering: .relaxed) }
        for _ in 0..<60 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sleep")
            process.arguments = ["5"]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try launch(process)
            let folder = "/proc/\(process.processIdentifier)/fd"
            let extra = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { !["0", "1", "2"].contains($0) }
            let targets = extra.map { (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\($0)")) ?? "?" }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            // Foundation hands each child one end of its own termination socket; the files sleep itself
            // may have open while it starts (libc, locale) are not inherited.
            #expect(targets.filter { $0.hasPrefix("pipe:") }.isEmpty, "\(targets)")
            #expect(targets.filter { $0.hasPrefix("socket:") }.count == 1, "\(targets)")
        }
    }
}
