// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// A real batond on the test's bus (no radio, no Avahi) that can be killed with SIGKILL and
/// started again on the same state directory and TLS port, optionally inside a network namespace.
final class KillableBatond: @unchecked Sendable {
    let name: String
    let busName: String
    let stateDirectory: String
    let listen: String
    let port: UInt16
    let namespace: String?
    let extraArguments: [String]
    /// Started with this soft limit on descriptors (through prlimit), the hard limit left as it is.
    let softDescriptorLimit: Int?
    private let bus: TestBus
    private let logPath: String
    private let process = Mutex<Process?>(nil)
    private(set) var starts = 0

    init(_ bus: TestBus, name: String, listen: String = "127.0.0.1", port: UInt16, namespace: String? = nil, extraArguments: [String] = [],
         softDescriptorLimit: Int? = nil) {
        self.softDescriptorLimit = softDescriptorLimit
        self.bus = bus
        self.name = name
        busName = "org.baton.test.\(name)"
        stateDirectory = bus.directory.appendingPathComponent("state-\(name)").path
        logPath = bus.directory.appendingPathComponent("batond-\(name).log").path
        self.listen = listen
        self.port = port
        self.namespace = namespace
        self.extraArguments = extraArguments
    }

    /// Starts it and waits until it owns its name and listens.
    func start(_ client: DBusConnection) async throws {
        if !FileManager.default.fileExists(atPath: logPath) { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        let log = try #require(FileHandle(forWritingAtPath: logPath))
        log.seekToEndOfFile()
        let marker = log.offsetInFile
        let launched = Process()
        let daemon = try batondExecutable().path
        let arguments = ["--bus-address", bus.address, "--bus-name", busName, "--state-dir", stateDirectory, "--no-radio", "--no-avahi",
                         "--listen", listen, "--port", String(port), "--name", name] + extraArguments
        if let namespace {
            launched.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
            launched.arguments = ["netns", "exec", namespace, daemon] + arguments
        } else if let softDescriptorLimit {
            launched.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
            launched.arguments = ["--nofile=\(softDescriptorLimit):", "--", daemon] + arguments
        } else {
            launched.executableURL = URL(fileURLWithPath: daemon)
            launched.arguments = arguments
        }
        launched.standardError = log
        launched.standardOutput = FileHandle.nullDevice
        try launch(launched)
        // These daemons only need to be correct, not fast: at nice 10 their starts and transfers
        // leave the CPU to the timing-sensitive tests that run beside them in the suite.
        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(launched.processIdentifier), 10)
        process.withLock { $0 = launched }
        starts += 1
        let started = try await eventually(timeout: .seconds(20)) {
            let text = (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? ""
            let fresh = text.utf8.count > Int(marker) ? String(decoding: Array(text.utf8)[Int(marker)...], as: UTF8.self) : ""
            return try await client.nameHasOwner(self.busName) && fresh.contains("transfers on port")
        }
        #expect(started, "\(name) did not start:\n\(self.log)")
    }

    /// The running process's id.
    var processIdentifier: Int32? { process.withLock { $0?.isRunning == true ? $0?.processIdentifier : nil } }

    /// SIGKILL, then waits for the process to be gone.
    func kill9() async {
        guard let running = process.withLock({ $0 }) else { return }
        kill(running.processIdentifier, SIGKILL)
        while running.isRunning { try? await Task.sleep(for: .milliseconds(10)) }
    }

    /// SIGTERM (a clean stop), SIGKILL after 10 s.
    func terminate() async {
        guard let running = process.withLock({ $0 }), running.isRunning else { return }
        kill(running.processIdentifier, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(10)
        while running.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if running.isRunning { await kill9() }
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func call(_ client: DBusConnection, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
              path: String = BatonObjectPath.ring, timeout: Duration = .seconds(20)) async throws -> [DBusValue] {
        try await client.call(destination: busName, path: path, interface: interface, method: method, arguments: arguments, timeout: timeout)
    }

    func pairingProperty(_ client: DBusConnection, _ path: String, _ name: String) async throws -> DBusValue {
        let reply = try await client.call(destination: busName, path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                                          arguments: [.string(BatonInterface.pairingSession), .string(name)])
        return reply.first?.unwrapped ?? .string("")
    }

    /// This daemon's device id (hex), from ListMembers.
    func deviceID(_ client: DBusConnection) async throws -> String {
        let members = (try await call(client, BatonInterface.ring, "ListMembers").first?.arrayValue ?? []).compactMap(\.asDictionary)
        return try #require(members.first { $0["Self"]?.boolValue == true }?["DeviceId"]?.stringValue)
    }

    // MARK: What it keeps on disk (atomically replaced records)

    func editSessions() throws -> EditSessionKeeper? {
        try withCopyOfSessions { directory in
            // The daemons run as this user: their documents are this user's records.
            try DurableRecord<EditSessionRecord>(name: EditSessions.recordName, schemaVersion: EditSessionRecord.schemaVersion, in: directory)
                .load()?.keeper(uid: getuid())
        }
    }

    func pendingClaims() throws -> [PendingClaim] {
        try withCopyOfSessions { directory in
            try Journal<PendingClaim>(name: EditSessions.journalName, capacity: ClaimQueue.defaultCapacity, in: directory).entries()
        }
    }

    /// Opening a StateDirectory removes the temporary files in it, which would break a write the
    /// running daemon has in progress: the test opens a copy of the two records instead (each is
    /// whole, since the daemon replaces them by renaming).
    private func withCopyOfSessions<T>(_ body: (StateDirectory) throws -> T) throws -> T {
        let copy = bus.directory.appendingPathComponent("sessions-copy-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: copy) }
        for name in [EditSessions.recordName, EditSessions.journalName] {
            guard let bytes = FileManager.default.contents(atPath: stateDirectory + "/sessions/" + name) else { continue }
            _ = FileManager.default.createFile(atPath: copy + "/" + name, contents: bytes, attributes: [.posixPermissions: 0o600])
        }
        return try body(try StateDirectory(path: copy))
    }

    func inbox() throws -> DocumentInbox { try DocumentInbox.ofUser(getuid(), under: stateDirectory + "/documents") }
}

/// Pairs `acceptor` and `initiator` over TCP through their D-Bus API (the acceptor's code typed on the initiator, its second code on the acceptor).
func pairOverTCP(_ acceptor: KillableBatond, _ initiator: KillableBatond, client: DBusConnection) async throws {
    let pathA = try #require(try await acceptor.call(client, BatonInterface.pairing, "Accept", [.propertyDictionary([:])]).first?.objectPathValue)
    let port = try #require(try await acceptor.pairingProperty(client, pathA, "Port").uint16Value)
    let session = try #require(try await acceptor.pairingProperty(client, pathA, "SessionId").stringValue)
    let pathB = try #require(try await initiator.call(client, BatonInterface.pairing, "Pair",
                                                      [.string("\(acceptor.listen):\(port)"), .propertyDictionary(["SessionId": .string(session)])])
        .first?.objectPathValue)
    for (daemon, path) in [(acceptor, pathA), (initiator, pathB)] {
        #expect(try await eventually(timeout: .seconds(20)) { try await daemon.pairingProperty(client, path, "State").stringValue == "confirming" })
    }
    let code = try #require(try await acceptor.pairingProperty(client, pathA, "Code").stringValue)
    _ = try await initiator.call(client, BatonInterface.pairingSession, "ConfirmCode", [.string(code)], path: pathB)
    // The initiator then shows the second code; the acceptor's user types it.
    #expect(try await eventually(timeout: .seconds(20)) { try await initiator.pairingProperty(client, pathB, "Code").stringValue?.count == 6 })
    let second = try #require(try await initiator.pairingProperty(client, pathB, "Code").stringValue)
    _ = try await acceptor.call(client, BatonInterface.pairingSession, "ConfirmCode", [.string(second)], path: pathA)
    for (daemon, path) in [(acceptor, pathA), (initiator, pathB)] {
        #expect(try await eventually(timeout: .seconds(20)) { try await daemon.pairingProperty(client, path, "State").stringValue == "reviewing" })
        _ = try await daemon.call(client, BatonInterface.pairingSession, "Commit", path: path)
    }
    for (daemon, path) in [(acceptor, pathA), (initiator, pathB)] {
        #expect(try await eventually(timeout: .seconds(20)) { try await daemon.pairingProperty(client, path, "State").stringValue == "paired" })
    }
}

/// A free TCP port on `address` (bound and released: another process may take it first, which
/// only makes the daemon's start fail visibly).
func freeTCPPort(on address: String = "127.0.0.1") -> UInt16 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var socketAddress = sockaddr_in()
    socketAddress.sin_family = sa_family_t(AF_INET)
    socketAddress.sin_port = 0
    inet_pton(AF_INET, address, &socketAddress.sin_addr)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &socketAddress) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) } }
    _ = withUnsafeMutablePointer(to: &socketAddress) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
    return UInt16(bigEndian: socketAddress.sin_port)
}

