// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import Foundation
import Glibc
import Testing
@testable import BatonService

/// Run as `nobody`: creates an activity of its own and attaches a small file under each document
/// id given, in turn. Prints `<id>=<result>` (the D-Bus error name, or "ok").
/// argv: bus address, document ids.
let attachUnderIdsScript = #"""
import os, sys, tempfile
import dbus

address, ids = sys.argv[1], sys.argv[2:]
bus = dbus.bus.BusConnection(address)
mine = bus.call_blocking("org.baton", "/org/baton", "org.baton.Manager1", "CreateActivity", "ssa{sv}a{sv}",
                         ["org.example.Nobody.app", "draft", {}, {}])
handle, name = tempfile.mkstemp(prefix="baton-sessions-")
os.write(handle, b"nobody's words")
os.close(handle)
try:
    for document_id in ids:
        try:
            bus.call_blocking("org.baton", mine, "org.baton.Activity1", "AttachDocument", "hss",
                              [dbus.types.UnixFd(os.open(name, os.O_RDONLY)), "text/plain", document_id])
            print("%s=ok" % document_id, flush=True)
        except dbus.exceptions.DBusException as error:
            print("%s=%s" % (document_id, error.get_dbus_name()), flush=True)
finally:
    os.unlink(name)
"""#

/// Edit sessions are per local user (§6.6, security.md): a document id names one user's document.
@Suite("BatonServiceTests: edit sessions of one local user are not another's", .serialized)
struct EditSessionLocalUserTests {
    static let peer = try! DeviceID(bytes: [UInt8](repeating: 0x5A, count: DeviceID.byteCount))

    /// Attack, as `nobody`: attach documents under the id of root's document, after root's session
    /// was released to another machine, and attach more distinct ids than the limit. Found: the
    /// records were machine-wide by id, so nobody's attach was refused with EditSessionNotOwned
    /// (learning root's document was continued elsewhere) or would have added a revision to root's
    /// line, and ids beyond the limit made every user's new documents fail with LimitExceeded.
    /// Fixed: records keyed by (uid, id), a per-user limit, unused records evicted oldest first.
    @Test func anotherUsersSameIdIsAnotherDocumentAndItsIdsExhaustNothing() async throws {
        try #require(getuid() == 0, "runs as root (CI does) so that nobody is another user")
        try await withService { fixture in
            await fixture.service.useDocuments(try SnapshotStore(directory: fixture.stateDirectory + "/documents", perDocumentLimit: 1 << 20, perUserLimit: 1 << 20))
            let sessions = try EditSessions(directory: StateDirectory(path: fixture.stateDirectory + "/sessions"), documentLimit: 2)
            await fixture.service.useEditSessions(sessions)
            let client = fixture.client
            let path = try await client.createActivity(title: "root's plan")
            let rootFile = fixture.bus.directory.appendingPathComponent("plan.txt").path
            func attach(_ documentID: String) async throws {
                try Data("root's plan \(documentID)".utf8).write(to: URL(fileURLWithPath: rootFile))
                let descriptor = open(rootFile, O_RDONLY)
                defer { close(descriptor) }
                _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string("text/plain"), .string(documentID)])
            }
            try await attach("shared-1")
            // root's session of shared-1 goes to another machine.
            let claim = try EditSessionClaim(documentID: "shared-1", baseRevision: 0)
            let (grant, _) = await sessions.answerClaim(Frame(type: .claimEditSession, requestID: 1, payload: claim.payload),
                                                        from: Self.peer, uid: 0) { _ in SHA256.hash(Array("root's saved plan".utf8)) }
            #expect(grant.type == .editSessionGrant)
            #expect(await sessions.owner(of: "shared-1", uid: 0) == .peer(Self.peer))

            let seen = try await runAsNobody(script: attachUnderIdsScript, in: fixture.bus.directory,
                                             arguments: [fixture.bus.address, "shared-1", "shared-1", "n-2", "n-3", "n-4"])
            for id in ["shared-1", "n-2", "n-3", "n-4"] { #expect(seen[id] == "ok", "\(id): \(seen[id] ?? "missing")") }
            // nobody's shared-1 is its own line; root's is as root left it.
            #expect(await sessions.ledger("shared-1", uid: 0)?.current.revision == 2)
            #expect(await sessions.owner(of: "shared-1", uid: 0) == .peer(Self.peer))
            #expect(await sessions.ledger("shared-1", uid: nobodyUID) == nil, "evicted: nobody's activity no longer carries it")
            #expect(await sessions.ledger("n-4", uid: nobodyUID)?.current.revision == 1)
            // root's new documents still fit (nobody's ids count against nobody's limit only).
            try await attach("plan-2")
            #expect(await sessions.ledger("plan-2", uid: 0)?.owner == .thisMachine)
        }
    }

    @Test func recordsInUseOrClaimedAreNeverEvictedAndTheLimitHoldsForThem() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sessions-evict-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sessions = try EditSessions(directory: StateDirectory(path: directory.path), documentLimit: 3)
        let user: UInt32 = 1000
        for id in ["a", "b", "c"] { try await sessions.commitLocal(id, digest: SHA256.hash(Array(id.utf8)), uid: user) }
        _ = try await sessions.startClaim("a", from: Self.peer, requestID: 9, uid: user)
        await sessions.setDocumentsInUse(["b"], uid: user)
        try await sessions.commitLocal("d", digest: SHA256.hash([4]), uid: user)
        #expect(await sessions.ledger("c", uid: user) == nil, "the one neither in use nor claimed went")
        #expect(await sessions.ledger("a", uid: user) != nil)
        #expect(await sessions.ledger("b", uid: user) != nil)
        await sessions.setDocumentsInUse(["b", "d"], uid: user)
        await #expect(throws: EditSessionFailure.session(.tooManyDocuments(limit: 3))) {
            try await sessions.commitLocal("e", digest: SHA256.hash([5]), uid: user)
        }
        // Another user's limit is its own.
        try await sessions.commitLocal("e", digest: SHA256.hash([5]), uid: user + 1)
        // The order of use survives a restart.
        let reopened = try EditSessions(directory: StateDirectory(path: directory.path), documentLimit: 3)
        await reopened.setDocumentsInUse(["b"], uid: user)
        try await reopened.commitLocal("f", digest: SHA256.hash([6]), uid: user)
        #expect(await reopened.ledger("d", uid: user) == nil, "a is claimed and b in use: d, the oldest other, went")
        #expect(await reopened.ledger("a", uid: user) != nil)
    }

    /// A claim granted before is answered with its stored grant even when no current activity (or
    /// another user's) maps it to its user: the owner may have restarted without the activity.
    @Test func aStoredGrantIsAnsweredWhoeverIsCurrentNow() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sessions-replay-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sessions = try EditSessions(directory: StateDirectory(path: directory.path))
        try await sessions.commitLocal("plan", digest: SHA256.hash([1]), uid: 1000)
        let request = Frame(type: .claimEditSession, requestID: 12, payload: try EditSessionClaim(documentID: "plan", baseRevision: 0).payload)
        let granted = await sessions.answerClaim(request, from: Self.peer, uid: 1000) { _ in SHA256.hash([2]) }
        #expect(granted.reply.type == .editSessionGrant && granted.fresh)
        let reopened = try EditSessions(directory: StateDirectory(path: directory.path))
        for current in [nil, UInt32(1001)] {
            let again = await reopened.answerClaim(request, from: Self.peer, uid: current) { _ in nil }
            #expect(again.reply == granted.reply && !again.fresh, "current user \(String(describing: current))")
        }
        let fresh = Frame(type: .claimEditSession, requestID: 13, payload: request.payload)
        let nobodyCurrent = await reopened.answerClaim(fresh, from: Self.peer, uid: nil) { _ in nil }
        #expect(nobodyCurrent.reply.type == .error && (try? ErrorFrame(payload: nobodyCurrent.reply.payload))?.code == .sessionBusy)
    }

    /// A record of the machine-wide format names no user: its documents are dropped, with a logged
    /// reason, and the record is rewritten per user.
    @Test func aMachineWideRecordIsReadDroppedAndLogged() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sessions-legacy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(path: directory.path)
        var keeper = EditSessionKeeper()
        try keeper.book.commitLocal("old-doc", digest: SHA256.hash([1]))
        try DurableRecord<EditSessionKeeper>(name: EditSessions.recordName, schemaVersion: 1, in: state).save(keeper)
        let log = CollectingLog()
        let sessions = try EditSessions(directory: state, log: { log.log($0) })
        #expect(log.lines.contains { $0.contains("1 document record(s) of the machine-wide format dropped") }, "\(log.lines)")
        #expect(await sessions.ledger("old-doc", uid: getuid()) == nil)
        let rewritten = try DurableRecord<EditSessionRecord>(name: EditSessions.recordName, schemaVersion: EditSessionRecord.schemaVersion, in: state).load()
        #expect(rewritten == EditSessionRecord())
        try await sessions.commitLocal("old-doc", digest: SHA256.hash([2]), uid: getuid())
        #expect(await sessions.ledger("old-doc", uid: getuid())?.current.revision == 1)
    }

    /// A claim journalled without its user is adopted by the first user who claims the same document
    /// from the same member: the same request (id) is sent again, now theirs.
    @Test func aClaimWithoutItsUserBecomesTheNextClaimersOwn() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sessions-adopt-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = try StateDirectory(path: directory.path)
        let claim = try EditSessionClaim(documentID: "plan-2", baseRevision: 0)
        try Journal<PendingClaim>(name: EditSessions.journalName, capacity: 64, in: state)
            .record(PendingClaim(requestID: 41, peer: Self.peer, claim: claim))
        let sessions = try EditSessions(directory: state)
        let adopted = try await sessions.startClaim("plan-2", from: Self.peer, requestID: 77, activityType: "org.example.Plan", uid: 1000)
        #expect(adopted.requestID == 41 && adopted.uid == 1000 && adopted.activityType == "org.example.Plan")
        #expect(await sessions.pendingClaims == [adopted])
        let reopened = try EditSessions(directory: state)
        #expect(await reopened.pendingClaims == [adopted], "journalled as theirs")
        // Another user's claim of the same id is their own claim.
        let other = try await reopened.startClaim("plan-2", from: Self.peer, requestID: 78, uid: 1001)
        #expect(other.requestID == 78 && other.uid == 1001)
        #expect(await reopened.pendingClaims.count == 2)
    }
}
