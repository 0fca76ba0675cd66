// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// Descriptors this test process holds (/proc/self/fd).
/// Socket inodes of the TCP sockets listening on `port` (IPv4 and IPv6), from /proc/net.
func listeningSocketInodes(port: UInt16) -> Set<UInt64> {
    var inodes: Set<UInt64> = []
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            // sl local_address rem_address st ... inode (field 9); state 0A is LISTEN.
            guard fields.count > 9, fields[3] == "0A", let local = fields[1].split(separator: ":").last,
                  UInt16(local, radix: 16) == port, let inode = UInt64(fields[9]) else { continue }
            inodes.insert(inode)
        }
    }
    return inodes
}

/// Socket inodes this process holds open (/proc/self/fd links `socket:[N]`).
func openSocketInodes() -> Set<UInt64> {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return Set(names.compactMap { name -> UInt64? in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name),
              target.hasPrefix("socket:["), target.hasSuffix("]") else { return nil }
        return UInt64(target.dropFirst("socket:[".count).dropLast())
    })
}

extension RingNode {
    /// The PairingSession1 objects exported now (child nodes of the session prefix).
    func sessionObjects(_ client: DBusConnection) async throws -> [String] {
        let reply = try await client.call(destination: busName, path: BatonObjectPath.pairingSessionPrefix,
                                          interface: "org.freedesktop.DBus.Introspectable", method: "Introspect")
        let xml = try #require(reply.first?.stringValue)
        return xml.components(separatedBy: "<node name=\"").dropFirst().compactMap { $0.split(separator: "\"").first.map(String.init) }
    }

    func accept(_ client: DBusConnection, _ options: [String: DBusValue] = [:]) async throws -> String {
        try #require(try await call(client, BatonInterface.pairing, "Accept", [.propertyDictionary(options)]).first?.objectPathValue)
    }
}

