// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonAvahi
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// scripts/avahi-test-env for daemon tests: a private "system" bus with a real avahi-daemon in a
/// network namespace of its own (192.168.231.1 on bt0). The daemons under test run inside that
/// namespace (`ip netns exec`), so their listeners and mDNS traffic never leave it; their D-Bus
/// sockets are paths, reachable from the test process outside. Skipped where the setup is
/// impossible, failing instead when BATON_REQUIRE_AVAHI=1.
struct AvahiNamespace: Sendable {
    static let script = InterfaceFiles.packageRoot.appendingPathComponent("scripts/avahi-test-env").path
    static let required = ProcessInfo.processInfo.environment["BATON_REQUIRE_AVAHI"] == "1"
    static let address = "192.168.231.1"

    static let unavailableReason: String? = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script, "check"]
        let output = ChildPipe()
        process.standardOutput = output
        process.standardError = output
        do { try launch(process) } catch { return "cannot run \(script): \(error)" }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus != 0 else { return nil }
        FileHandle.standardError.write(Data("BatonServiceTests: live Avahi tests skipped: \(text)\n".utf8))
        return text.isEmpty ? "avahi-test-env check failed" : text
    }()

    static var shouldRun: Bool { required || unavailableReason == nil }

    let id: String
    let busAddress: String
    var namespace: String { "baton-avahi-\(id)" }

    static func start() async throws -> AvahiNamespace {
        if let reason = unavailableReason { throw TestSetupError("avahi test environment unavailable: \(reason)") }
        let id = "svc" + String((0..<8).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement() ?? "x" })
        let (status, output, errors) = try await runTool("/bin/bash", [script, "start", id])
        guard status == 0, let address = output.split(separator: "\n").last.map(String.init), address.hasPrefix("unix:path=") else {
            _ = try? await runTool("/bin/bash", [script, "stop", id])
            throw TestSetupError("avahi-test-env start failed: \(output) \(errors)")
        }
        return AvahiNamespace(id: id, busAddress: address)
    }

    func stop() async { _ = try? await runTool("/bin/bash", [Self.script, "stop", id]) }
}

struct TestSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A real batond inside the namespace: D-Bus on the test bus, Avahi on the namespace's bus,
/// pairing and TLS on 192.168.231.1, no radio.
final class NamespacedDaemon: @unchecked Sendable {
    let busName: String
    let stateDirectory: String
    let logPath: String
    private let process: Process

