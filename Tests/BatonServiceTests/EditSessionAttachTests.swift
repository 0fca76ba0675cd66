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

/// Activity1.AttachDocument under edit sessions (§6.6): each new snapshot is the next revision; once
/// the session is released to another machine the app cannot commit here, and the served snapshot
/// stays the one released.
@Suite("BatonServiceTests: AttachDocument commits only while this machine owns the edit session", .serialized)
struct EditSessionAttachTests {
    /// The fixture's service with a snapshot store and edit sessions in its state directory.
    static func useSnapshotsAndSessions(_ fixture: ServiceFixture) async throws -> EditSessions {
        await fixture.service.useDocuments(try SnapshotStore(directory: fixture.stateDirectory + "/documents", perDocumentLimit: 1 << 20, perUserLimit: 1 << 20))
        let sessions = try EditSessions(directory: StateDirectory(path: fixture.stateDirectory + "/sessions"))
        await fixture.service.useEditSessions(sessions)
        return sessions
    }

    @Test func aReleasedDocumentCannotBeCommittedHere() async throws {
        try await withService { fixture in
            let sessions = try await Self.useSnapshotsAndSessions(fixture)
            let client = fixture.client
            let path = try await client.createActivity(title: "Notes")
            #expect(try await client.property(path, "EditSession") == .string(""))
            // The claim's save is the current activity's.
            _ = try await client.activity(path, "BecomeCurrent")
            func attach(_ text: String) async throws {
                let file = fixture.bus.directory.appendingPathComponent("notes-\(text).txt").path
                try Data(text.utf8).write(to: URL(fileURLWithPath: file))
                let descriptor = open(file, O_RDONLY)
                defer { close(descriptor) }
                _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string("text/plain"), .string("notes-1")])
            }
            try await attach("first")
            try await attach("second")
            #expect(await sessions.ledger("notes-1", uid: getuid())?.current.revision == 2)
            #expect(await sessions.owner(of: "notes-1", uid: getuid()) == .thisMachine)
            #expect(try await client.property(path, "EditSession") == .string("this"))

            // Another machine claims it; the save here returns the committed snapshot.
            let peer = try DeviceID(bytes: [UInt8](repeating: 0xB, count: 16))
            let claim = try EditSessionClaim(documentID: "notes-1", baseRevision: 0)
            let (reply, fresh) = await sessions.answerClaim(Frame(type: .claimEditSession, requestID: 5, payload: claim.payload), from: peer, uid: getuid()) { _ in
                await fixture.service.savedDocument(documentID: "notes-1", uid: getuid())
            }
            #expect(fresh && reply.type == .editSessionGrant)
            #expect(try EditSessionGrant(payload: reply.payload).granted.digest == SHA256.hash(Array("second".utf8)))

            #expect(try await client.property(path, "EditSession") == .string(String(repeating: "0b", count: 16)))
            await expectError("org.baton.Error.EditSessionNotOwned") { try await attach("third") }
            #expect(await fixture.service.documentForTransfer(uid: getuid())?.info.digest == SHA256.hash(Array("second".utf8)))
            #expect(await sessions.ledger("notes-1", uid: getuid())?.current.revision == 2)
        }
    }

    /// Activity1.EditSession is signalled to the activity's owner when a claim moves the session.
    @Test func aClaimThatMovesTheSessionIsSignalledToTheOwner() async throws {
        try await withService { fixture in
            let sessions = try await Self.useSnapshotsAndSessions(fixture)
            let client = fixture.client
            let path = try await client.createActivity(title: "Notes")
            _ = try await client.activity(path, "BecomeCurrent")
            let file = fixture.bus.directory.appendingPathComponent("notes.txt").path
            try Data("saved".utf8).write(to: URL(fileURLWithPath: file))
            let descriptor = open(file, O_RDONLY)
            defer { close(descriptor) }
            _ = try await client.activity(path, "AttachDocument", [.unixFD(descriptor), .string("text/plain"), .string("notes-1")])
            #expect(try await client.property(path, "EditSession") == .string("this"))
            let rule = DBusMatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: path)
            let signals = try await client.signals(matching: rule)

            let peer = try DeviceID(bytes: [UInt8](repeating: 0xC, count: 16))
            let claim = try EditSessionClaim(documentID: "notes-1", baseRevision: 0)
            let (reply, fresh) = await sessions.answerClaim(Frame(type: .claimEditSession, requestID: 6, payload: claim.payload), from: peer, uid: getuid()) { _ in
                await fixture.service.savedDocument(documentID: "notes-1", uid: getuid())
            }
            #expect(fresh && reply.type == .editSessionGrant)
            // Earlier signals (the attach's "this") may still be queued; the move must follow within the timeout.
            let expected = DBusValue.string(String(repeating: "0c", count: 16))
            var moved: DBusValue?
            while moved != expected { moved = try await first(of: signals).arguments[1].asDictionary?["EditSession"] }
            #expect(try await client.property(path, "EditSession") == expected)
        }
    }
}
