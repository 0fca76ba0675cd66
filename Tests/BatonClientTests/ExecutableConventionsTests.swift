// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

/// Issue 26: every installed executable follows the same conventions: `--version` and `--help` on
/// stdout with status 0; a bad option is one line naming the problem and "Try 'PROG --help'." on
/// stderr, status 64, nothing on stdout and no Swift debug text.
@Suite("every executable: --version, --help, usage errors")
struct ExecutableConventionsTests {
    static let executables = ["batond", "baton", "bt-pair", "baton-agent", "baton-browser-host"]

    /// No bus, no state directory, no display: the answers must not depend on any.
    static let environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
                              "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent"]

    @Test("--version prints the name and the version", arguments: executables)
    func version(_ name: String) async throws {
        let result = try await runTool(try Built.executable(name), ["--version"], environment: Self.environment)
        #expect(result.status == 0, "\(name): \(result.stderr)")
        let line = result.stdout
        #expect(line.hasPrefix(name + " ") && line.hasSuffix("\n") && line.split(separator: "\n").count == 1, "\(name): \(line)")
        let version = line.dropFirst(name.count + 1).dropLast()
        #expect(version.split(separator: ".").count == 3 && version.split(separator: ".").allSatisfy { Int($0) != nil }, "\(name): \(line)")
        #expect(result.stderr.isEmpty, "\(name): \(result.stderr)")
    }

    @Test("--help prints the usage on stdout", arguments: executables)
    func help(_ name: String) async throws {
        let result = try await runTool(try Built.executable(name), ["--help"], environment: Self.environment)
        #expect(result.status == 0, "\(name): \(result.stderr)")
        #expect(result.stdout.lowercased().hasPrefix("usage: \(name)"), "\(name): \(result.stdout)")
        #expect(result.stderr.isEmpty, "\(name): \(result.stderr)")
    }

    @Test("a bad option: status 64, one line and where help is", arguments: executables)
    func badOption(_ name: String) async throws {
        let result = try await runTool(try Built.executable(name), ["--no-such-option"], environment: Self.environment)
        #expect(result.status == 64, "\(name): \(result.status) \(result.stderr)")
        #expect(result.stdout.isEmpty, "\(name): \(result.stdout)")
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines[2].isEmpty, "\(name): \(result.stderr)")
        #expect(lines.first.map { $0.hasPrefix("\(name): ") && $0.contains("--no-such-option") } == true, "\(name): \(result.stderr)")
        #expect(lines.count > 1 && lines[1] == "Try '\(name) --help'.", "\(name): \(result.stderr)")
        #expect(!result.stderr.contains("UsageError") && !result.stderr.contains("message:"), "\(name): \(result.stderr)")
    }
}