/// Expects the D-Bus error `name` and returns its message.
func errorMessage(_ name: BatonErrorName, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async -> String {
    do {
        try await body()
        Issue.record("expected \(name.rawValue), got success", sourceLocation: sourceLocation)
    } catch let error as DBusError {
        #expect(error.name == name.rawValue, "\(error.description.prefix(200))", sourceLocation: sourceLocation)
        return error.message
    } catch {
        Issue.record("expected \(name.rawValue), got \(error)", sourceLocation: sourceLocation)
    }
    return ""
}

@Suite("BatonServiceTests: pairing sessions are bounded and end", .serialized)
struct PairingSessionLimitTests {
    @Test func acceptAndCancelThreeHundredTimesLeavesNoObjectsAndNoDescriptors() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let node = try await RingNode.start(bus, name: "alpha", pairingLimits: PairingLimits(finishedGrace: .milliseconds(20)))
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        // Warm up whatever the first sessions open once (dispatch sources, the bus connection's watches).
        for _ in 0..<5 {
            _ = try await node.call(client, BatonInterface.pairingSession, "Cancel", path: try await node.accept(client))
        }
        #expect(try await eventually { try await node.sessionObjects(client).isEmpty })
        // Each session's own listening socket, by inode (sockfs numbers are not reused soon; a count of
        // the process's descriptors also moved with the tests running beside this one).
        var listeners: Set<UInt64> = []
        for _ in 0..<300 {
            let path = try await node.accept(client, ["Host": .string("127.0.0.1")])
            let reply = try await client.call(destination: node.busName, path: path, interface: "org.freedesktop.DBus.Properties",
                                              method: "Get", arguments: [.string(BatonInterface.pairingSession), .string("Port")])
            let port = try #require(reply.first?.uint16Value)
            // /proc/net/tcp is read in pieces while other suites open and close sockets, so one read
            // can miss a line: read again before concluding.
            var inodes = listeningSocketInodes(port: port)
            for _ in 0..<20 where inodes.isEmpty {
                try await Task.sleep(for: .milliseconds(10))
                inodes = listeningSocketInodes(port: port)
            }
            #expect(!inodes.isEmpty, "no socket listens on the session's port \(port)")
            listeners.formUnion(inodes)
            _ = try await node.call(client, BatonInterface.pairingSession, "Cancel", path: path)
        }
        #expect(listeners.count >= 300)
        #expect(try await eventually(timeout: .seconds(10)) { try await node.sessionObjects(client).isEmpty })
        #expect(await node.pairing.sessionPaths().isEmpty)
        #expect(node.bus.sessionPaths.withLock { $0.isEmpty })
        // Every listener was closed: none of their sockets is still open in this process.
        let settled = await eventually(timeout: .seconds(5)) { openSocketInodes().isDisjoint(with: listeners) }
        #expect(settled, "\(openSocketInodes().intersection(listeners).count) of \(listeners.count) session listeners still open")
    }

    /// Within its grace a finished session is readable. The grace is long here (the run beside CPU hogs
    /// took over 700 ms between Cancel and GetAll): this test times nothing.
    @Test func aFinishedSessionStaysReadableForItsGrace() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let node = try await RingNode.start(bus, name: "alpha", pairingLimits: PairingLimits(finishedGrace: .seconds(120)))
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let path = try await node.accept(client)
        _ = try await node.call(client, BatonInterface.pairingSession, "Cancel", path: path)
        // The owner can still read how it ended, in the client's own coding.
        let reply = try await client.call(destination: node.busName, path: path, interface: BatonInterface.properties, method: "GetAll",
                                          arguments: [.string(BatonInterface.pairingSession)])
        let properties = try PairingSessionProperties(try #require(reply.first?.asDictionary))
        #expect(properties.knownState == .failed)
        #expect(properties.error == PairingFailureReason.rejected.rawValue)
        #expect(properties.role == "responder" && properties.port > 0 && properties.sessionID.count == 16)
        #expect(try await node.sessionObjects(client).count == 1)
    }

    /// After its grace the finished session goes, and its object with it.
    @Test func aFinishedSessionGoesAfterItsGrace() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let node = try await RingNode.start(bus, name: "alpha", pairingLimits: PairingLimits(finishedGrace: .milliseconds(200)))
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let path = try await node.accept(client)
        _ = try await node.call(client, BatonInterface.pairingSession, "Cancel", path: path)
        #expect(try await eventually(timeout: .seconds(120)) { try await node.sessionObjects(client).isEmpty })
        await expectError("org.freedesktop.DBus.Error.UnknownObject") { _ = try await node.property(client, path, "State") }
        await expectError("org.freedesktop.DBus.Error.UnknownObject") {
            _ = try await node.call(client, BatonInterface.pairingSession, "Cancel", path: path)
        }
    }

    @Test func theFifthConcurrentSessionIsRefusedWithLimitExceeded() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let node = try await RingNode.start(bus, name: "alpha")
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        // Four at once, started concurrently: the limit holds while they are still setting up.
        let started = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<6 { group.addTask { try? await node.accept(client) } }
            return try await group.reduce(into: [String]()) { if let path = $1 { $0.append(path) } }
        }
        #expect(started.count == 4)
        let message = await errorMessage(.limitExceeded) { _ = try await node.accept(client) }
        #expect(message.contains("4"))
        // Pair counts too.
        _ = await errorMessage(.limitExceeded) {
            _ = try await node.call(client, BatonInterface.pairing, "Pair",
                                    [.string("127.0.0.1:9"), .propertyDictionary(["SessionId": .string("0011223344556677")])])
        }
        // A cancelled one frees its slot (it is finished, though still shown for its grace).
        _ = try await node.call(client, BatonInterface.pairingSession, "Cancel", path: started[0])
        let fifth = try await node.accept(client)
        #expect(try await node.sessionObjects(client).count == 5)
        for path in started.dropFirst() + [fifth] {
            _ = try await node.call(client, BatonInterface.pairingSession, "Cancel", path: path)
        }
    }

    @Test(arguments: ["example.org", "", "999.1.1.1", "/run/baton.sock", "127.0.0.1:80", "[::1]", "fe80::1%lo", "127.0.0.1\n",
                      String(repeating: "x", count: 100_000)])
    func acceptRefusesAHostThatIsNotANumericAddress(host: String) async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let node = try await RingNode.start(bus, name: "alpha")
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let message = await errorMessage(.invalidArguments) { _ = try await node.accept(client, ["Host": .string(host)]) }
        #expect(message == "Host must be a numeric IPv4 or IPv6 address")
        #expect(await node.pairing.sessionPaths().isEmpty)
    }

    @Test func refusalsNeverEchoUnboundedCallerInput() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let node = try await RingNode.start(bus, name: "alpha")
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let huge = String(repeating: "A", count: 100_000)
        let session: [String: DBusValue] = ["SessionId": .string("0011223344556677")]
        var messages: [String] = []
        messages.append(await errorMessage(.invalidArguments) { _ = try await node.accept(client, [huge: .string("x")]) })
        messages.append(await errorMessage(.invalidArguments) { _ = try await node.accept(client, ["Host": .uint32(1)]) })
        messages.append(await errorMessage(.invalidArguments) {
            _ = try await node.call(client, BatonInterface.pairing, "Pair", [.string(huge + ":1"), .propertyDictionary(session)])
        })
        messages.append(await errorMessage(.invalidArguments) {
            _ = try await node.call(client, BatonInterface.pairing, "Pair", [.string("127.0.0.1:9"), .propertyDictionary(["SessionId": .string(huge)])])
        })
        messages.append(await errorMessage(.invalidArguments) {
            _ = try await node.call(client, BatonInterface.pairing, "Pair",
                                    [.string("127.0.0.1:9"), .propertyDictionary(session.merging(["AddressType": .string(huge)]) { $1 })])
        })
        // A name that does not resolve: quoted and cut.
        let name = String(repeating: "n", count: 60) + ".invalid"
        messages.append(await errorMessage(.unknownDevice) {
            _ = try await node.call(client, BatonInterface.pairing, "Pair", [.string(name + ":1"), .propertyDictionary(session)])
        })
        #expect(messages.last?.hasPrefix("cannot reach \"nnnn") == true)
        // A target longer than any endpoint (Endpoint.maxTextLength), or with control characters, is
        // not even parsed.
        messages.append(await errorMessage(.invalidArguments) {
            _ = try await node.call(client, BatonInterface.pairing, "Pair", [.string(name + "\nforged log line:1"), .propertyDictionary(session)])
        })
        messages.append(await errorMessage(.invalidArguments) {
            _ = try await node.call(client, BatonInterface.pairing, "Pair",
                                    [.string(String(repeating: "n", count: 280) + ":1"), .propertyDictionary(session)])
        })
        for message in messages {
            #expect(message.count <= 120, "\(message.prefix(200))")
            #expect(!message.contains("AAAAAAAAAA") && !message.contains("\n"))
        }
    }

    @Test func echoedTextIsCutAndPrintable() {
        #expect(echoed("abc") == "\"abc\"")
        #expect(echoed(String(repeating: "z", count: 100), limit: 5) == "\"zzzzz...\"")
        #expect(echoed("a\nb\u{202E}c\u{0}") == "\"a?b?c?\"")
        #expect(echoed("héllo wörld") == "\"héllo wörld\"")
    }
}

