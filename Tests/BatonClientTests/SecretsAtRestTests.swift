// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import BatonStore
import BatonTestBus
import Foundation
import Testing

/// The real batond with and without the state key systemd hands it (docs/security.md "Key storage
/// at rest"): GetStatus "SecretsAtRest", `baton status`, the sealed ring, and a start without the
/// key refused with the fix while the state stays as it was.
@Suite("SecretsAtRest")
struct SecretsAtRestTests {
    @Test func plainWithoutTheCredentialSealedWithItAndRefusedWithoutItOnceSealed() async throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("secrets-at-rest-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let state = work + "/state", credentials = work + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        let ringPath = state + "/ring"
        func magic() -> [UInt8]? { FileManager.default.contents(atPath: ringPath).map { Array($0.prefix(8)) } }
        func deviceID(_ daemon: DaemonFixture) async throws -> [DBusValue] {
            let connection = try daemon.rawConnection()
            defer { connection.close() }
            return try await connection.call(destination: daemon.busName, path: "/org/baton/ring", interface: "org.freedesktop.DBus.Properties",
                                             method: "Get", arguments: [.string("org.baton.Ring1"), .string("DeviceId")])
        }

        // 1. No credential: plain files, and status says so.
        var id: [DBusValue]
        do {
            let daemon = try await DaemonFixture(stateDirectory: state)
            defer { daemon.stop() }
            let tool = BatonTool(daemon: daemon)
            let (_, status) = try await tool.json(["status"])
            #expect(status["SecretsAtRest"] == .string("plain"))
            #expect(try await tool.run(["status"]).stdout.contains("Secrets:  plain 0600 files"))
            id = try await deviceID(daemon)
            #expect(magic() == Array("BATONREC".utf8))
        }
        // 2. With the key: the plain ring is sealed at start, the identity kept.
        let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try Data(StateSealingKey.credentialText(bytes: key, protection: .host).utf8)
            .write(to: URL(fileURLWithPath: credentials + "/" + StateSealingKey.credentialName))
        do {
            let daemon = try await DaemonFixture(stateDirectory: state, credentialsDirectory: credentials)
            defer { daemon.stop() }
            let tool = BatonTool(daemon: daemon)
            let (_, status) = try await tool.json(["status"])
            #expect(status["SecretsAtRest"] == .string("sealed-host"))
            #expect(try await tool.run(["status"]).stdout.contains("Secrets:  sealed with systemd-creds (this machine's host key)"))
            #expect(try await deviceID(daemon) == id)
            #expect(magic() == Array("BATONSEA".utf8))
        }
        let sealed = FileManager.default.contents(atPath: ringPath)
        // 3. Sealed, started without the key: batond does not start, says why and the fix, and
        // the sealed ring is untouched (no new identity).
        let bus = try TestBus(.session)
        defer { bus.stop() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Built.executable("batond"))
        process.arguments = ["--bus-address", bus.address, "--bus-name", "org.baton.Sealed\(UInt32.random(in: 0...UInt32.max))",
                             "--state-dir", state, "--no-avahi", "--no-radio"]
        var environment = ProcessInfo.processInfo.environment
        environment["CREDENTIALS_DIRECTORY"] = nil
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let log = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        #expect(log.contains("sealed to this machine's credential key"), "\(log)")
        #expect(log.contains("fix:"), "\(log)")
        #expect(FileManager.default.contents(atPath: ringPath) == sealed)
    }
}