    init(_ environment: AvahiNamespace, bus: TestBus, name: String, stateDirectory: String? = nil) throws {
        busName = "org.baton.test.\(name)"
        self.stateDirectory = stateDirectory ?? bus.directory.appendingPathComponent("state-\(name)").path
        logPath = bus.directory.appendingPathComponent("batond-\(name)-\(UUID().uuidString).log").path
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = ["netns", "exec", environment.namespace, try batondExecutable().path,
                             "--bus-address", bus.address, "--bus-name", busName, "--state-dir", self.stateDirectory,
                             "--no-radio", "--listen", AvahiNamespace.address, "--name", name,
                             "--avahi-bus", environment.busAddress]
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        try launch(process)
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The TLS port, from the daemon's start-up line.
    var transferPort: UInt16? {
        guard let range = log.range(of: "transfers on port ") else { return nil }
        return UInt16(log[range.upperBound...].prefix { $0.isNumber })
    }

    func stop() async {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    func call(_ client: DBusConnection, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
              path: String = BatonObjectPath.ring, timeout: Duration? = nil) async throws -> [DBusValue] {
        try await client.call(destination: busName, path: path, interface: interface, method: method, arguments: arguments, timeout: timeout)
    }

    func sessionProperty(_ client: DBusConnection, _ path: String, _ name: String) async throws -> DBusValue {
        let reply = try await client.call(destination: busName, path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                                          arguments: [.string(BatonInterface.pairingSession), .string(name)])
        return reply.first?.unwrapped ?? .string("")
    }

    /// Endpoint hints this daemon holds for the member called `name`.
    func endpoints(of name: String, _ client: DBusConnection) async throws -> [String] {
        let reply = try await call(client, BatonInterface.ring, "ListMembers")
        let member = (reply.first?.arrayValue ?? []).compactMap(\.asDictionary).first { $0["Name"]?.stringValue == name }
        return member?["Endpoints"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    func discover(_ client: DBusConnection, seconds: UInt32) async throws -> [[String: DBusValue]] {
        let reply = try await call(client, BatonInterface.pairing, "Discover", [.uint32(seconds)], timeout: .seconds(Int(seconds) + 20))
        return (reply.first?.arrayValue ?? []).compactMap(\.asDictionary)
    }
}

/// This device's own advertising secret, read from a stopped (or running) daemon's state.
func ownSecret(stateDirectory: String) throws -> AdvertisingSecret {
    let state = try #require(try RingStore(directory: StateDirectory(path: stateDirectory)).loadRing())
    return try RingKeeper(state: state).ownSecret
}

@Suite("BatonServiceTests: DNS-SD through a real avahi-daemon", .serialized,
       .enabled(if: AvahiNamespace.shouldRun, "needs root, avahi-daemon, dbus-daemon and network namespaces (scripts/avahi-test-env check)"))
struct AvahiDiscoveryTests {
    @Test func pairingAndRingEndpointsAreFoundThroughDNSSDAndStrangersAreIgnored() async throws {
        let environment = try await AvahiNamespace.start()
        let bus = try TestBus()
        var daemons: [NamespacedDaemon] = []
        do {
            try await scenario(environment, bus) { daemons.append($0) }
        } catch {
            for daemon in daemons { await daemon.stop(); print("--- \(daemon.busName)\n\(daemon.log)") }
            bus.stop()
            await environment.stop()
            throw error
        }
        for daemon in daemons { await daemon.stop() }
        bus.stop()
        await environment.stop()
    }

    private func scenario(_ environment: AvahiNamespace, _ bus: TestBus, started: (NamespacedDaemon) -> Void) async throws {
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let alpha = try NamespacedDaemon(environment, bus: bus, name: "alpha")
        started(alpha)
        var beta = try NamespacedDaemon(environment, bus: bus, name: "beta")
        started(beta)
        for daemon in [alpha, beta] {
            #expect(try await eventually(timeout: .seconds(10)) { try await client.nameHasOwner(daemon.busName) && daemon.transferPort != nil })
        }

        // (a) alpha accepts: beta discovers the session through _baton-pair._tcp, with the listener's address.
        let pathA = try #require(try await alpha.call(client, BatonInterface.pairing, "Accept", [.propertyDictionary([:])]).first?.objectPathValue)
        let session = try #require(try await alpha.sessionProperty(client, pathA, "SessionId").stringValue)
        let pairingPort = try #require(try await alpha.sessionProperty(client, pathA, "Port").uint16Value)
        var seen: [[String: DBusValue]] = []
        for _ in 0..<3 where !seen.contains(where: { $0["SessionId"]?.stringValue == session }) {
            seen = try await beta.discover(client, seconds: 2)
        }
        let entry = try #require(seen.first { $0["SessionId"]?.stringValue == session }, "beta discovered \(seen)")
        #expect(entry["Address"]?.stringValue == AvahiNamespace.address)
        #expect(entry["Port"]?.uint16Value == pairingPort)
        #expect(entry["Name"]?.stringValue?.hasPrefix("alpha (") == true)
        // A device does not list its own waiting session.
        #expect(try await alpha.discover(client, seconds: 1).allSatisfy { $0["SessionId"]?.stringValue != session })

        // bt-pair finds it too, and pairs by name without HOST:PORT.
        let btPair = try btPairExecutable().path
        let (listed, listing, _) = try await runTool(btPair, ["--bus", bus.address, "--bus-name", beta.busName, "--json",
                                                               "discover", "--seconds", "2"])
        #expect(listed == 0)
        #expect(listing.contains(session))
        let betaBusName = beta.busName
        let pairing = try RunningTool(btPair, ["--bus", bus.address, "--bus-name", betaBusName, "with", "alpha", "--seconds", "2",
                                               "--test-auto-confirm"])
        #expect(try await eventually(timeout: .seconds(20)) { try await alpha.sessionProperty(client, pathA, "State").stringValue == "confirming" })
        // beta's user types the code alpha shows; alpha's user types the second code beta then shows,
        // then commits the members beta brings.
        pairing.send((try #require(try await alpha.sessionProperty(client, pathA, "Code").stringValue)) + "\n")
        _ = try await alpha.call(client, BatonInterface.pairingSession, "ConfirmCode", [.string(try #require(await pairing.secondCode()))], path: pathA)
        #expect(try await eventually(timeout: .seconds(15)) { try await alpha.sessionProperty(client, pathA, "State").stringValue == "reviewing" })
        _ = try await alpha.call(client, BatonInterface.pairingSession, "Commit", path: pathA)
        let paired = await pairing.status()
        #expect(paired == 0, "bt-pair with alpha: \(pairing.stderr)")
        #expect(pairing.stderr.contains("Type the code shown on alpha"))
        // beta reports success as soon as its side is done; alpha may still be reading beta's roster.
        #expect(try await eventually(timeout: .seconds(15)) { try await alpha.sessionProperty(client, pathA, "State").stringValue == "paired" })
        // The pairing announcement is gone with the waiting session.
        let (nothing, _, _) = try await runTool(btPair, ["--bus", bus.address, "--bus-name", beta.busName, "discover", "--seconds", "1"])
        #expect(nothing == 4)

        // (b) Each publishes _baton._tcp under its keyed name on its TLS port.
        let avahi = try DBusConnection(bus: .address(environment.busAddress))
        defer { avahi.close() }
        let browser = AvahiBrowser(connection: avahi, serviceType: BatonServiceType.ring)
        try await browser.start()
        let epoch = Protocol.epoch(unixSeconds: SystemWallClock().unixSeconds())
        let alphaName = DerivedKeys(secret: try ownSecret(stateDirectory: alpha.stateDirectory)).mdnsInstanceName(epoch: epoch)
        let alphaPort = try #require(alpha.transferPort)
        #expect(await eventually(timeout: .seconds(15)) {
            await browser.endpoints.contains { $0.name == alphaName && $0.port == alphaPort && $0.address == AvahiNamespace.address }
        })
        let betaName = DerivedKeys(secret: try ownSecret(stateDirectory: beta.stateDirectory)).mdnsInstanceName(epoch: epoch)
        #expect(await eventually(timeout: .seconds(15)) { await browser.endpoints.contains { $0.name == betaName } })

        // (c) A stranger's _baton._tcp service, with a well-formed keyed name, on the same link.
        let stranger = AvahiPublisher(connection: avahi, serviceType: BatonServiceType.ring)
        let strangerSecret = AdvertisingSecret.generate(generation: 1, day: testDay, using: SystemRandom())
        try await stranger.publish(name: DerivedKeys(secret: strangerSecret).mdnsInstanceName(epoch: epoch), port: 4242)

        // Beta forgets every hint, restarts on a new TLS port and learns alpha's endpoint from DNS-SD alone.
        await beta.stop()
        // Avahi reports a known instance again only after its goodbye has expired (about 1 s); a
        // quicker restart on another port would be learned with the next epoch's name.
        #expect(await eventually(timeout: .seconds(30)) { await !browser.endpoints.contains { $0.name == betaName } })
        await browser.stop()
        let store = try RingStore(directory: StateDirectory(path: beta.stateDirectory))
        var peers = try store.loadPeers()
        for id in peers.keys { peers[id]?.endpoints = [] }
        try store.savePeers(peers)
        beta = try NamespacedDaemon(environment, bus: bus, name: "beta", stateDirectory: beta.stateDirectory)
        started(beta)
        #expect(try await eventually(timeout: .seconds(10)) { try await client.nameHasOwner(beta.busName) })
        let alphaEndpoint = "\(AvahiNamespace.address):\(alphaPort)"
        #expect(try await eventually(timeout: .seconds(20)) { try await beta.endpoints(of: "alpha", client) == [alphaEndpoint] })
        // And alpha moves beta's new port to the front of its hints. The port is logged once the
        // transfer service runs, which may be after the bus name is owned.
        #expect(await eventually(timeout: .seconds(10)) { beta.transferPort != nil })
        let betaPort = try #require(beta.transferPort)
        #expect(try await eventually(timeout: .seconds(20)) {
            try await alpha.endpoints(of: "beta", client).first == "\(AvahiNamespace.address):\(betaPort)"
        })
        // The stranger was resolved meanwhile, and mapped to nobody.
        try await Task.sleep(for: .seconds(1))
        for (daemon, other) in [(alpha, "beta"), (beta, "alpha")] {
            #expect(try await daemon.endpoints(of: other, client).allSatisfy { !$0.hasSuffix(":4242") })
        }
        await stranger.close()
    }
}

func btPairExecutable() throws -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("bt-pair"),
        InterfaceFiles.packageRoot.appendingPathComponent(".build/debug/bt-pair"),
    ]
    return try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }, "build bt-pair first")
}

/// Without Avahi: the keyed-name mapping on its own, and Discover's answer.
@Suite struct DiscoveryMappingTests {
    @Test func aMembersKeyedNameBecomesItsFirstHintAndStrangersMapToNobody() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha"), b = try await RingNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let p = try await startPairing(a, b, client: client)
        try await confirmAndCommit(a, b, p, client: client)
        #expect(try await eventually(timeout: .seconds(10)) { try await a.property(client, p.pathA, "State").stringValue == "paired" })

