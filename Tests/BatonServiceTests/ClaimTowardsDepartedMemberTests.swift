// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonTestBus
import BatonCore
import BatonServiceFakes
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// §6.6: a journalled claim towards a machine that leaves the ring (removed here, or every member
/// after this machine takes a new identity; and at start for a removal made while batond was
/// stopped) can never be answered, so it is abandoned: it leaves the journal file, the user is told,
/// and the document can be claimed from another member again instead of "claim pending elsewhere"
/// for ever. A claim towards a member that stays is not touched.
@Suite("BatonServiceTests: claims towards a machine that left the ring are abandoned", .serialized)
struct ClaimTowardsDepartedMemberTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("claim-departed-\(UUID().uuidString)")
    static let type = "org.example.plan"
    static let document = "plan-2"

    /// beta with two members, alpha and gamma (beta paired with each), and beta's edit sessions.
    struct Ring {
        let a: BusLessNode, b: BusLessNode, c: BusLessNode
        let alpha: DeviceID, gamma: DeviceID
        let sessions: EditSessions
    }

    var sessionsDirectory: StateDirectory { get throws { try StateDirectory(path: directory.appendingPathComponent("beta-sessions").path) } }

    func ring() async throws -> Ring {
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let c = try await BusLessNode.start(in: directory, name: "gamma")
        for other in [a, c] {
            let (pathB, pathOther) = try await pairWithoutBus(b.pairing, other.pairing)
            for (pairing, path) in [(b.pairing, pathB), (other.pairing, pathOther)] {
                #expect(await eventually(timeout: .seconds(30)) { await pairing.session(path)?.phase.stateName == "paired" })
            }
        }
        let alpha = await a.ring.deviceID, gamma = await c.ring.deviceID
        let roster = await b.ring.snapshot()
        #expect(roster.isMember(alpha) && roster.isMember(gamma))
        let sessions = try EditSessions(directory: sessionsDirectory)
        b.activities.setEditSessions(sessions, savedDigest: nil)
        return Ring(a: a, b: b, c: c, alpha: alpha, gamma: gamma, sessions: sessions)
    }

    func stop(_ r: Ring) async {
        for node in [r.a, r.b, r.c] { await node.stop() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// What the journal file holds now (read from disk, as the next start would).
    func journalled() async throws -> [PendingClaim] { try await EditSessions(directory: sessionsDirectory).pendingClaims }

    func journalMode() -> mode_t {
        var status = stat()
        let path = directory.appendingPathComponent("beta-sessions").appendingPathComponent(EditSessions.journalName).path
        return stat(path, &status) == 0 ? status.st_mode & 0o777 : 0
    }

    /// A Continue whose grant never arrived leaves this in the journal: the claim, before it is answered.
    func claim(_ sessions: EditSessions, _ documentID: String = document, from owner: DeviceID, requestID: UInt32) async throws -> PendingClaim {
        try await sessions.startClaim(documentID, from: owner, requestID: requestID, activityType: Self.type, uid: getuid())
    }

    @Test func aClaimTowardsARemovedMemberLeavesTheJournalAndTheDocumentCanBeClaimedFromAnother() async throws {
        let r = try await ring()
        let pending = try await claim(r.sessions, from: r.alpha, requestID: 41)
        #expect(try await journalled() == [pending])
        await #expect(throws: EditSessionFailure.claimPendingElsewhere(r.alpha)) {
            try await claim(r.sessions, from: r.gamma, requestID: 42)
        }

        try await r.b.ring.remove("alpha")

        #expect(await r.sessions.pendingClaims.isEmpty)
        #expect(try await journalled().isEmpty, "gone from the journal file, not only from memory")
        #expect(journalMode() == 0o600)
        #expect(r.b.activities.lostEditSessions == [LostEditSession(uid: getuid(), documentID: Self.document, member: r.alpha, memberName: "alpha")])
        #expect(await r.sessions.owner(of: Self.document, uid: getuid()) != .thisMachine, "the session is not held here")
        let next = try await claim(r.sessions, from: r.gamma, requestID: 42)
        #expect(next.peer == r.gamma)
        #expect(try await journalled() == [next])
        await stop(r)
    }

    @Test func aNewIdentityAbandonsEveryClaimOfTheRingItLeft() async throws {
        let r = try await ring()
        let towardsAlpha = try await claim(r.sessions, from: r.alpha, requestID: 41)
        let towardsGamma = try await claim(r.sessions, "notes-7", from: r.gamma, requestID: 43)
        #expect(try await journalled() == [towardsAlpha, towardsGamma])

        _ = try await r.b.ring.resetIdentity()

        #expect(await r.sessions.pendingClaims.isEmpty)
        #expect(try await journalled().isEmpty)
        let lost = r.b.activities.lostEditSessions
        #expect(Set(lost) == [LostEditSession(uid: getuid(), documentID: Self.document, member: r.alpha, memberName: "alpha"),
                              LostEditSession(uid: getuid(), documentID: "notes-7", member: r.gamma, memberName: "gamma")])
        // Not refused "claim pending elsewhere" any more (a member of the new ring, once paired).
        let fresh = try DeviceID(bytes: [UInt8](repeating: 0x5A, count: 16))
        #expect(try await claim(r.sessions, from: fresh, requestID: 44).peer == fresh)
        await stop(r)
    }

    @Test func aClaimTowardsAMemberThatStaysIsUntouchedByAnotherRemoval() async throws {
        let r = try await ring()
        let towardsAlpha = try await claim(r.sessions, from: r.alpha, requestID: 41)
        let towardsGamma = try await claim(r.sessions, "notes-7", from: r.gamma, requestID: 43)

        try await r.b.ring.remove("gamma")

        #expect(await r.sessions.pendingClaims == [towardsAlpha])
        #expect(try await journalled() == [towardsAlpha], "the claim towards alpha is still journalled, unchanged")
        #expect(r.b.activities.lostEditSessions == [LostEditSession(uid: getuid(), documentID: "notes-7", member: r.gamma, memberName: "gamma")])
        #expect(towardsGamma.peer == r.gamma)
        await #expect(throws: EditSessionFailure.claimPendingElsewhere(r.alpha)) {
            try await claim(r.sessions, from: r.gamma, requestID: 45)
        }
        await stop(r)
    }

    @Test func aRingSyncThatRemovesTheOwnerAbandonsTheClaimToo() async throws {
        let r = try await ring()
        // alpha hears of gamma by beta's RingSync, then removes it; its RingSync reaches beta.
        #expect(await eventually(timeout: .seconds(30)) { await r.a.ring.snapshot().isMember(r.gamma) })
        let towardsAlpha = try await claim(r.sessions, from: r.alpha, requestID: 41)
        _ = try await claim(r.sessions, "notes-7", from: r.gamma, requestID: 43)

        try await r.a.ring.remove("gamma")

        #expect(await eventually(timeout: .seconds(30)) { await !r.b.ring.snapshot().isMember(r.gamma) }, "beta merged alpha's removal")
        #expect(await eventually(timeout: .seconds(10)) { await r.sessions.pendingClaims == [towardsAlpha] })
        #expect(try await journalled() == [towardsAlpha])
        #expect(r.b.activities.lostEditSessions == [LostEditSession(uid: getuid(), documentID: "notes-7", member: r.gamma, memberName: "gamma")])
        #expect(try await claim(r.sessions, "notes-7", from: r.alpha, requestID: 46).peer == r.alpha)
        await stop(r)
    }

    @Test func aJournalLoadedAtStartWithAClaimTowardsANonMemberIsSettled() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        // Journalled before batond stopped; the member was removed meanwhile (by another member's
        // RingSync or `bt-pair remove` with a state directory restored): beta's ring has no such member.
        let departed = try DeviceID(bytes: [UInt8](repeating: 0xEE, count: 16))
        do {
            let before = try EditSessions(directory: sessionsDirectory)
            _ = try await claim(before, from: departed, requestID: 41)
        }
        #expect(try await journalled().count == 1)

        let b = try await BusLessNode.start(in: directory, name: "beta")
        let sessions = try EditSessions(directory: sessionsDirectory)
        b.activities.setEditSessions(sessions, savedDigest: nil)
        let restarted = ContinuationService(ring: b.ring, transfer: b.transfer, activities: b.activities, board: nil, log: { _ in })
        await restarted.start()

        #expect(await sessions.pendingClaims.isEmpty)
        #expect(try await journalled().isEmpty)
        #expect(b.activities.lostEditSessions == [LostEditSession(uid: getuid(), documentID: Self.document, member: departed,
                                                                  memberName: departed.shortForm)])
        #expect(try await claim(sessions, from: try DeviceID(bytes: [UInt8](repeating: 0x11, count: 16)), requestID: 42).requestID == 42)
        await restarted.stop()
        await b.stop()
    }

    @Test func theUserIsToldWithAnErrorRecordAndWordsNamingTheDocumentAndTheMachine() async throws {
        try await withService { f in
            let member = try DeviceID(bytes: [UInt8](repeating: 0xAB, count: 16))
            await f.handlers.editSessionsLost([LostEditSession(uid: getuid(), documentID: Self.document, member: member, memberName: "alpha")])
            #expect(await f.service.errorLog.records.last?.category == .editSessionLost)
            #expect(ErrorCategory.editSessionLost.rawValue == "edit-session-lost")
            let line = try #require(f.log.lines.first { $0.contains("edit session") })
            #expect(line.contains("\"\(Self.document)\"") && line.contains("\"alpha\"") && line.contains(member.shortForm))
            #expect(line.contains("left the ring") && line.contains("Open the document on this machine"))
            // A member's name is its own words: a newline in it cannot forge a log line.
            await f.handlers.editSessionsLost([LostEditSession(uid: getuid(), documentID: "notes-7", member: member,
                                                              memberName: "alpha\nbatond: forged")])
            #expect(!f.log.lines.contains { $0.hasPrefix("batond: forged") } && f.log.lines.contains { $0.contains("\"alpha?batond: forged\"") })
            #expect(await f.service.errorLog.records.last?.count == 2, "one record per lost claim, counted")
        }
    }
}