/// The test's two apps: on the source, one that publishes an activity with a document attached by
/// descriptor and counts WasContinued; on the receiver, a handler that reads the document it gets
/// and records its digest. Fakes of real apps, on their own bus connections.
final class DocumentApps: @unchecked Sendable {
    struct Delivery: Sendable, Equatable {
        var documentID: String?
        var digest: [UInt8]?
    }

    let type: String
    let sourceApp: DBusConnection
    let receiverApp: DBusConnection
    /// What the apps were told, shared with their method handlers.
    private final class Records: Sendable {
        let deliveries = Mutex<[Delivery]>([])
        let failures = Mutex<[String]>([])
        let continued = Mutex(0)
        let saves = Mutex(0)
        let saveHook = Mutex<(@Sendable (Int) async -> Void)?>(nil)
    }
    private let records = Records()
    let directory: URL

    init(bus: TestBus, type: String) async throws {
        self.type = type
        directory = bus.directory.appendingPathComponent("apps")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        sourceApp = try DBusConnection(bus: .address(bus.address))
        receiverApp = try DBusConnection(bus: .address(bus.address))
        let records = self.records
        try await sourceApp.export([try InterfaceFiles.interface("org.baton.ActivitySource1") { call in
            if call.member == "WasContinued" { records.continued.withLock { $0 += 1 } }
            guard call.member == "WillSave" else { return [] }
            let count = records.saves.withLock { $0 += 1; return $0 }
            if let hook = records.saveHook.withLock({ $0 }) { await hook(count) }
            return [.propertyDictionary([:])]
        }], at: "/source")
        try await receiverApp.export([try InterfaceFiles.interface("org.baton.ActivityHandler1") { call in
            switch call.member {
            case "WillContinue": return [.boolean(true)]
            case "Continue":
                let document = call.arguments.count > 3 ? call.arguments[3].asDictionary?["Document"]?.asDictionary : nil
                var delivery = Delivery(documentID: document?["Id"]?.stringValue)
                if let descriptor = document?["Fd"]?.unixFDValue {
                    delivery.digest = Self.digest(of: descriptor)
                    Glibc.close(descriptor)
                }
                records.deliveries.withLock { $0.append(delivery) }
            default:
                records.failures.withLock { $0.append(call.arguments.count > 1 ? call.arguments[1].stringValue ?? "" : "") }
            }
            return []
        }], at: "/handler")
    }

