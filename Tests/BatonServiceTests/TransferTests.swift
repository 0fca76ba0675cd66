// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import BatonTransport
import Foundation
import Testing
@testable import BatonService

/// One whole daemon in-process: ring, activities and transfer on one bus connection, its own state
/// directory, TLS on 127.0.0.1. No radio: discovery is left out, the transfer is real.
struct TransferNode {
    let connection: DBusConnection
    let ring: RingService
    let activityService: ActivityService
    var activities: Activities { activityService.activities }
    var handlers: Handlers { activityService.handlers }
    let transfer: TransferService
    let parts: DaemonParts
    let busName: String
    let stateDirectory: String

    var continuation: ContinuationService { parts.continuation }
    var ringNode: RingNode {
        RingNode(connection: connection, service: ring, pairing: parts.pairing, discovery: parts.discovery, bus: parts.bus, busName: busName,
                 stateDirectory: stateDirectory)
    }

    static func start(_ bus: TestBus, name: String, radio: (any RadioPort)? = nil,
                      continuation: ContinuationService.Configuration = .init(),
                      clock: any WallClock = SystemWallClock()) async throws -> TransferNode {
        let connection = try DBusConnection(bus: .address(bus.address))
        let directory = bus.directory.appendingPathComponent("state-\(name)").path
        let ring = try RingService(store: RingStore(directory: StateDirectory(path: directory)),
                                   radio: radio, clock: SystemWallClock(),
                                   configuration: .init(deviceName: name, listenHost: "127.0.0.1"), log: { _ in })
        await ring.start()
        let busName = "org.baton.test.\(name)"
        let activityService = ActivityService(
            connection: connection, configuration: ServiceConfiguration(busName: busName, saveTimeout: .milliseconds(800)),
            publisher: ring.radio, desktopEntries: XDGDesktopEntryScanner(dataDirectories: []),
            logger: CollectingLog())
        try await activityService.start()
        _ = try await connection.requestName(busName, flags: [.doNotQueue])
        let parts = try await DaemonParts.start(connection: connection, ring: ring, activities: activityService,
                                                transfer: .init(listenHost: "127.0.0.1"), clock: clock, continuation: continuation,
                                                clipboardFiles: directory + "/clipboard-files", log: { _ in })
        return TransferNode(connection: connection, ring: ring, activityService: activityService, transfer: parts.transfer, parts: parts,
                            busName: busName, stateDirectory: directory)
    }

    var deviceID: DeviceID { get async { await ring.deviceID } }

    func stop() async {
        await parts.stop(activities: activityService)
        connection.close()
    }
}

/// Pairs two nodes through their D-Bus API, both users confirming.
func pair(_ a: TransferNode, _ b: TransferNode, client: DBusConnection) async throws {
    let p = try await startPairing(a.ringNode, b.ringNode, client: client)
    try await confirmAndCommit(a.ringNode, b.ringNode, p, client: client)
    for (node, path) in [(a.ringNode, p.pathA), (b.ringNode, p.pathB)] {
        #expect(try await eventually(timeout: .seconds(10)) { try await node.property(client, path, "State").stringValue == "paired" })
    }
}

/// A source app on `node`: an activity with NeedsSave whose WillSave moves it to page 43, and a
/// record of every WasContinued.
final class FakeSourceApp: @unchecked Sendable {
    private let lock = NSLock()
    private var continued: [String] = []
    private var saves = 0
    let connection: DBusConnection
    var path = ""

    init(bus: TestBus) throws { connection = try DBusConnection(bus: .address(bus.address)) }

    var wasContinued: [String] { lock.withLock { continued } }
    var willSaveCount: Int { lock.withLock { saves } }

    func publish(on node: TransferNode) async throws {
        try await connection.export([DBusInterface("org.baton.ActivitySource1", methods: [
            DBusMethod("WillSave", in: [.init("activity", "o")], out: [.init("changes", "a{sv}")]) { [weak self] _ in
                self?.lock.withLock { self?.saves += 1 }
                return [.propertyDictionary(["UserInfo": .propertyDictionary(["page": .int64(43)]), "Title": .string("Chapter 3")])]
            },
            DBusMethod("WasContinued", in: [.init("activity", "o"), .init("device", "s")]) { [weak self] call in
                self?.lock.withLock { self?.continued.append(call.arguments.last?.stringValue ?? "") }
                return []
            },
        ])], at: "/source")
        let reply = try await connection.call(
            destination: node.busName, path: "/org/baton", interface: "org.baton.Manager1", method: "CreateActivity",
            arguments: [.string("org.example.Reader.reading"), .string("Chapter 2"), .propertyDictionary(["page": .int64(42)]),
                        .propertyDictionary(["NeedsSave": .boolean(true), "Source": .objectPath("/source"),
                                             "WebpageURL": .string("https://example.org/book#2")])])
        path = try #require(reply.first?.objectPathValue)
        _ = try await connection.call(destination: node.busName, path: path, interface: "org.baton.Activity1", method: "BecomeCurrent")
        #expect(await eventually { await node.ring.radio.currentPublication() != nil })
    }
}

