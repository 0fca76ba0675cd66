// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonTestBus
import BatonDBus
import Foundation
import Testing

/// batond takes the whole hard limit on descriptors at start (systemd gives services 1,024 soft):
/// an attack held 1,024 at once with AttachDocument calls, and at the soft limit the daemon could
/// not make what it needed.
@Suite("batond: descriptor limit")
struct DescriptorLimitTests {
    /// The soft and hard "Max open files" of a process, from /proc.
    static func openFileLimits(_ pid: Int32) -> (soft: String, hard: String)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else { return nil }
        let fields = line.dropFirst("Max open files".count).split(separator: " ")
        guard fields.count >= 2 else { return nil }
        return (String(fields[0]), String(fields[1]))
    }

    @Test func batondRaisesItsSoftLimitToTheHardOne() async throws {
        var ours = rlimit()
        try #require(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &ours) == 0)
        let bus = try TestBus()
        defer { bus.stop() }
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let daemon = KillableBatond(bus, name: "limits", port: freeTCPPort(), softDescriptorLimit: 64)
        try await daemon.start(client)
        let pid = try #require(daemon.processIdentifier)
        let limits = try #require(Self.openFileLimits(pid))
        let hard = ours.rlim_max == rlim_t.max ? "unlimited" : String(ours.rlim_max)
        #expect(limits.hard == hard)
        #expect(limits.soft == limits.hard, "batond kept the soft limit it was started with: \(limits)")
        let status = try await client.call(destination: daemon.busName, path: "/org/baton", interface: "org.baton.Manager1", method: "GetStatus")
        #expect(!status.isEmpty)
        await daemon.terminate()
    }
}