/// Daemon and client read and write Pairing1's options and PairingSession1's properties with one coding.
@Suite struct PairingCodingTests {
    @Test func optionsRoundTripThroughTheClientsEncoding() throws {
        #expect(try AcceptOptions(AcceptOptions(host: "::1").dbusValue) == AcceptOptions(host: "::1"))
        #expect(try AcceptOptions(AcceptOptions().dbusValue) == AcceptOptions())
        let pair = PairOptions(sessionID: "0011223344556677", addressType: "random")
        #expect(try PairOptions(pair.dbusValue) == pair)
        #expect(throws: BatonAPIError.self) { try PairOptions(AcceptOptions(host: "::1").dbusValue) }
        #expect(throws: BatonAPIError.self) { try PairOptions(.propertyDictionary([:])) }
        #expect(throws: BatonAPIError.self) { try AcceptOptions(.propertyDictionary(["Host": .objectPath("/x")])) }
    }

    @Test func sessionPropertiesFollowThePhase() throws {
        let id = try DeviceID(bytes: [UInt8](repeating: 7, count: 16))
        var progress = PairingProgress(role: .responder, sessionID: [1, 2, 3, 4, 5, 6, 7, 8], listeningPort: 4242)
        func shown() throws -> PairingSessionProperties { try PairingSessionProperties(RingBus.properties(progress)) }
        #expect(try shown() == PairingSessionProperties(state: "waiting", role: "responder", port: 4242, sessionID: "0102030405060708"))
        progress.connected()
        progress.codeShown("123456")
        #expect(try shown().knownState == .confirming && (try shown().code) == "123456")
        progress.paired(peerName: "beta", peerID: id)
        #expect(try shown() == PairingSessionProperties(state: "paired", role: "responder", code: "123456", peerName: "beta",
                                                        peerID: id.description, port: 4242, sessionID: "0102030405060708"))
        // Finished stays finished: a late failure changes nothing shown.
        #expect(progress.failed(.transport) == false)
        #expect(try shown().error == "")
    }
}
