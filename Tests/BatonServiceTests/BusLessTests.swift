// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonAPI
import BatonCore
import BatonServiceFakes
import BatonStore
import BatonTransport
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// A daemon's ring side without any bus: ring (fake radio), transfer on 127.0.0.1, continuation
/// with fake activities and a fake suggestion board.
struct BusLessNode {
    /// Loopback, no Bluetooth. The connect budget (TCP and TLS handshake) is 10 s rather than the
    /// daemon's 3: the host suite runs CPU-heavy suites beside these on 2 cores, and a handshake
    /// that waited for a thread of the shared pool ran out of 3 s (a CI run) without anything wrong.
    static let transferConfiguration = TransferService.Configuration(listenHost: "127.0.0.1", connectTimeout: .seconds(10), bluetooth: false)

    let ring: RingService
    let pairing: PairingService
    let radio: FakeRadio
    let transfer: TransferService
    let continuation: ContinuationService
    let activities: FakeActivities
    let board: FakeSuggestionBoard

    static func start(in directory: URL, name: String, handled: Set<String> = [],
                      machineIDPaths: [String] = MachineIdentity.defaultPaths,
                      pairingLimits: PairingLimits = PairingLimits(),
                      transfer configuration: TransferService.Configuration = BusLessNode.transferConfiguration,
                      continuation continuationConfiguration: ContinuationService.Configuration = .init(),
                      runtimeDirectory: String? = nil) async throws -> BusLessNode {
        let radio = FakeRadio()
        let ring = try RingService(store: RingStore(directory: StateDirectory(path: directory.appendingPathComponent(name).path)),
                                   radio: radio, clock: SystemWallClock(),
                                   configuration: .init(deviceName: name, listenHost: "127.0.0.1", machineIDPaths: machineIDPaths,
                                                        runtimeDirectory: runtimeDirectory), log: { _ in })
        await ring.start()
        let pairing = PairingService(ring: ring, discovery: nil, clock: SystemWallClock(), limits: pairingLimits, log: { _ in })
        let activities = FakeActivities(handled: handled)
        let transfer = try await TransferService.start(ring: ring, activities: activities, configuration: configuration, log: { _ in })
        let board = FakeSuggestionBoard()
        let continuation = ContinuationService(ring: ring, transfer: transfer, activities: activities, board: board,
                                               configuration: continuationConfiguration, log: { _ in })
        await continuation.start()
        return BusLessNode(ring: ring, pairing: pairing, radio: radio, transfer: transfer, continuation: continuation, activities: activities, board: board)
    }

    /// The same node after a restart (a daemon killed and started again): ring, transfer and
    /// continuation from its state directory, on a new transfer port.
    static func restart(_ node: BusLessNode, in directory: URL, name: String, handled: Set<String>) async throws -> BusLessNode {
        try await start(in: directory, name: name, handled: handled)
    }

    func stop() async {
        await continuation.stop()
        await transfer.stop()
        await pairing.stop()
        await ring.stop()
    }
}

