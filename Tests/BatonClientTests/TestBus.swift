import Foundation
import Testing

/// A private dbus-daemon for one test: session-like policy, unix socket in a fresh temp directory.
/// `stop()` (called by `withTestBus`) kills the daemon and removes the directory.
final class TestBus: @unchecked Sendable {
    // Immutable after init except `process`, which only `stop()` touches.
    let address: String
    let directory: URL
    private let process: Process

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-dbus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socketPath = directory.appendingPathComponent("bus").path
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(socketPath)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        let configURL = directory.appendingPathComponent("bus.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)

        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(configURL.path)", "--print-address", "--nofork"]
        let output = Pipe()
        process.standardOutput = output
        // Silences the daemon's harmless "cannot raise fd limit" complaint when unprivileged.
        process.standardError = FileHandle.nullDevice
        try process.run()

        // --print-address writes one line once the daemon listens.
        var line = Data()
        let reader = output.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let printed = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !printed.isEmpty else {
            process.terminate()
            throw TestBusError.daemonDidNotStart
        }
        address = printed
    }

    /// SIGKILL, then poll: Foundation reaps the child itself, and its waitUntilExit can hang here.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            for _ in 0..<200 where process.isRunning { usleep(10_000) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}

enum TestBusError: Error {
    case daemonDidNotStart
    case timedOut
}

/// Runs `body` with a fresh bus, always stopping the daemon afterwards.
func withTestBus<T>(_ body: (TestBus) async throws -> T) async throws -> T {
    let bus = try TestBus()
    defer { bus.stop() }
    return try await body(bus)
}
