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
import Testing
@testable import BatonService

/// kill -9 of real batond processes during a Continue with a multi-MiB document (issue 14, §6.5,
/// §6.6). Two batond processes on the test's private bus, paired over TCP, TLS on loopback, no
/// radio: the user's Continue (Ring1.Continue) stands for the accepted advert. Each round alpha's
/// app publishes a new document id, beta continues it, and after a random delay alpha or beta
/// (alternately) is SIGKILLed, started again on its state directory and TLS port, and the test
/// retries until the round settles. Every round then must show: beta imported the document once
/// (revision 1, alpha's digest, its inbox holds exactly those bytes, no partial left), alpha
/// granted it once (one applied grant with that digest) and can no longer commit a newer edit
/// over it, beta owns the session and alpha knows it, every document a handler got has alpha's
/// digest, and WasContinued was never told more often than a handler got the activity.
///
/// Without a radio there are no sightings to replay a journalled claim on: when alpha died after
/// releasing and before beta heard the grant, alpha's app can no longer attach the document, so
/// beta is stopped cleanly and started again, and its start-up replay settles the claim.
///
/// Rounds: `BATON_DOCUMENT_KILL_ROUNDS` (default 8); `BATON_DOCUMENT_KILL_SEED` repeats a run.
/// A run of 100 rounds (docs/benchmarks.md, "Documents under kill -9") printed its counts there.
@Suite("BatonServiceTests: kill -9 of real batond processes during a document Continue", .serialized)
struct DocumentKillTests {
    static let type = "org.example.Drawing.editing"
    static let documentSize = (3 << 20) + 4097
    static let environment = ProcessInfo.processInfo.environment
    static let rounds = Int(environment["BATON_DOCUMENT_KILL_ROUNDS"] ?? "").map { max(1, $0) } ?? 8

    /// What the kills hit and how the rounds ended.
    struct Tally: CustomStringConvertible {
        var kills: [String: Int] = [:]
        var phases: [String: Int] = [:]
        var outcomes: [String: Int] = [:]
        var retries = 0
        var deliveries = 0
        var wasContinued = 0
        var description: String {
            func list(_ counts: [String: Int]) -> String { counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") }
            return "kills: \(list(kills)); beta's state at the kill: \(list(phases)); settled by: \(list(outcomes)); "
                + "Continue retries \(retries), deliveries \(deliveries), WasContinued \(wasContinued)"
        }
    }

    @Test func aDocumentContinueSurvivesKillNineOfEitherSideAtRandomPoints() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let alpha = KillableBatond(bus, name: "alpha", port: freeTCPPort())
        let beta = KillableBatond(bus, name: "beta", port: freeTCPPort())
        let apps = try await DocumentApps(bus: bus, type: Self.type)
        defer { apps.close() }
        do {
            try await scenario(alpha, beta, apps, client)
        } catch {
            print("--- alpha\n\(alpha.log)\n--- beta\n\(beta.log)")
            await alpha.kill9()
            await beta.kill9()
            throw error
        }
        await alpha.terminate()
        await beta.terminate()
    }

