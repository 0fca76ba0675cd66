// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonStore
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// Red-team attacks on the owner's side of ClaimEditSession (protocol §6.6 "Owner rules") by a rogue
/// ring member: batond's EditSessions with its durable record, fed hostile claims as they would
/// arrive over TLS. The save is a counting stand-in for the app's WillSave.
@Suite("BatonServiceTests: red team, hostile edit-session claims", .serialized)
struct RedTeamDocumentClaimTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-claims-\(UUID().uuidString)")
    static let documentID = "plan-7"
    static let firstDigest = SHA256.hash(Array("first".utf8))
    static let savedDigest = SHA256.hash(Array("saved on release".utf8))
    static let rogue = try! DeviceID(bytes: [UInt8](repeating: 0xEE, count: 16))
    static let honest = try! DeviceID(bytes: [UInt8](repeating: 0x11, count: 16))

    final class SaveCounter: Sendable {
        let count = Mutex(0)
        func save(_ claim: EditSessionClaim) async -> [UInt8]? {
            count.withLock { $0 += 1 }
            return RedTeamDocumentClaimTests.savedDigest
        }
        var saves: Int { count.withLock { $0 } }
    }

    func owner() async throws -> EditSessions {
        let sessions = try EditSessions(directory: StateDirectory(path: directory.path))
        try await sessions.commitLocal(Self.documentID, digest: Self.firstDigest, uid: getuid())
        return sessions
    }

    static func claim(_ id: UInt32, documentID: String = documentID, base: UInt64) throws -> Frame {
        Frame(type: .claimEditSession, requestID: id, payload: try EditSessionClaim(documentID: documentID, baseRevision: base).payload)
    }

    static func errorCode(_ frame: Frame) -> ErrorFrame.Code? {
        frame.type == .error ? (try? ErrorFrame(payload: frame.payload))?.code : nil
    }

    var recordSize: Int {
        let path = directory.appendingPathComponent(EditSessions.recordName).path
        return ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
    }

    /// Attack: claims of a document the owner never had, and base revisions the owner never made
    /// (2⁶⁴−1, one above its own). Held: `unknownActivity` and `documentConflict`, the app is not asked
    /// to save, nothing is released or recorded.
    @Test func claimsOfUnknownDocumentsAndFutureRevisionsReleaseNothing() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let sessions = try await owner()
        let counter = SaveCounter()
        let before = recordSize
        let unknown = await sessions.answerClaim(try Self.claim(1, documentID: "someone-elses", base: 0), from: Self.rogue, uid: getuid(), save: counter.save)
        #expect(Self.errorCode(unknown.reply) == .unknownActivity)
        for (id, base) in [(UInt32(2), UInt64.max), (3, 2)] {
            let future = await sessions.answerClaim(try Self.claim(id, base: base), from: Self.rogue, uid: getuid(), save: counter.save)
            #expect(Self.errorCode(future.reply) == .documentConflict, "base \(base)")
        }
        #expect(counter.saves == 0)
        #expect(await sessions.owner(of: Self.documentID, uid: getuid()) == .thisMachine)
        #expect(recordSize == before, "refusals are not recorded")
    }

    /// Attack: a claim from base 0 (no copy) or from an older revision, then the same request id with
    /// another payload (another document, another base), then a flood of fresh ids for the document it
    /// now holds. Held: base 0 and older bases are granted the owner's current revision (the claimer's
    /// import checks its own copy); a reused id with another payload is `malformed` and the stored grant
    /// stays; the flood (400 ids) is answered with the same revision without asking the app again, and the
    /// durable record stays bounded (the last 256 grants).
    @Test func reusedIdsAndClaimFloodsNeitherChangeNorGrowTheOwnersRecord() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let sessions = try await owner()
        try await sessions.commitLocal(Self.documentID, digest: SHA256.hash(Array("second".utf8)), uid: getuid())
        let counter = SaveCounter()
        let original = try Self.claim(40, base: 1)
        let granted = await sessions.answerClaim(original, from: Self.rogue, uid: getuid(), save: counter.save)
        #expect(granted.reply.type == .editSessionGrant && granted.fresh)
        let grant = try EditSessionGrant(payload: granted.reply.payload)
        #expect(grant.granted.revision == 3 && grant.granted.digest == Self.savedDigest)
        #expect(await sessions.owner(of: Self.documentID, uid: getuid()) == .peer(Self.rogue))

        for reused in [try Self.claim(40, base: 0), try Self.claim(40, documentID: "other", base: 1)] {
            let answer = await sessions.answerClaim(reused, from: Self.rogue, uid: getuid(), save: counter.save)
            #expect(Self.errorCode(answer.reply) == .malformed)
        }
        let replayed = await sessions.answerClaim(original, from: Self.rogue, uid: getuid(), save: counter.save)
        #expect(replayed.reply == granted.reply && !replayed.fresh, "the stored grant is kept and sent again")

        var sizeAfter300 = 0
        for id in UInt32(1_000)..<UInt32(1_400) {
            let answer = await sessions.answerClaim(try Self.claim(id, base: 0), from: Self.rogue, uid: getuid(), save: counter.save)
            #expect(answer.reply.type == .editSessionGrant)
            if id == 1_300 { sizeAfter300 = recordSize }
        }
        #expect(counter.saves == 1, "the app saved once, for the real release")
        #expect(recordSize <= sizeAfter300 + 64, "the record keeps the last grants only: \(recordSize) bytes after 400, \(sizeAfter300) after 300")
        #expect(await sessions.ledger(Self.documentID, uid: getuid())?.current.revision == 3)

        // Another member asking now finds the session taken: busy, never a second release.
        let other = await sessions.answerClaim(try Self.claim(7, base: 3), from: Self.honest, uid: getuid(), save: counter.save)
        #expect(Self.errorCode(other.reply) == .sessionBusy)
        #expect(await sessions.owner(of: Self.documentID, uid: getuid()) == .peer(Self.rogue))
    }

    /// Attack: ClaimEditSession payloads that do not decode: a document id with a control character,
    /// one of 256 bytes (longer than its length byte says), bytes that are not UTF-8. Held: `malformed`,
    /// nothing changes.
    @Test func claimsThatDoNotDecodeAreMalformed() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let sessions = try await owner()
        let counter = SaveCounter()
        let base = [UInt8](repeating: 0, count: 8)
        let payloads: [[UInt8]] = [
            [6] + Array("plan\u{1B}7".utf8) + base,
            [255] + [UInt8](repeating: 0x61, count: 256) + base,
            [2, 0xC3, 0x28] + base,
            [0] + base,
        ]
        for (index, payload) in payloads.enumerated() {
            let answer = await sessions.answerClaim(Frame(type: .claimEditSession, requestID: UInt32(60 + index), payload: payload),
                                                    from: Self.rogue, uid: getuid(), save: counter.save)
            #expect(Self.errorCode(answer.reply) == .malformed, "payload \(index)")
        }
        #expect(counter.saves == 0)
        #expect(await sessions.owner(of: Self.documentID, uid: getuid()) == .thisMachine)
    }
}