        let epoch = Protocol.epoch(unixSeconds: SystemWallClock().unixSeconds())
        let keysB = DerivedKeys(secret: await b.service.keeper.ownSecret)
        let idB = await b.service.deviceID
        let before = await a.service.endpoints(of: idB)
        #expect(await a.discovery.discoveredRingService(name: "0123456789abcdef", address: "10.0.0.9", port: 4242) == nil)
        let stranger = DerivedKeys(secret: AdvertisingSecret.generate(generation: 1, day: testDay, using: SystemRandom()))
        #expect(await a.discovery.discoveredRingService(name: stranger.mdnsInstanceName(epoch: epoch), address: "10.0.0.9", port: 4242) == nil)
        #expect(await a.discovery.discoveredRingService(name: keysB.mdnsInstanceName(epoch: epoch - 2), address: "10.0.0.9", port: 4242) == nil)
        #expect(await a.service.endpoints(of: idB) == before)

        // Previous epoch (a slow clock), upper-case as DNS may fold it: still the member.
        let name = keysB.mdnsInstanceName(epoch: epoch - 1).uppercased()
        #expect(await a.discovery.discoveredRingService(name: name, address: "10.0.0.7", port: 4100) == idB)
        #expect(await a.service.endpoints(of: idB).first == "10.0.0.7:4100")
        #expect(await a.discovery.discoveredRingService(name: keysB.mdnsInstanceName(epoch: epoch), address: "fd00::7", port: 4100) == idB)
        #expect(await a.service.endpoints(of: idB).first == "[fd00::7]:4100")
        // Link-local IPv6 has no scope here: not a usable hint.
        #expect(await a.discovery.discoveredRingService(name: keysB.mdnsInstanceName(epoch: epoch), address: "fe80::7", port: 4100) == nil)
        // Persisted, and bounded like every hint list.
        #expect(try RingStore(directory: StateDirectory(path: a.stateDirectory)).loadPeers()[idB]?.endpoints.first == "[fd00::7]:4100")
        for port in UInt16(5000)..<5020 {
            await a.discovery.discoveredRingService(name: keysB.mdnsInstanceName(epoch: epoch), address: "10.0.0.8", port: port)
        }
        #expect(await a.service.endpoints(of: idB).count == RingService.maxEndpointsPerMember)
    }