    private func scenario(_ alpha: KillableBatond, _ beta: KillableBatond, _ apps: DocumentApps, _ client: DBusConnection) async throws {
        try await alpha.start(client)
        try await beta.start(client)
        try await pairOverTCP(alpha, beta, client: client)
        try await apps.registerHandler(on: beta)
        let betaID = try await beta.deviceID(client)
        let seed = UInt64(Self.environment["BATON_DOCUMENT_KILL_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64(UInt32.max))
        var random = SplitMix(seed: seed)
        var tally = Tally()
        // One Continue without a kill measures how long a whole one takes here now (the machine's
        // load varies): the kills come at a uniformly random point of 0 to 1.2 times that.
        let warmUp = documentBytes(count: Self.documentSize, seed: UInt32(truncatingIfNeeded: seed >> 32) | 1)
        let warmUpActivity = try await apps.publish(on: alpha, title: "Warm-up", documentID: "warm-up", bytes: warmUp)
        let began = ContinuousClock.now
        let warmed = try await beta.call(client, BatonInterface.ring, "Continue", [.string("alpha"), .string(Self.type)], timeout: .seconds(60))
        let whole = ContinuousClock.now - began
        #expect(warmed.first?.stringValue == "delivered")
        _ = try? await apps.sourceApp.call(destination: alpha.busName, path: warmUpActivity, interface: BatonInterface.activity, method: "Invalidate")
        let maxDelay = max(20, Int(whole.components.seconds * 1000 + whole.components.attoseconds / 1_000_000_000_000_000) * 6 / 5)
        for round in 0..<Self.rounds {
            let documentID = "drawing-\(round)"
            let bytes = documentBytes(count: Self.documentSize, seed: UInt32(truncatingIfNeeded: seed) &+ UInt32(round) &* 2_654_435_761)
            let digest = SHA256.hash(bytes)
            var activity: String? = try await apps.publish(on: alpha, title: "Round \(round)", documentID: documentID, bytes: bytes)
            let victim = round % 2 == 0 ? beta : alpha
            let delay = Duration.milliseconds(Int(random.next() % UInt64(maxDelay + 1)))
            let deliveriesBefore = apps.allDeliveries.count

            let first = Task { try await beta.call(client, BatonInterface.ring, "Continue", [.string("alpha"), .string(Self.type)], timeout: .seconds(60)) }
            try await Task.sleep(for: delay)
            await victim.kill9()
            tally.kills[victim.name, default: 0] += 1
            tally.phases[try phase(of: beta, documentID: documentID, digest: digest), default: 0] += 1
            let firstDelivered = (try? await first.value)?.first?.stringValue == "delivered"
            try await victim.start(client)
            var alphaReleased = false
            if victim === beta {
                try await apps.registerHandler(on: beta)
            } else {
                // alpha's activities died with it: its app publishes the same document again,
                // which alpha refuses once it released the session before the kill.
                do {
                    activity = try await apps.publish(on: alpha, title: "Round \(round)", documentID: documentID, bytes: bytes)
                } catch let error as DBusError where error.name == BatonErrorName.editSessionNotOwned.rawValue {
                    alphaReleased = true
                    activity = nil
                }
            }

            // Retry until beta owns the session with nothing journalled.
            var how = firstDelivered ? "the first Continue" : "a start-up replay"
            var attempts = 0
            while try await !settled(beta, documentID, wait: .seconds(3)), attempts < 8 {
                attempts += 1
                if alphaReleased, try beta.pendingClaims().contains(where: { $0.claim.documentID == documentID }) {
                    how = "beta's start-up replay after a clean restart"
                    await beta.terminate()
                    try await beta.start(client)
                    try await apps.registerHandler(on: beta)
                    continue
                }
                how = "a retried Continue"
                tally.retries += 1
                _ = try? await beta.call(client, BatonInterface.ring, "Continue", [.string("alpha"), .string(Self.type)], timeout: .seconds(60))
            }
            #expect(try await settled(beta, documentID, wait: .seconds(10)),
                    "round \(round): beta never settled \(documentID) (victim \(victim.name), delay \(delay))\n--- alpha\n\(alpha.log)\n--- beta\n\(beta.log)")
            tally.outcomes[how, default: 0] += 1

            try await checkRound(round, documentID: documentID, digest: digest, alpha: alpha, beta: beta, betaID: betaID,
                                 deliveries: Array(apps.allDeliveries[deliveriesBefore...]), apps: apps)
            if let activity {
                _ = try? await apps.sourceApp.call(destination: alpha.busName, path: activity, interface: BatonInterface.activity, method: "Invalidate")
            }
        }
        tally.deliveries = apps.allDeliveries.count
        tally.wasContinued = apps.wasContinued
        #expect(apps.wasContinued <= apps.allDeliveries.count, "WasContinued more often than a handler got the activity")
        print("DocumentKillTests: seed \(seed), rounds \(Self.rounds), document \(Self.documentSize) bytes, "
              + "a whole Continue \(whole), kills within 0-\(maxDelay) ms; \(tally)")
    }

    /// Where beta was when the kill came, from its disk.
    func phase(of beta: KillableBatond, documentID: String, digest: [UInt8]) throws -> String {
        if try beta.editSessions()?.book.ledger(documentID) != nil { return "imported" }
        if try beta.pendingClaims().contains(where: { $0.claim.documentID == documentID }) { return "claim journalled" }
        let inbox = try beta.inbox()
        if inbox.received(digest: digest) != nil { return "document pulled, no claim yet" }
        if inbox.resumeOffset(digest: digest) > 0 { return "mid-transfer" }
        return "before the document"
    }

    /// beta owns `documentID` and has no claim for it journalled (waits up to `wait` for it).
    func settled(_ beta: KillableBatond, _ documentID: String, wait: Duration) async throws -> Bool {
        try await eventually(timeout: wait) {
            try beta.editSessions()?.book.owner(of: documentID) == .thisMachine
                && !(try beta.pendingClaims().contains { $0.claim.documentID == documentID })
        }
    }

    func checkRound(_ round: Int, documentID: String, digest: [UInt8], alpha: KillableBatond, beta: KillableBatond, betaID: String,
                    deliveries: [DocumentApps.Delivery], apps: DocumentApps) async throws {
        let imported = try #require(try beta.editSessions()?.book.ledger(documentID))
        #expect(imported.current.revision == 1 && imported.current.digest == digest, "round \(round): imported once, alpha's snapshot")
        let inbox = try beta.inbox()
        let received = try #require(inbox.received(digest: digest), "round \(round): the document is in beta's inbox")
        let descriptor = open(received, O_RDONLY)
        #expect(DocumentApps.digest(of: descriptor) == digest)
        close(descriptor)
        #expect(inbox.resumeOffset(digest: digest) == 0, "round \(round): no partial file left")

        let released = try #require(try alpha.editSessions())
        guard case .peer(let owner) = released.book.owner(of: documentID) else {
            Issue.record("round \(round): alpha still owns \(documentID)")
            return
        }
        #expect(owner.bytes.hexString == betaID)
        #expect(released.applied.entries.filter { $0.grant.granted.digest == digest }.count == 1, "round \(round): granted exactly once")
        for delivery in deliveries where delivery.documentID == documentID {
            #expect(delivery.digest == digest, "round \(round): a handler got other bytes")
        }
        // No newer edit on alpha can overwrite what beta now owns.
        let newer = try await apps.sourceApp.call(destination: alpha.busName, path: BatonObjectPath.manager, interface: BatonInterface.manager,
            method: "CreateActivity", arguments: [.string(Self.type), .string("edit"), .propertyDictionary([:]), .propertyDictionary([:])])
        let path = try #require(newer.first?.objectPathValue)
        do {
            try await apps.attach(Array("a newer edit made on alpha".utf8), as: documentID, to: path, on: alpha)
            Issue.record("round \(round): alpha committed over beta's session")
        } catch let error as DBusError {
            #expect(error.name == BatonErrorName.editSessionNotOwned.rawValue)
        }
        _ = try? await apps.sourceApp.call(destination: alpha.busName, path: path, interface: BatonInterface.activity, method: "Invalidate")
    }
}

/// A small seeded generator, so a failing run can be repeated with its seed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The journal gap of §6.6 on real processes: beta is SIGKILLed while alpha's app saves on release
/// (a newer snapshot), so alpha grants a snapshot beta never fetched. beta, started again on its
/// state, replays its journalled claim, gets the stored grant, fetches the saved snapshot itself
/// (the journal kept the activity type and user) and imports it once, without a new Continue.
@Suite("BatonServiceTests: a receiver killed during the owner's save finishes the import at its restart", .serialized)
struct KilledReceiverReplayTests {
    @Test func theRestartedReceiverFetchesAndImportsTheGrantedSnapshotWithoutAContinue() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let client = try DBusConnection(bus: .address(bus.address))
        defer { client.close() }
        let alpha = KillableBatond(bus, name: "alpha", port: freeTCPPort(), extraArguments: ["--save-timeout", "10"])
        let beta = KillableBatond(bus, name: "beta", port: freeTCPPort())
        let apps = try await DocumentApps(bus: bus, type: DocumentKillTests.type)
        defer { apps.close() }
        do {
            try await scenario(alpha, beta, apps, client)
        } catch {
            print("--- alpha\n\(alpha.log)\n--- beta\n\(beta.log)")
            await alpha.kill9()
            await beta.kill9()
            throw error
        }
        await alpha.terminate()
        await beta.terminate()
    }