/// A handler app on `node` for the reader type, recording Continue calls.
func registerHandler(on node: TransferNode, bus: TestBus) async throws -> (DBusConnection, CallRecorder) {
    let app = try DBusConnection(bus: .address(bus.address))
    let recorder = CallRecorder()
    try await app.export([try InterfaceFiles.interface("org.baton.ActivityHandler1") { call in
        recorder.append(call)
        return call.member == "WillContinue" ? [.boolean(true)] : []
    }], at: "/handler")
    _ = try await app.call(destination: node.busName, path: "/org/baton", interface: "org.baton.Manager1", method: "RegisterHandler",
                           arguments: [.objectPath("/handler"), .stringArray(["org.example.Reader.reading"])])
    return (app, recorder)
}

extension TransportError {
    var isConnectionFailure: Bool {
        if case .connectionFailed = self { return true }
        return false
    }
}

/// Tries a TLS handshake plus one Hello with `identity`; true when the server answered.
func handshakeSucceeds(identity: Ed25519PrivateKey, serverKey: [UInt8], port: UInt16) async -> Bool {
    guard let connector = try? TLSConnector(identity: identity, pins: { PinSet([serverKey]) }),
          let channel = try? await connector.connect(host: "127.0.0.1", port: port, timeout: .seconds(3)) else { return false }
    defer { channel.close() }
    let hello = HelloMessage(deviceID: DeviceID(identityKey: identity.publicKey), rosterDigest: 0, maxFramePayload: 1024)
    // A refused client sees the connection close where it waits for the server's proof (protocol §8.1),
    // or, should the refusal come later, on its first read.
    guard (try? await channel.send(Frame(type: .hello, requestID: 1, payload: hello.payload))) != nil,
          let reply = try? await channel.receive(timeout: .seconds(120)) else { return false }
    return reply.type == .hello
}

@Suite("BatonServiceTests: authenticated transfer between ring members", .serialized)
struct TransferTests {
    @Test func fetchDeliversTheSourcesStateAndWasContinuedIsSentOncePerRequestID() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        let idA = await a.deviceID
        // The pairing left B the endpoint of A's TLS listener.
        #expect(await b.ring.endpoints(of: idA).contains("127.0.0.1:\(a.transfer.port)"))

        let source = try FakeSourceApp(bus: bus)
        try await source.publish(on: a)
        let (handlerApp, handler) = try await registerHandler(on: b, bus: bus)
        defer { handlerApp.close() }

        // By hand over D-Bus: fetch, deliver to B's handler, ActivityContinued back to A.
        let reply = try await b.ringNode.call(client, BatonInterface.ring, "Continue", [.string("alpha"), .string("org.example.Reader.reading")])
        #expect(reply == [.string("delivered")])
        #expect(handler.members == ["WillContinue", "Continue"])
        let delivered = try #require(handler.calls.last)
        // WillSave ran on A before the state left: the handler sees the saved page and title.
        #expect(delivered.argument(1) == .string("Chapter 3"))
        #expect(delivered.argument(2)?.asDictionary?["page"]?.unwrapped == .int64(43))
        #expect(await eventually { source.wasContinued == ["beta"] })