    @Test func discoverWithoutAvahiIsNotReadyAndChecksItsArgument() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await RingNode.start(bus, name: "alpha")
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        for (seconds, expected) in [(UInt32(0), BatonErrorName.invalidArguments), (31, BatonErrorName.invalidArguments),
                                    (1, BatonErrorName.notReady)] {
            do {
                _ = try await a.call(client, BatonInterface.pairing, "Discover", [.uint32(seconds)])
                Issue.record("Discover(\(seconds)) succeeded")
            } catch let error as DBusError {
                #expect(error.name == expected.rawValue)
            }
        }
    }

    @Test func pairingInstanceNamesFitDNSSD() {
        let sid: [UInt8] = [0xab, 0xcd, 1, 2, 3, 4, 5, 6]
        #expect(DiscoveryService.pairingInstanceName(deviceName: "laptop", sessionID: sid) == "laptop (abcd)")
        let long = DiscoveryService.pairingInstanceName(deviceName: String(repeating: "é", count: 40), sessionID: sid)
        #expect(long.utf8.count <= 63 && long.hasSuffix(" (abcd)"))
    }

    @Test func avahiOptionsAreParsed() throws {
        guard case .run(let defaults) = try DaemonOptions.parse(["--session", "--state-dir", "/tmp/x"], environment: [:]) else {
            Issue.record("no run"); return
        }
        #expect(defaults.avahiBus == .system)
        guard case .run(let off) = try DaemonOptions.parse(["--session", "--state-dir", "/tmp/x", "--no-avahi"], environment: [:]),
              case .run(let other) = try DaemonOptions.parse(["--session", "--state-dir", "/tmp/x", "--avahi-bus", "unix:path=/b"], environment: [:])
        else { Issue.record("no run"); return }
        #expect(off.avahiBus == nil)
        #expect(other.avahiBus == .address("unix:path=/b"))
        #expect(throws: DaemonOptions.UsageError.self) {
            _ = try DaemonOptions.parse(["--session", "--state-dir", "/tmp/x", "--no-avahi", "--avahi-bus", "unix:path=/b"], environment: [:])
        }
    }
}