    static func digest(of descriptor: Int32) -> [UInt8] {
        let hash = SHA256Stream()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var offset: off_t = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, offset) }
            guard count > 0 else { break }
            hash.update(Array(buffer[0..<count]))
            offset += off_t(count)
        }
        return hash.finish()
    }

    var allDeliveries: [Delivery] { records.deliveries.withLock { $0 } }
    var wasContinued: Int { records.continued.withLock { $0 } }
    /// WillSave calls so far (a fetch of an activity that needs saving, and a claim's save).
    var willSaves: Int { records.saves.withLock { $0 } }
    /// Runs in the source app's WillSave, with the count of WillSave calls so far, before it answers.
    func onWillSave(_ hook: (@Sendable (Int) async -> Void)?) { records.saveHook.withLock { $0 = hook } }
    /// The categories of FailedToContinue the handler heard.
    var failures: [String] { records.failures.withLock { $0 } }

    /// The receiver's handler, registered with `daemon` (again after each of its starts).
    func registerHandler(on daemon: KillableBatond) async throws {
        _ = try await receiverApp.call(destination: daemon.busName, path: BatonObjectPath.manager, interface: BatonInterface.manager,
                                       method: "RegisterHandler", arguments: [.objectPath("/handler"), .stringArray([type])], timeout: .seconds(10))
    }

    /// Publishes a new current activity on `daemon` carrying `bytes` as `documentID`; returns its path.
    /// `needsSave`: the app is asked to save (WillSave) before the activity or its session leaves.
    func publish(on daemon: KillableBatond, title: String, documentID: String, bytes: [UInt8], needsSave: Bool = false) async throws -> String {
        let path = try #require(try await sourceApp.call(destination: daemon.busName, path: BatonObjectPath.manager, interface: BatonInterface.manager,
            method: "CreateActivity", arguments: [.string(type), .string(title), .propertyDictionary([:]),
                                                  .propertyDictionary(["Source": .objectPath("/source"), "NeedsSave": .boolean(needsSave)])],
            timeout: .seconds(10)).first?.objectPathValue)
        try await attach(bytes, as: documentID, to: path, on: daemon)
        _ = try await sourceApp.call(destination: daemon.busName, path: path, interface: BatonInterface.activity, method: "BecomeCurrent", timeout: .seconds(10))
        return path
    }

    /// AttachDocument with a descriptor of a file holding `bytes`.
    func attach(_ bytes: [UInt8], as documentID: String, to path: String, on daemon: KillableBatond) async throws {
        let file = directory.appendingPathComponent("\(documentID)-\(SHA256.hash(bytes).hexString.prefix(8))").path
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        let descriptor = open(file, O_RDONLY | O_CLOEXEC)
        defer { Glibc.close(descriptor) }
        _ = try await sourceApp.call(destination: daemon.busName, path: path, interface: BatonInterface.activity, method: "AttachDocument",
                                     arguments: [.unixFD(descriptor), .string("application/octet-stream"), .string(documentID)], timeout: .seconds(30))
    }

    func close() {
        sourceApp.close()
        receiverApp.close()
    }
}

/// `count` bytes that differ for every `seed` (xorshift64), so each round's document is its own.
/// Eight bytes a step: byte by byte, a debug build spent seconds of a shared pool thread on the
/// megabytes these tests make.
func documentBytes(count: Int, seed: UInt32) -> [UInt8] {
    var state = UInt64(seed) << 32 | 0x9E37_79B9
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        let raw = UnsafeMutableRawBufferPointer(buffer)
        var offset = 0
        while offset < count {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            if offset + 8 <= count {
                raw.storeBytes(of: state.littleEndian, toByteOffset: offset, as: UInt64.self)
            } else {
                for index in offset..<count { raw[index] = UInt8(truncatingIfNeeded: state >> (8 * UInt64(index - offset))) }
            }
            offset += 8
        }
        initialized = count
    }
}
