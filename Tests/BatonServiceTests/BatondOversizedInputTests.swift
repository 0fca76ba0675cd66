// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Testing

/// The kernel's high-water mark of a process's resident memory, in KiB (VmHWM).
private func peakResidentKiB(of pid: Int32) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
    return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
}

@Suite("BatonServiceTests: batond under a message over its bus limit (issue 10)", .serialized)
struct BatondOversizedInputTests {
    /// 20 MB in one CreateActivity: before the size limit, libdbus in batond held it twice (its read buffer
    /// and the message) before the argument budget refused it, about 40 MB more at the peak.
    @Test func aCallOverTheLimitIsRefusedWhileItArrivesAndNeverBuffered() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let process = Process()
        process.executableURL = try batondExecutable()
        process.arguments = ["--bus-address", bus.address, "--state-dir", bus.directory.appendingPathComponent("state").path,
                             "--no-radio", "--no-avahi"]
        process.standardError = FileHandle.nullDevice
        try launch(process)
        defer { if process.isRunning { process.terminate() } }
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        #expect(try await eventually { try await client.nameHasOwner("org.baton") })
        _ = try await client.createActivity(title: "before")
        let peakBefore = try peakResidentKiB(of: process.processIdentifier)

        do {
            _ = try await client.createActivity(title: "huge", userInfo: ["blob": .string(String(repeating: "x", count: 20_000_000))])
            Issue.record("a 20 MB call was accepted")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.PayloadTooLarge")
            // The size limit's refusal (sizes only), not the argument budget's, which comes after the message was buffered.
            #expect(error.message.contains("over the limit of \(DBusConnection.serviceMessageLimit) bytes"), "\(error)")
        }
        let growth = try peakResidentKiB(of: process.processIdentifier) - peakBefore
        #expect(growth < 8 << 10, "batond's peak grew by \(growth) KiB")
        #expect(process.isRunning)
        _ = try await client.createActivity(title: "after")
    }
}
