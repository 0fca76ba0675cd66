// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// The built `batond` next to the test bundle.
func batondExecutable() throws -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("batond"),
        InterfaceFiles.packageRoot.appendingPathComponent(".build/debug/batond"),
    ]
    return try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }, "build batond first")
}

@Suite("BatonServiceTests: the batond executable", .serialized)
struct BatondProcessTests {
    @Test func usageErrorsExit64() async throws {
        let batond = try batondExecutable().path
        let (bogus, _, bogusErrors) = try await runTool(batond, ["--bogus"], environment: [:])
        #expect(bogus == 64)
        #expect(bogusErrors.contains("unknown option --bogus"))
        let (noState, _, noStateErrors) = try await runTool(batond, ["--session"], environment: [:])
        #expect(noState == 64)
        #expect(noStateErrors.contains("--state-dir"))
        let (version, versionOutput, _) = try await runTool(batond, ["--version"], environment: [:])
        #expect(version == 0)
        #expect(versionOutput == "batond \(batonVersion)\n")
        let (help, helpOutput, _) = try await runTool(batond, ["--help"], environment: [:])
        #expect(help == 0 && helpOutput.contains("--save-timeout"))
    }

    @Test func runsOwnsTheNameServesActivitiesAndStopsCleanlyOnSIGTERM() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let stateDirectory = bus.directory.appendingPathComponent("state").path
        let process = Process()
        process.executableURL = try batondExecutable()
        process.arguments = ["--bus-address", bus.address, "--state-dir", stateDirectory, "--no-radio", "--no-avahi", "--save-timeout", "0.3",
                             "--adapter", "hci3"]
        let errors = ChildPipe()
        process.standardError = errors
        let exited = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { exited.continuation.yield($0.terminationStatus) }
        try launch(process)
        defer { if process.isRunning { process.terminate() } }

        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        #expect(try await eventually { try await client.nameHasOwner("org.baton") })

        let path = try await client.createActivity(title: "process title")
        _ = try await client.activity(path, "BecomeCurrent")
        #expect(try await eventually { try await client.property(path, "Status") == .string("failed") })
        #expect(try await client.property(path, "LastError") == .string("radio-unavailable"))
        let status = try #require(try await client.manager("GetStatus").first?.asDictionary)
        #expect(status["State"] == .string("running"))
        #expect(status["Radio"] == .string("off"))
        #expect(status["Adapter"] == .string("hci3"))
        let version = try await client.call(destination: "org.baton", path: "/org/baton", interface: "org.freedesktop.DBus.Properties",
                                            method: "Get", arguments: [.string("org.baton.Manager1"), .string("Version")])
        #expect(version.first?.variantValue == .string(batonVersion))

        let statusFile = StatusSnapshot(path: stateDirectory + "/status.json")
        #expect(try statusFile.read()?.activities.map(\.objectPath) == [path])

        // A second instance cannot take the name and says so.
        let (second, _, secondErrors) = try await runTool(try batondExecutable().path,
                                                         ["--bus-address", bus.address, "--state-dir", stateDirectory + "2", "--no-radio", "--no-avahi"])
        #expect(second == 1)
        #expect(secondErrors.contains("already owned"))

        kill(process.processIdentifier, SIGTERM)
        #expect(try await first(of: exited.stream, timeout: .seconds(10)) == 0)
        #expect(try await client.nameHasOwner("org.baton") == false)
        #expect(try statusFile.read()?.state == .stopping)
        let log = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("shutting down"))
        #expect(!log.contains("process title"))
    }
}

extension BatondProcessTests {
    /// Two daemons on one state directory would seal adverts with the same nonces (issue: hardening).
    @Test func aSecondDaemonOnTheSameStateDirectoryIsRefusedWithAClearMessage() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let daemon = try await RunningBatond.start(on: bus)
        let (stateDirectory, client) = (daemon.stateDirectory, daemon.client)
        defer { daemon.stop() }

        let (status, _, errors) = try await runTool(try batondExecutable().path,
                                                    ["--bus-address", bus.address, "--bus-name", "org.baton.second",
                                                     "--state-dir", stateDirectory, "--no-radio", "--no-avahi"])
        #expect(status == 1)
        #expect(errors.contains("state directory \(stateDirectory) is in use by another batond (pid \(daemon.pid))"))
        #expect(try await client.nameHasOwner("org.baton.second") == false)
        // The first daemon is untouched.
        #expect(try await client.manager("GetStatus").first?.asDictionary?["State"] == .string("running"))
    }
}

/// A `batond --no-avahi` (and `--no-radio` unless given a system bus) on `bus` with its state in `bus.directory/state`, owning its
/// name once `start` returns; terminated when stopped or released.
final class RunningBatond: @unchecked Sendable {
    let process = Process()
    let client: DBusConnection
    let stateDirectory: String
    var pid: Int32 { process.processIdentifier }

    private init(client: DBusConnection, stateDirectory: String) {
        self.client = client
        self.stateDirectory = stateDirectory
    }

    /// `systemBus`: the radio on, reaching BlueZ on the bus at that address (a fake bluetoothd).
    static func start(on bus: TestBus, _ extraArguments: [String] = [], systemBus: String? = nil) async throws -> RunningBatond {
        let stateDirectory = bus.directory.appendingPathComponent("state").path
        let daemon = RunningBatond(client: try DBusConnection(bus: .address(bus.address)), stateDirectory: stateDirectory)
        daemon.process.executableURL = try batondExecutable()
        daemon.process.arguments = ["--bus-address", bus.address, "--state-dir", stateDirectory, "--no-avahi"]
            + (systemBus == nil ? ["--no-radio"] : []) + extraArguments
        if let systemBus {
            var environment = ProcessInfo.processInfo.environment
            environment["DBUS_SYSTEM_BUS_ADDRESS"] = systemBus
            daemon.process.environment = environment
        }
        daemon.process.standardError = FileHandle.nullDevice
        try launch(daemon.process)
        #expect(try await eventually { try await daemon.client.nameHasOwner("org.baton") })
        return daemon
    }

    func stop() {
        if process.isRunning { process.terminate() }
        client.close()
    }

    deinit { stop() }
}

/// Reads the daemon's status JSON as a client would.
struct StatusSnapshot {
    let path: String
    func read() throws -> DaemonStatus? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try JSONDecoder().decode(DaemonStatus.self, from: data)
    }
}