    private func scenario(_ alpha: KillableBatond, _ beta: KillableBatond, _ apps: DocumentApps, _ client: DBusConnection) async throws {
        try await alpha.start(client)
        try await beta.start(client)
        try await pairOverTCP(alpha, beta, client: client)
        try await apps.registerHandler(on: beta)
        let betaID = try await beta.deviceID(client)
        let documentID = "plan-saved-on-release"
        let bytes = documentBytes(count: DocumentKillTests.documentSize, seed: 0xC1A1)
        let activity = try await apps.publish(on: alpha, title: "Plan", documentID: documentID, bytes: bytes, needsSave: true)
        let saved = documentBytes(count: DocumentKillTests.documentSize + 1_000, seed: 0x5A7E)
        let savedDigest = SHA256.hash(saved)
        let savesBefore = apps.willSaves
        apps.onWillSave { [apps] count in
            // The second save of the Continue is the claim's (the first is the activity's fetch).
            guard count == savesBefore + 2 else { return }
            try? await apps.attach(saved, as: documentID, to: activity, on: alpha)
            await beta.kill9()
        }
        _ = try? await beta.call(client, BatonInterface.ring, "Continue", [.string("alpha"), .string(DocumentKillTests.type)], timeout: .seconds(60))
        apps.onWillSave(nil)
        // alpha granted the saved snapshot (durably) to a beta that is gone.
        #expect(try await eventually(timeout: .seconds(20)) {
            try alpha.editSessions()?.applied.entries.contains { $0.grant.granted.digest == savedDigest } == true
        }, "alpha never granted the saved snapshot")
        let journalled = try beta.pendingClaims()
        #expect(journalled.map(\.claim.documentID) == [documentID])
        #expect(journalled.first?.activityType == DocumentKillTests.type && journalled.first?.uid == getuid())
        #expect(try beta.inbox().received(digest: savedDigest) == nil, "beta never fetched the saved snapshot")
        let deliveries = apps.allDeliveries.count

        try await beta.start(client)
        #expect(try await eventually(timeout: .seconds(30)) {
            try beta.editSessions()?.book.owner(of: documentID) == .thisMachine && (try beta.pendingClaims()).isEmpty
        }, "beta's start-up replay did not finish the import\n--- beta\n\(beta.log)")
        let imported = try #require(try beta.editSessions()?.book.ledger(documentID))
        #expect(imported.current.revision == 2 && imported.current.digest == savedDigest, "the saved snapshot, imported once")
        let received = try #require(try beta.inbox().received(digest: savedDigest))
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: received))) == saved)
        #expect(apps.allDeliveries.count == deliveries, "no Continue ran: the replay imported alone")
        let released = try #require(try alpha.editSessions())
        #expect(released.applied.entries.filter { $0.grant.granted.digest == savedDigest }.count == 1, "granted once")
        guard case .peer(let owner) = released.book.owner(of: documentID) else {
            Issue.record("alpha still owns \(documentID)")
            return
        }
        #expect(owner.bytes.hexString == betaID)
    }
}
