// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonClient
import BatonDBus
import Foundation
import Testing

/// Paths of the package's built products and sources.
enum Built {
    /// The package root, found from this file's location.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// An executable product: next to the test bundle, else in .build/debug.
    static func executable(_ name: String) throws -> String {
        var candidates: [URL] = []
        if let executable = Bundle.main.executableURL { candidates.append(executable.deletingLastPathComponent()) }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
        candidates.append(packageRoot.appendingPathComponent(".build/debug"))
        for directory in candidates {
            let path = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw FixtureError.missingExecutable(name)
    }
}

enum FixtureError: Error {
    case missingExecutable(String)
    case daemonDidNotStart(String)
    case timedOut(String)
}

/// The radio a fixture's batond gets. BlueZ is always looked for on the "system bus", which the
/// fixture points elsewhere, so the outcome does not depend on this machine's Bluetooth.
enum FixtureRadio: Sendable {
    /// `--no-radio`.
    case off
    /// The system bus is the private test bus, where no bluetoothd owns org.bluez.
    case bluetoothdAbsent
    /// The system bus address leads nowhere: BlueZ cannot be reached at all.
    case noSystemBus
}

/// A private dbus-daemon plus the real `batond` (built executable, --no-radio unless asked)
/// owning a unique bus name on it, so several fixtures can run side by side.
final class DaemonFixture: Sendable {
    let bus: TestBus
    let busName: String
    let stateDirectory: String
    private let process: Process

    /// `busKind` .system with the shipped policy needs `busName` org.baton (the name the policy names).
    /// `credentialsDirectory`: batond's $CREDENTIALS_DIRECTORY (the state key, as systemd hands it
    /// over); none by default. `stateDirectory`: one that outlives the fixture; its own by default.
    init(saveTimeout: Double = 0.5, radio: FixtureRadio = .off, busKind: TestBus.Kind = .session, busName requested: String? = nil,
         stateDirectory chosenState: String? = nil, credentialsDirectory: String? = nil) async throws {
        bus = try TestBus(busKind)
        self.busName = requested ?? "org.baton.Test\(UInt32.random(in: 0...UInt32.max))"
        stateDirectory = chosenState ?? bus.directory.appendingPathComponent("state").path
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        process = Process()
        process.executableURL = URL(fileURLWithPath: try Built.executable("batond"))
        process.arguments = ["--bus-address", bus.address, "--bus-name", busName, "--state-dir", stateDirectory, "--no-avahi",
                             "--save-timeout", String(saveTimeout)] + (radio == .off ? ["--no-radio"] : [])
        var environment = ProcessInfo.processInfo.environment
        // No .desktop files from this machine: handled types must come from the test alone.
        environment["XDG_DATA_HOME"] = bus.directory.appendingPathComponent("data").path
        environment["XDG_DATA_DIRS"] = bus.directory.appendingPathComponent("data-dirs").path
        environment["CREDENTIALS_DIRECTORY"] = credentialsDirectory
        switch radio {
        case .off: break
        case .bluetoothdAbsent: environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
        case .noSystemBus: environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=" + bus.directory.appendingPathComponent("no-such-bus").path
        }
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try launch(process)

        let probe = try DBusConnection(bus: .address(bus.address))
        defer { probe.close() }
        let deadline = ContinuousClock.now + .seconds(10)
        while try await !probe.nameHasOwner(busName) {
            guard process.isRunning else {
                bus.stop()
                throw FixtureError.daemonDidNotStart("batond exited with \(process.terminationStatus)")
            }
            guard ContinuousClock.now < deadline else {
                stop()
                throw FixtureError.daemonDidNotStart("batond did not own \(busName) within 10 s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    var busOption: String { bus.address }

    func connect() throws -> BatonConnection {
        try BatonConnection(bus: .address(bus.address), busName: busName)
    }

    func rawConnection() throws -> DBusConnection {
        try DBusConnection(bus: .address(bus.address))
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            for _ in 0..<200 where process.isRunning { usleep(10_000) }
        }
        bus.stop()
    }

    deinit { stop() }
}

/// Runs `body` against a fresh bus and daemon, always stopping both afterwards.
func withDaemon<T>(saveTimeout: Double = 0.5, radio: FixtureRadio = .off, _ body: (DaemonFixture) async throws -> T) async throws -> T {
    let daemon = try await DaemonFixture(saveTimeout: saveTimeout, radio: radio)
    defer { daemon.stop() }
    return try await body(daemon)
}

/// Expects `body` to throw a `BatonClientError` named `name`.
func expectClientError(_ name: String, sourceLocation: SourceLocation = #_sourceLocation,
                       _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(name), got success", sourceLocation: sourceLocation)
    } catch let error as BatonClientError {
        #expect(error.name == name, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(name), got \(error)", sourceLocation: sourceLocation)
    }
}

/// Expects `body` to fail because the activity object does not exist. docs/dbus-api.md says
/// UnknownActivity; batond currently lets the bus library answer UnknownObject for paths it no
/// longer exports (reported to the lead), so either name is accepted here.
func expectActivityGone(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected the activity to be gone, got success", sourceLocation: sourceLocation)
    } catch let error as BatonClientError {
        #expect([BatonClientError.Code.unknownActivity.rawValue, DBusError.unknownObjectName].contains(error.name), "\(error)",
                sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected the activity to be gone, got \(error)", sourceLocation: sourceLocation)
    }
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(120), _ what: String,
                _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw FixtureError.timedOut(what) }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// A program run with stdout and stderr captured separately (BatonTestBus.runProgram).
func runTool(_ path: String, _ arguments: [String], environment: [String: String]? = nil) async throws -> ToolResult {
    try await runProgram(path, arguments, environment: environment)
}
