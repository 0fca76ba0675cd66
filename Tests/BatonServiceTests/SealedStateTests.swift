// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonStore
import Foundation
import Synchronization
import Testing
@testable import BatonService
#if canImport(Glibc)
import Glibc
#endif

/// The ring's keys sealed at rest under the systemd credential (docs/security.md "Key storage at
/// rest"): migration of a plain state, a missing or other key refused without touching the state,
/// and the credential as batond.service hands it over.
@Suite("SealedState")
struct SealedStateTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private static func scratch(_ label: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("sealed-\(label)-\(UUID().uuidString)").path
    }

    private static func ring(_ path: String, sealing: StateSealingKey?, log: @escaping @Sendable (String) -> Void = { _ in }) throws -> RingService {
        try RingService(store: RingStore(directory: StateDirectory(path: path), sealing: sealing), radio: nil, clock: SystemWallClock(),
                        configuration: .init(deviceName: "desk", listenHost: "127.0.0.1"), log: log)
    }

    private static func file(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }

    /// The lines a RingService logged.
    final class LogLines: Sendable {
        let lines = Mutex<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        func contains(_ text: String) -> Bool { lines.withLock { $0.contains { $0.contains(text) } } }
    }

    let key = try! StateSealingKey(bytes: SystemRandom().bytes(32), protection: .host)

    @Test func aPlainStateIsSealedOnTheFirstStartWithTheKeyAndKeepsItsIdentity() async throws {
        let path = Self.scratch("migrate")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let plainID = try await Self.ring(path, sealing: nil).deviceID
        let plainRing = try #require(Self.file(path + "/ring"))
        #expect(Array(plainRing.prefix(8)) == Array("BATONREC".utf8))
        let lines = LogLines()
        let sealedService = try Self.ring(path, sealing: key, log: { lines.append($0) })
        #expect(await sealedService.deviceID == plainID)
        let sealedRing = try #require(Self.file(path + "/ring"))
        #expect(Array(sealedRing.prefix(8)) == Array("BATONSEA".utf8))
        #expect(lines.contains("sealed the ring's keys at rest"))
        // The other records stay plain: only `ring` holds keys.
        #expect(Array(try #require(Self.file(path + "/advert-counters")).prefix(8)) == Array("BATONREC".utf8))
        // Started again with the key: the same identity, nothing sealed again.
        let again = LogLines()
        #expect(try await Self.ring(path, sealing: key, log: { again.append($0) }).deviceID == plainID)
        #expect(!again.contains("sealed the ring's keys"))
        #expect(try RingStore(directory: StateDirectory(path: path), sealing: key).secretsAtRest == "sealed-host")
        #expect(try RingStore(directory: StateDirectory(path: path)).secretsAtRest == "plain")
    }

    /// Issue 23 / protocol §7.5: a new identity's ring record is sealed as every ring record (0600),
    /// opens with the key only, and names the new identity.
    @Test func aNewIdentityIsWrittenSealed() async throws {
        let path = Self.scratch("reset")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let service = try Self.ring(path, sealing: key)
        let reset = try await service.resetIdentity()
        #expect(reset.deviceID != reset.previous)
        let sealedRing = try #require(Self.file(path + "/ring"))
        #expect(Array(sealedRing.prefix(8)) == Array("BATONSEA".utf8))
        let mode = try FileManager.default.attributesOfItem(atPath: path + "/ring")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let stored = try #require(try RingStore(directory: StateDirectory(path: path), sealing: key).loadRing())
        #expect(try RingKeeper(state: stored).deviceID == reset.deviceID)
        #expect(throws: RingStore.LoadError.self) { _ = try RingStore(directory: StateDirectory(path: path)).loadRing() }
    }

    @Test func aSealedStateWithoutItsKeyOrWithAnotherIsRefusedAndKept() async throws {
        let path = Self.scratch("refuse")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let id = try await Self.ring(path, sealing: key).deviceID
        let sealed = try #require(Self.file(path + "/ring"))
        let other = try StateSealingKey(bytes: SystemRandom().bytes(32), protection: .hostAndTPM2)
        for attempt in [nil, other] {
            do {
                _ = try Self.ring(path, sealing: attempt)
                Issue.record("a ring opened without its key")
            } catch let error as RingStore.LoadError {
                switch (error, attempt) {
                case (.store(.sealedWithoutKey), nil): break
                case (.store(.sealedToOtherKey(_, let sealedWith, let given)), .some(let wrong)):
                    #expect(sealedWith == key.identifier.hexString && given == wrong.identifier.hexString)
                default: Issue.record("\(error)")
                }
                #expect("\(error)".contains("fix:"))
            }
            // Never replaced by a new identity.
            #expect(Self.file(path + "/ring") == sealed)
        }
        #expect(try await Self.ring(path, sealing: key).deviceID == id)
    }

    @Test func theCredentialIsReadFromTheCredentialsDirectory() throws {
        let directory = Self.scratch("credentials")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        guard case .none = try StateKeyCredential.load(environment: [:]) else { Issue.record("a key without CREDENTIALS_DIRECTORY"); return }
        guard case .none = try StateKeyCredential.load(environment: ["CREDENTIALS_DIRECTORY": directory]) else { Issue.record("a key from nothing"); return }
        let path = directory + "/" + StateSealingKey.credentialName
        // The unit's SetCredential= default when the sealed file is missing: no key.
        #expect(FileManager.default.createFile(atPath: path, contents: Data("missing".utf8)))
        guard case .none(let reason) = try StateKeyCredential.load(environment: ["CREDENTIALS_DIRECTORY": directory]) else { Issue.record("a key from the default"); return }
        #expect(reason.contains("is missing"))
        // The unit as installed passes exactly that default.
        let unit = try String(contentsOfFile: Self.packageRoot.path + "/dbus/batond.service", encoding: .utf8)
        #expect(unit.split(separator: "\n").contains("SetCredential=\(StateSealingKey.credentialName):\(StateSealingKey.missingCredential)"))
        #expect(unit.split(separator: "\n").contains("LoadCredentialEncrypted=\(StateSealingKey.credentialName):/etc/credstore.encrypted/\(StateSealingKey.credentialName)"))
        let bytes = SystemRandom().bytes(32)
        try Data(StateSealingKey.credentialText(bytes: bytes, protection: .hostAndTPM2).utf8).write(to: URL(fileURLWithPath: path))
        guard case .key(let loaded) = try StateKeyCredential.load(environment: ["CREDENTIALS_DIRECTORY": directory]) else { Issue.record("no key"); return }
        let expected = try StateSealingKey(bytes: bytes, protection: .host).identifier
        #expect(loaded.protection == .hostAndTPM2 && loaded.identifier == expected)
        try Data("not a key".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: StoreError.self) { try StateKeyCredential.load(environment: ["CREDENTIALS_DIRECTORY": directory]) }
    }

    static let systemdCreds = "/usr/bin/systemd-creds"
    static var canRunSystemdCreds: Bool { getuid() == 0 && access(systemdCreds, X_OK) == 0 }

    /// The install path's tool and the real systemd-creds: baton-state-key makes the credential,
    /// systemd-creds opens it as the service manager would for LoadCredentialEncrypted=, batond reads
    /// it and seals the ring; another host key cannot open it. The host key is a temporary one
    /// (SYSTEMD_CREDENTIAL_SECRET), never the machine's /var/lib/systemd/credential.secret.
    @Test(.enabled(if: canRunSystemdCreds, "needs root and /usr/bin/systemd-creds"))
    func theStateKeyMadeWithSystemdCredsSealsTheRing() async throws {
        let work = Self.scratch("systemd-creds")
        try FileManager.default.createDirectory(atPath: work + "/credentials", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let environment = ["SYSTEMD_CREDENTIAL_SECRET": work + "/host.secret", "PATH": "/usr/bin:/bin"]
        let credential = work + "/credstore.encrypted/baton.state-key"
        let made = try Self.run("/bin/sh", [Self.packageRoot.path + "/dbus/baton-state-key", credential], environment: environment)
        #expect(made.status == 0, "\(made.output)")
        // What systemd does before batond starts (LoadCredentialEncrypted=), into $CREDENTIALS_DIRECTORY.
        let opened = try Self.run(Self.systemdCreds, ["decrypt", "--name=baton.state-key", credential,
                                                      work + "/credentials/baton.state-key"], environment: environment)
        #expect(opened.status == 0, "\(opened.output)")
        guard case .key(let key) = try StateKeyCredential.load(environment: ["CREDENTIALS_DIRECTORY": work + "/credentials"]) else {
            Issue.record("batond found no key in what systemd-creds decrypted"); return
        }
        #expect(key.protection == .host || key.protection == .hostAndTPM2)
        let state = work + "/state"
        let id = try await Self.ring(state, sealing: key).deviceID
        #expect(Array(try #require(Self.file(state + "/ring")).prefix(8)) == Array("BATONSEA".utf8))
        #expect(try await Self.ring(state, sealing: key).deviceID == id)
        // Another machine's host key does not open the credential.
        let otherEnvironment = ["SYSTEMD_CREDENTIAL_SECRET": work + "/other.secret", "PATH": "/usr/bin:/bin"]
        let otherMade = try Self.run("/bin/sh", [Self.packageRoot.path + "/dbus/baton-state-key", work + "/other.cred"], environment: otherEnvironment)
        #expect(otherMade.status == 0, "\(otherMade.output)")
        let stolen = try Self.run(Self.systemdCreds, ["decrypt", "--name=baton.state-key", credential, work + "/stolen"], environment: otherEnvironment)
        #expect(stolen.status != 0)
        #expect(!FileManager.default.fileExists(atPath: work + "/stolen"))
    }

    private static func run(_ program: String, _ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
