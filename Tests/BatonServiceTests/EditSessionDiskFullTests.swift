// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonDBus
import BatonStore
import Foundation
import Glibc
import Testing
@testable import BatonService

/// A full disk under edit sessions (§6.6): every step that cannot be recorded is refused with a
/// typed error and changes nothing, in memory or on disk; no grant leaves unrecorded.
@Suite("BatonServiceTests: edit sessions on a full disk", .serialized)
struct EditSessionDiskFullTests {
    @Test func aFullDiskRefusesEachStepAndKeepsThePreviousState() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("editsessions-full-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        guard mount("tmpfs", root, "tmpfs", 0, "size=64k,mode=0700") == 0 else {
            Issue.record("cannot mount a tmpfs (errno \(errno)): this test needs root")
            return
        }
        defer { umount2(root, Int32(MNT_DETACH)) }
        let sessions = try EditSessions(directory: StateDirectory(path: root + "/sessions"))
        try await sessions.commitLocal("doc", digest: SHA256.hash([1]), uid: getuid())
        // Fill the file system.
        let filler = open(root + "/filler", O_WRONLY | O_CREAT, 0o600)
        #expect(filler >= 0)
        let block = [UInt8](repeating: 0xEE, count: 4096)
        while block.withUnsafeBytes({ write(filler, $0.baseAddress, $0.count) }) > 0 {}
        close(filler)

        var refusal: EditSessionFailure?
        do { try await sessions.commitLocal("doc", digest: SHA256.hash([2]), uid: getuid()) } catch { refusal = error }
        let failure = try #require(refusal)
        guard case .store = failure else { Issue.record("expected a store error, got \(failure)"); return }
        #expect(ActivityBus.busError(failure).name == "org.baton.Error.DiskFull")
        #expect(await sessions.ledger("doc", uid: getuid())?.current.revision == 1)

        // A claim cannot be recorded as released: an error goes out, the session stays here.
        let peer = try DeviceID(bytes: [UInt8](repeating: 0xB, count: 16))
        let request = Frame(type: .claimEditSession, requestID: 9, payload: try EditSessionClaim(documentID: "doc", baseRevision: 0).payload)
        let (reply, fresh) = await sessions.answerClaim(request, from: peer, uid: getuid()) { _ in SHA256.hash([3]) }
        #expect(!fresh && reply.type == .error)
        #expect(await sessions.owner(of: "doc", uid: getuid()) == .thisMachine)
        // A claim this machine would send cannot be journalled: it is not sent.
        await #expect(throws: EditSessionFailure.self) { try await sessions.startClaim("other", from: peer, requestID: 4, uid: getuid()) }
        #expect(await sessions.pendingClaims.isEmpty)

        // Space again: the state on disk is the one before the full disk.
        unlink(root + "/filler")
        let reopened = try EditSessions(directory: StateDirectory(path: root + "/sessions"))
        #expect(await reopened.ledger("doc", uid: getuid())?.current.revision == 1)
        #expect(await reopened.owner(of: "doc", uid: getuid()) == .thisMachine)
        #expect(await reopened.pendingClaims.isEmpty)
    }
}
