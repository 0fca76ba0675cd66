// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation
import Testing

/// A private dbus-daemon for one test, listening on a unix socket in a fresh temp directory.
/// `.session` is permissive like a session bus but lets every local user connect (for the
/// other-user tests); `.system(policy:)` mimics the system bus defaults and includes a policy file.
public final class TestBus: @unchecked Sendable {
    public enum Kind: Sendable {
        case session
        case system(policyFile: String)
    }

    public let address: String
    public let directory: URL
    private let process: Process

    /// `serviceDirectory`: .service files for D-Bus activation on this bus.
    public init(_ kind: Kind = .session, serviceDirectory: String? = nil) throws {
        directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-svc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Other users (nobody) must reach the socket and read helper scripts.
        chmod(directory.path, 0o755)
        let socketPath = directory.appendingPathComponent("bus").path
        let policy: String
        switch kind {
        case .session:
            policy = """
                  <type>session</type>
                  <policy context="default">
                    <allow user="*"/>
                    <allow send_destination="*" eavesdrop="true"/>
                    <allow eavesdrop="true"/>
                    <allow own="*"/>
                  </policy>
                  <!-- As Debian's session.conf: a connection may wait for many replies (the system bus's is 128). -->
                  <limit name="max_replies_per_connection">50000</limit>
                """
        case .system(let policyFile):
            // The defaults of Debian's /usr/share/dbus-1/system.conf, restated.
            policy = """
                  <type>system</type>
                  <policy context="default">
                    <allow user="*"/>
                    <deny own="*"/>
                    <deny send_type="method_call"/>
                    <allow send_type="signal"/>
                    <allow send_requested_reply="true" send_type="method_return"/>
                    <allow send_requested_reply="true" send_type="error"/>
                    <allow receive_type="method_call"/>
                    <allow receive_type="method_return"/>
                    <allow receive_type="error"/>
                    <allow receive_type="signal"/>
                    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
                    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
                    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
                  </policy>
                  <include>\(policyFile)</include>
                """
        }
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <listen>unix:path=\(socketPath)</listen>
              <auth>EXTERNAL</auth>
            \(serviceDirectory.map { "<servicedir>\($0)</servicedir>" } ?? "")
            \(policy)
            </busconfig>
            """
        let configURL = directory.appendingPathComponent("bus.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)

        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(configURL.path)", "--print-address", "--nofork"]
        let output = ChildPipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try launch(process)

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

    /// SIGKILL, then poll: Foundation reaps the child itself.
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            for _ in 0..<200 where process.isRunning { usleep(10_000) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}

public enum TestBusError: Error {
    case daemonDidNotStart
    case timedOut
}

/// The first element of `stream`, or `TestBusError.timedOut`.
public func first<Element: Sendable>(of stream: AsyncStream<Element>, timeout: Duration = .seconds(5)) async throws -> Element {
    try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask {
            for await element in stream { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next(), let element = result else { throw TestBusError.timedOut }
        return element
    }
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes; returns whether it held.
public func eventually(timeout: Duration = .seconds(5), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// Runs `body` with a fresh session-like bus and stops the bus afterwards.
public func withTestBus<T>(_ body: (TestBus) async throws -> T) async throws -> T {
    let bus = try TestBus()
    defer { bus.stop() }
    return try await body(bus)
}