/// Pairs two nodes directly over loopback TCP (Accept on `a`, Pair on `b`); each answers with `accept`
/// (.1 the initiator, typing the acceptor's code; .0 the acceptor, typing the second code the initiator
/// then shows) and, with `commit`, both commit the merge.
func pairWithoutBus(_ a: PairingService, _ b: PairingService, accept: (Bool, Bool) = (true, true),
                    commit: Bool = true) async throws -> (pathA: String, pathB: String) {
    let uid = getuid()
    let pathA = try await a.acceptPairing(uid: uid, host: "127.0.0.1")
    let waiting = try #require(await a.session(pathA))
    #expect(waiting.phase.isWaiting && waiting.port > 0)
    let pathB = try await b.pair(uid: uid, target: "127.0.0.1:\(waiting.port)", sessionID: waiting.sessionID, addressType: nil)
    // Generous waits: they end as soon as the state is reached (the suite shares 2 cores).
    for (pairing, path) in [(a, pathA), (b, pathB)] {
        #expect(await eventually(timeout: .seconds(30)) { await pairing.session(path)?.phase.stateName == "confirming" })
    }
    let codeA = await a.session(pathA)?.shownCode, codeB = await b.session(pathB)?.shownCode
    #expect(codeA?.count == 6 && codeA == codeB)
    // The initiator shows no code until its user typed the acceptor's (or refused).
    #expect(await b.session(pathB)?.visibleCode == "")
    guard accept.1 else {
        try await b.confirm(pathB, uid: uid, accepted: false)
        return (pathA, pathB)
    }
    try await b.confirmCode(pathB, uid: uid, code: try #require(codeA))
    // Then it shows the second code, which the acceptor's user types (or refuses).
    #expect(await eventually(timeout: .seconds(30)) { await b.session(pathB)?.visibleCode.count == 6 })
    let second = try #require(await b.session(pathB)?.visibleCode)
    let expected = await b.session(pathB)?.secondCode
    #expect(second == expected && second != codeA)
    if accept.0 { try await a.confirmCode(pathA, uid: uid, code: second) } else { try await a.confirm(pathA, uid: uid, accepted: false) }
    guard accept.0 && commit else { return (pathA, pathB) }
    // Both review the members the other ring brings and commit.
    for (pairing, path) in [(a, pathA), (b, pathB)] {
        #expect(await eventually(timeout: .seconds(30)) { await pairing.session(path)?.phase.stateName == "reviewing" })
        try await pairing.commit(path, uid: uid, accepted: true)
    }
    return (pathA, pathB)
}

@Suite("BatonServiceTests: ring, pairing and continuation without a bus", .serialized)
struct BusLessTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("busless-\(UUID().uuidString)")

    @Test func twoRingsPairOverLoopbackTCP() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            let paired = await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" }
            let session = await pairing.session(path)
            #expect(paired, "\(String(describing: session))")
        }
        let idA = await a.ring.deviceID, idB = await b.ring.deviceID
        #expect(await a.pairing.session(pathA)?.textProperties["PeerName"] == "beta")
        #expect(await a.ring.isMember(idB))
        #expect(await b.ring.isMember(idA))
        #expect(await a.ring.radio.matcher.memberIDs == [idB])
        // Each learned where the other's transfer listens (announced at pairing).
        #expect(await b.ring.endpoints(of: idA).contains("127.0.0.1:\(a.transfer.port)"))
        // The transfer follows the ring: the new member is pinned.
        #expect(await a.transfer.snapshot.isMember(idB))
        // Another user may not answer someone else's session.
        await #expect(throws: ServiceFailure.notPermitted(PairingService.notYourSession)) {
            try await a.pairing.confirm(pathA, uid: getuid() &+ 1, accepted: true)
        }
        await a.stop()
        await b.stop()
    }

    @Test func aRefusedCodePairsNothing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing, accept: (true, false))
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "failed" })
            let session = await pairing.session(path)
            #expect(session?.phase == .failed(.rejected), "\(String(describing: session))")
        }
        #expect(await a.ring.snapshot().roster.members.count == 1)
        await a.stop()
        await b.stop()
    }

    @Test func aHeardAdvertIsContinuedOverOneTLSSession() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let type = "org.example.Reader.reading"
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta", handled: [type])
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }

        let uid = getuid()
        let record = try ActivityRecord(activityType: type, title: "Chapter 3", userInfo: ["page": .integer(3)], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: uid, serial: 1), record)
        try await a.ring.radio.publish(record, uid: uid)
        let advert = try #require(a.radio.lastAdvert)
        b.radio.hear(advert)
        #expect(await eventually(timeout: .seconds(10)) { b.board.suggestions.count == 1 })
        let suggestion = try #require(b.board.suggestions.first)
        #expect(suggestion.activityType == type && suggestion.memberName == "alpha")

        let channelsBefore = await a.transfer.acceptedChannels
        #expect(try await b.continuation.take(suggestion.path, uid: uid) == "delivered")
        #expect(b.activities.delivered.map(\.record.title) == ["Chapter 3"])
        #expect(b.activities.delivered.first?.from == "alpha")
        // ActivityContinued reached the source on the fetch's channel: one TLS session for the Continue.
        #expect(await eventually(timeout: .seconds(5)) { a.activities.continuedDevices == ["beta"] })
        #expect(await a.transfer.acceptedChannels == channelsBefore + 1)
        // Taken: the suggestion is withdrawn and the same revision is not offered again.
        #expect(b.board.suggestions.isEmpty)
        b.radio.hear(advert)
        try await Task.sleep(for: .milliseconds(200))
        #expect(b.board.suggestions.isEmpty)
        await a.stop()
        await b.stop()
    }

    @Test func continueByNameFailsCleanlyForStrangersAndBadTypes() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        await #expect(throws: ServiceFailure.unknownDevice("no single ring member matches")) {
            _ = try await a.continuation.continueActivity(from: "nobody", type: "org.example.Reader.reading", uid: getuid())
        }
        await #expect(throws: ServiceFailure.unknownDevice("no single ring member matches")) {
            _ = try await a.continuation.continueActivity(from: "alpha", type: "org.example.Reader.reading", uid: getuid())
        }
        await a.stop()
    }

    @Test func aWaitingSessionsPairingAdvertReplacesTheRingAdvertUntilItStopsWaiting() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        // In a ring: presence is on the air.
        #expect(await eventually { a.radio.lastAdvert.flatMap { try? AdvertKind.classify($0) } == .ring })
        let waiting = try await a.pairing.acceptPairing(uid: getuid(), host: "127.0.0.1")
        let advert = try #require(a.radio.lastAdvert)
        #expect(try AdvertKind.classify(advert) == .pairing)
        #expect(try PairingAdvert(decoding: advert).sessionID == (await a.pairing.session(waiting))?.sessionID)
        // A clock tick while it waits keeps the pairing advert on the air.
        await a.ring.tick()
        #expect(a.radio.lastAdvert == advert)
        try await a.pairing.cancel(waiting, uid: getuid())
        #expect(await eventually(timeout: .seconds(5)) { a.radio.lastAdvert.flatMap { try? AdvertKind.classify($0) } == .ring })
        #expect(await a.pairing.session(waiting)?.phase.stateName == "failed")
        await a.stop()
        await b.stop()
    }
}

/// Two paired bus-less nodes: alpha publishes "Chapter 3" of `type`, beta (which handles it)
/// hears the advert and has the suggestion.
func suggestedChapter(in directory: URL, type: String,
                      transfer: TransferService.Configuration = BusLessNode.transferConfiguration,
                      continuation: ContinuationService.Configuration = .init(),
                      beforePublishing prepare: (_ a: BusLessNode, _ b: BusLessNode) throws -> Void = { _, _ in })
    async throws -> (a: BusLessNode, b: BusLessNode, suggestion: ShownSuggestion) {
    let a = try await BusLessNode.start(in: directory, name: "alpha")
    let b = try await BusLessNode.start(in: directory, name: "beta", handled: [type], transfer: transfer, continuation: continuation)
    let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
    for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
        #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
    }
    try prepare(a, b)
    let record = try ActivityRecord(activityType: type, title: "Chapter 3", userInfo: ["page": .integer(3)], webpageURL: nil, version: 1)
    a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), record)
    try await a.ring.radio.publish(record, uid: getuid())
    b.radio.hear(try #require(a.radio.onAir))
    #expect(await eventually(timeout: .seconds(10)) { b.board.suggestions.count == 1 })
    return (a, b, try #require(b.board.suggestions.first))
}