        // The client API: the payload matches what the app published (after WillSave).
        let keysOfA = DerivedKeys(secret: await a.ring.keeper.ownSecret)
        let hash = keysOfA.typeHash("org.example.Reader.reading")
        let record = try await b.transfer.fetch(member: idA, typeHash: hash, revision: ActivityReference.anyRevision)
        let publication = try #require(await a.ring.radio.currentPublication())
        #expect(record.activityType == "org.example.Reader.reading")
        #expect(record.title == "Chapter 3")
        #expect(record.userInfo == ["page": .integer(43)])
        #expect(record.webpageURL == "https://example.org/book#2")
        #expect(record.revision <= publication.revision)
        // The exact revision works too; a stale one or a type hash under another key does not.
        let exact = try await b.transfer.fetch(member: idA, typeHash: hash, revision: publication.revision)
        #expect(exact.userInfo == record.userInfo)
        await #expect(throws: TransferError.remote(ErrorFrame(code: .unknownActivity, message: "no such current activity"))) {
            _ = try await b.transfer.fetch(member: idA, typeHash: hash, revision: (publication.revision &+ 5) & AdvertBody.maxRevision)
        }
        let wrongKey = DerivedKeys(secret: await b.ring.keeper.ownSecret).typeHash("org.example.Reader.reading")
        await #expect(throws: TransferError.self) { _ = try await b.transfer.fetch(member: idA, typeHash: wrongKey, revision: ActivityReference.anyRevision) }

        // A retried ActivityContinued (same request id, new connection) reaches the app once.
        let requestID = b.transfer.makeRequestID()
        try await b.transfer.sendContinued(member: idA, typeHash: hash, revision: exact.revision, requestID: requestID)
        try await b.transfer.sendContinued(member: idA, typeHash: hash, revision: exact.revision, requestID: requestID)
        #expect(await eventually { source.wasContinued.count == 2 })
        try await Task.sleep(for: .milliseconds(300))
        #expect(source.wasContinued == ["beta", "beta"])
        // A continuation that was never fetched is refused.
        await #expect(throws: TransferError.self) {
            try await b.transfer.sendContinued(member: idA, typeHash: hash, revision: (exact.revision &+ 9) & AdvertBody.maxRevision)
        }
        source.connection.close()
        await a.stop()
        await b.stop()
    }

    @Test func aBrokenConnectionIsRetriedWithTheSameRequestID() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        let idA = await a.deviceID
        let source = try FakeSourceApp(bus: bus)
        try await source.publish(on: a)
        let hash = DerivedKeys(secret: await a.ring.keeper.ownSecret).typeHash("org.example.Reader.reading")
        let record = try await b.transfer.fetch(member: idA, typeHash: hash, revision: ActivityReference.anyRevision)

        // A fake endpoint holding A's identity answers Hello, then drops the connection on the request.
        let keyOfB = await b.ring.keeper.identity.publicKey
        let breaking = try TLSListener(identity: await a.ring.keeper.identity, pins: { PinSet([keyOfB]) }, host: "127.0.0.1", port: 0)
        defer { breaking.close() }
        let versionOfA = await a.ring.rosterDigest
        let fake = Task {
            guard let channel = try? await breaking.accept() else { return [UInt32]() }
            var ids: [UInt32] = []
            while let frame = try? await channel.receive(timeout: .seconds(5)) {
                guard frame.type == .hello else { ids.append(frame.requestID); channel.close(); break }
                let hello = HelloMessage(deviceID: idA, rosterDigest: versionOfA, maxFramePayload: 1024)
                try? await channel.send(Frame(type: .hello, requestID: frame.requestID, payload: hello.payload))
            }
            return ids
        }
        await b.ring.endpointWorked(idA, "127.0.0.1:\(breaking.port)")
        #expect(await b.ring.endpoints(of: idA).first == "127.0.0.1:\(breaking.port)")

        try await b.transfer.sendContinued(member: idA, typeHash: hash, revision: record.revision)
        let brokenIDs = await fake.value
        let requestID = try #require(brokenIDs.first)
        #expect(await eventually { source.wasContinued.count == 1 })
        // A already answered that id: the retry on the real endpoint used it, so a repeat is not new.
        try await b.transfer.sendContinued(member: idA, typeHash: hash, revision: record.revision, requestID: requestID)
        try await Task.sleep(for: .milliseconds(300))
        #expect(source.wasContinued.count == 1)
        // The endpoint that worked is first again.
        #expect(await b.ring.endpoints(of: idA).first == "127.0.0.1:\(a.transfer.port)")
        source.connection.close()
        await a.stop()
        await b.stop()
    }

    @Test func anUnpairedDeviceIsRefusedAtTheHandshake() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        let keyOfA = await a.ring.keeper.identity.publicKey
        #expect(await handshakeSucceeds(identity: await b.ring.keeper.identity, serverKey: keyOfA, port: a.transfer.port))
        let stranger = try Ed25519PrivateKey(seed: SystemRandom().bytes(32))
        #expect(await handshakeSucceeds(identity: stranger, serverKey: keyOfA, port: a.transfer.port) == false)
        await a.stop()
        await b.stop()
    }

    @Test func aStrangerConnectingToTheTransferPortLearnsNoIdentity() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha")
        // A refuses the stranger's proof before it sends its own (§8.1), so the connection just closes;
        // had A shown a certificate with its key or sent its proof, the stranger (pinning nobody) would
        // fail otherwise.
        let stranger = try TLSConnector(identity: try Ed25519PrivateKey(), pins: { PinSet([]) })
        for _ in 0..<2 {
            do {
                let channel = try await stranger.connect(host: "127.0.0.1", port: a.transfer.port, timeout: .seconds(3))
                Issue.record("a stranger got a channel to \(channel.peerDeviceID)")
            } catch {
                #expect(error == .closed || error.isConnectionFailure, "\(error)")
            }
        }
        await a.stop()
    }

    @Test func removalReachesTheRingAndShutsTheRemovedMemberOut() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let c = try await TransferNode.start(bus, name: "gamma")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        // C joins through A; A tells B (RingSync after pairing).
        try await pair(a, c, client: client)
        let idA = await a.deviceID, idC = await c.deviceID
        #expect(await eventually(timeout: .seconds(10)) { await b.ring.isMember(idC) })
        // B knows C only from the roster (no endpoint for it); the handshakes below use the ports directly.
        let keyOfA = await a.ring.keeper.identity.publicKey, keyOfB = await b.ring.keeper.identity.publicKey
        let identityOfC = await c.ring.keeper.identity
        #expect(await handshakeSucceeds(identity: identityOfC, serverKey: keyOfA, port: a.transfer.port))
        #expect(await handshakeSucceeds(identity: identityOfC, serverKey: keyOfB, port: b.transfer.port))

        // C holds a channel open to A across the removal.
        let connectorOfC = try TLSConnector(identity: identityOfC, pins: { PinSet([keyOfA]) })
        let openChannel = try await connectorOfC.connect(host: "127.0.0.1", port: a.transfer.port, timeout: .seconds(3))
        defer { openChannel.close() }
        let helloOfC = HelloMessage(deviceID: idC, rosterDigest: 0, maxFramePayload: 1024)
        try await openChannel.send(Frame(type: .hello, requestID: 1, payload: helloOfC.payload))
        #expect(try await openChannel.receive(timeout: .seconds(120)).type == .hello)
        #expect(await a.transfer.openChannelCount(from: idC) == 1)

        let secretOfB = await b.ring.keeper.ownSecret
        let oldSecretOfA = await a.ring.keeper.ownSecret
        _ = try await a.ringNode.call(client, BatonInterface.pairing, "Remove", [.string(idC.shortForm)])
        // A closed C's open channel itself (TLS does not re-check pins on an open connection).
        await #expect(throws: TransportError.self) { _ = try await openChannel.receive(timeout: .seconds(3)) }
        #expect(await a.transfer.openChannelCount(from: idC) == 0)
        // B learns by RingSync: C is gone and B rotates its own secret.
        #expect(await eventually(timeout: .seconds(10)) { await !b.ring.isMember(idC) })
        #expect(await eventually { await b.ring.keeper.ownSecret.generation == secretOfB.generation + 1 })
        #expect(await b.ring.keeper.state.roster.removed.contains(idC))
        // The radio actor follows the ring (its matcher is updated after the ring state).
        #expect(await eventually { await b.ring.radio.matcher.memberIDs == [idA] })
        // B's new secret reached A in B's RingSync answer.
        let rotatedB = await b.ring.keeper.ownSecret, idB = await b.deviceID
        #expect(await eventually { await a.ring.keeper.state.roster.members[idB]?.secret == rotatedB })
        // Issue 23: C's tombstone keeps its key, so C may still connect, for Hello and RingSync only
        // (its marks count, and it learns it was removed, protocol §6.2); no other request is served.
        #expect(await handshakeSucceeds(identity: identityOfC, serverKey: keyOfA, port: a.transfer.port) == true)
        #expect(await handshakeSucceeds(identity: identityOfC, serverKey: keyOfB, port: b.transfer.port) == true)
        // C holds only the old secrets: adverts sealed with the new ones do not open for it.
        let newSecretOfA = await a.ring.keeper.ownSecret
        #expect(newSecretOfA.generation == oldSecretOfA.generation + 1)
        var matcherOfC = await c.ring.radio.matcher
        let epoch = Protocol.epoch(unixSeconds: SystemWallClock().unixSeconds())
        let body = AdvertBody(typeHash: .none, revision: 1, flags: [])
        func sealed(_ secret: AdvertisingSecret) -> [UInt8] {
            let keys = DerivedKeys(secret: secret)
            return RingAdvert.seal(body: body, keys: keys, epoch: keys.epochMaterial(epoch), sequence: 0)
        }
        for secret in [newSecretOfA, await b.ring.keeper.ownSecret] {
            #expect(throws: WireError.self) { _ = try matcherOfC.receive(sealed(secret)) }
        }
        // Control: what C still holds opens adverts under A's old secret.
        #expect(throws: Never.self) { _ = try matcherOfC.receive(sealed(oldSecretOfA)) }
        await a.stop()
        await b.stop()
        await c.stop()
    }

    @Test func aMemberAwayDuringTheRemovalLearnsItAtItsNextHello() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let a = try await TransferNode.start(bus, name: "alpha"), b = try await TransferNode.start(bus, name: "beta")
        let c = try await TransferNode.start(bus, name: "gamma")
        let client = try DBusConnection(bus: .address(bus.address))
        try await pair(a, b, client: client)
        try await pair(a, c, client: client)
        let idA = await a.deviceID, idC = await c.deviceID
        #expect(await eventually(timeout: .seconds(10)) { await b.ring.isMember(idC) })
        // B goes away (its listener closes), then A removes C: the RingSync to B fails.
        await b.transfer.stop()
        _ = try await a.ringNode.call(client, BatonInterface.pairing, "Remove", [.string(idC.shortForm)])
        try await Task.sleep(for: .milliseconds(500))
        #expect(await b.ring.isMember(idC))
        // B's next contact with A: Hello shows differing ring versions, RingSync follows.
        let hash = DerivedKeys(secret: await a.ring.keeper.ownSecret).typeHash("org.example.Reader.reading")
        await #expect(throws: TransferError.self) { _ = try await b.transfer.fetch(member: idA, typeHash: hash, revision: ActivityReference.anyRevision) }
        #expect(await !b.ring.isMember(idC))
        #expect(await b.ring.keeper.state.roster.removed.contains(idC))
        #expect(await b.ring.rosterDigest == (await a.ring.rosterDigest))
        // B rotated its secret on learning of the removal, and A has the new one.
        let secretOfB = await b.ring.keeper.ownSecret
        #expect(await a.ring.keeper.state.roster.members[await b.deviceID]?.secret == secretOfB)
        await a.stop()
        await b.stop()
        await c.stop()
    }
}

