// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing

/// One private bus + avahi-daemon in its own network namespace, run by scripts/avahi-test-env.
/// Needs root, avahi-daemon, dbus-daemon and network namespaces. When those are missing the live
/// suite is skipped, unless BATON_REQUIRE_AVAHI=1 (CI), in which case it fails.
struct AvahiTestEnvironment: Sendable {
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/avahi-test-env").path

    static let required = ProcessInfo.processInfo.environment["BATON_REQUIRE_AVAHI"] == "1"

    /// Why the environment cannot be set up here, or nil if it can (checked once).
    static let unavailableReason: String? = {
        let (status, output) = runSync([script, "check"])
        if status == 0 { return nil }
        let reason = output.trimmingCharacters(in: .whitespacesAndNewlines)
        FileHandle.standardError.write(Data("BatonAvahiTests: live Avahi tests skipped: \(reason)\n".utf8))
        return reason.isEmpty ? "scripts/avahi-test-env check exited \(status)" : reason
    }()

    /// Run the live suite if the environment is there, or if it is required (then it fails loudly).
    static var shouldRun: Bool { required || unavailableReason == nil }

    let id: String
    let busAddress: String

    /// Address the test avahi-daemon publishes (scripts/avahi-test-env).
    static let address = "192.168.231.1"
    var hostName: String { "baton-test-\(id).local" }

    static func start() async throws -> AvahiTestEnvironment {
        if let reason = unavailableReason { throw EnvironmentError.unavailable(reason) }
        let id = String((0..<10).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement()! })
        let (status, output) = try await run([script, "start", id])
        guard status == 0 else {
            _ = try? await run([script, "stop", id])
            throw EnvironmentError.commandFailed("start", output)
        }
        guard let address = output.split(separator: "\n").last.map(String.init), address.hasPrefix("unix:path=") else {
            throw EnvironmentError.commandFailed("start", output)
        }
        return AvahiTestEnvironment(id: id, busAddress: address)
    }

    func stop() async { _ = try? await Self.run([Self.script, "stop", id]) }
    func stopAvahi() async throws { try await checked("stop-avahi") }
    func startAvahi() async throws { try await checked("start-avahi") }
    func restartAvahi() async throws { try await checked("restart-avahi") }

    private func checked(_ command: String) async throws {
        let (status, output) = try await Self.run([Self.script, command, id])
        guard status == 0 else { throw EnvironmentError.commandFailed(command, output) }
    }

    enum EnvironmentError: Error, CustomStringConvertible {
        case unavailable(String)
        case commandFailed(String, String)

        var description: String {
            switch self {
            case .unavailable(let reason): "avahi test environment unavailable: \(reason)"
            case .commandFailed(let command, let output): "avahi-test-env \(command) failed: \(output)"
            }
        }
    }

    /// Runs a command; output is stdout and stderr together.
    static func run(_ arguments: [String]) async throws -> (Int32, String) {
        let result = try await runProgram("/bin/bash", arguments, mergeStandardError: true)
        return (result.status, result.stdout)
    }

    static func runSync(_ arguments: [String]) -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = arguments
        let output = ChildPipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        do { try launch(process) } catch { return (-1, "cannot run \(arguments[0]): \(error)") }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// Collects a stream's elements so tests can wait for one that matches.
actor EventLog<Element: Sendable> {
    private(set) var elements: [Element] = []

    init(_ stream: AsyncStream<Element>) {
        Task { await self.consume(stream) }
    }

    private func consume(_ stream: AsyncStream<Element>) async {
        for await element in stream { elements.append(element) }
    }

    /// Waits for the first element after index `from` that `match` accepts; returns it and its index.
    @discardableResult
    func wait(from start: Int = 0, timeout: Duration = .seconds(60), _ what: String,
              _ match: @Sendable (Element) -> Bool) async throws -> (element: Element, index: Int) {
        let deadline = ContinuousClock.now + timeout
        var index = start
        while true {
            while index < elements.count {
                if match(elements[index]) { return (elements[index], index) }
                index += 1
            }
            guard ContinuousClock.now < deadline else { throw WaitTimeout(what: what, seen: "\(elements)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    var count: Int { elements.count }
}

struct WaitTimeout: Error, CustomStringConvertible {
    let what: String
    let seen: String
    var description: String { "timed out waiting for \(what); events so far: \(seen)" }
}