@Suite struct TransferOptionTests {
    @Test func portOptionIsParsedAndChecked() throws {
        guard case .run(let options) = try DaemonOptions.parse(["--session", "--state-dir", "/tmp/x", "--port", "4100"], environment: [:]) else {
            Issue.record("no run command")
            return
        }
        #expect(options.transferPort == 4100)
        guard case .run(let defaults) = try DaemonOptions.parse([], environment: [:]) else { return }
        #expect(defaults.transferPort == 0)
        for bad in ["-1", "65536", "x"] {
            #expect(throws: DaemonOptions.UsageError.self) { try DaemonOptions.parse(["--port", bad], environment: [:]) }
        }
    }

    @Test func companyIDOptionIsParsedAndChecked() throws {
        guard case .run(let hex) = try DaemonOptions.parse(["--company-id", "0x004C"], environment: [:]),
              case .run(let decimal) = try DaemonOptions.parse(["--company-id", "224"], environment: [:]),
              case .run(let defaults) = try DaemonOptions.parse([], environment: [:]) else {
            Issue.record("no run command")
            return
        }
        #expect(hex.companyID == 0x004C)
        #expect(decimal.companyID == 224)
        #expect(defaults.companyID == Protocol.defaultCompanyID)
        for bad in ["0x10000", "-1", "apple", ""] {
            #expect(throws: DaemonOptions.UsageError.self) { try DaemonOptions.parse(["--company-id", bad], environment: [:]) }
        }
    }

    @Test func endpointHintsPutTheObservedAddressFirstAndStayBounded() {
        #expect(RingService.formatEndpoint(host: "::1", port: 7) == "[::1]:7")
        let hints = { (texts: [String]) in texts.compactMap { try? Endpoint(parsing: $0) } }
        let merged = Endpoint.merge(new: hints(["a:1", "b:2"]), old: hints(["b:2", "c:3"] + (4...20).map { "h:\($0)" })).map(\.description)
        #expect(merged.prefix(3) == ["a:1", "b:2", "c:3"])
        #expect(merged.count == RingService.maxEndpointsPerMember)
        #expect(LocalAddresses.endpoints(listenHost: "127.0.0.1", port: 9) == ["127.0.0.1:9"])
        #expect(LocalAddresses.endpoints(listenHost: "0.0.0.0", port: 9).allSatisfy { !$0.hasPrefix("127.") && !$0.hasPrefix("[") })
    }
}
