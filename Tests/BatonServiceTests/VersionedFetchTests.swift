// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonAPI
import BatonCore
import BatonCrypto
import BatonStore
import BatonTransport
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// Issue 13, "a version mismatch is refused before any fetch": the receiver names the versions its
/// handler accepts (FetchActivityOfVersions, §6.2) and the source refuses another version before its
/// app saves or anything is sent. Two rings on loopback, fake radios, real TLS.
@Suite("BatonServiceTests: versioned fetch", .serialized)
struct VersionedFetchTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("versioned-\(UUID().uuidString)")
    let type = "org.example.Reader.reading"

    func failureOf(_ attempt: () async throws(ServiceFailure) -> String) async -> ContinuationFailure? {
        do {
            _ = try await attempt()
            return nil
        } catch {
            return error.continuationFailure
        }
    }

    /// The source's activity (version 1) has a document; beta pulls documents into an inbox.
    func suggestedWithDocument(prefetchAfter: Duration? = nil, versions: ActivityVersions?) async throws
        -> (a: BusLessNode, b: BusLessNode, suggestion: ShownSuggestion, inbox: DocumentInbox) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let bytes: [UInt8] = Array("page 3 of the book".utf8)
        let snapshot = directory.appendingPathComponent("snapshot").path
        try Data(bytes).write(to: URL(fileURLWithPath: snapshot))
        let info = try DocumentInfo(totalSize: UInt64(bytes.count), digest: SHA256.hash(bytes), mediaType: "text/plain", documentID: "book-3")
        let base = directory.appendingPathComponent("inbox")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        let inbox = try DocumentInbox.ofUser(getuid(), under: base.path)
        let (a, b, suggestion) = try await suggestedChapter(in: directory, type: type, continuation: .init(prefetchAfter: prefetchAfter)) { a, b in
            a.activities.setDocument(AttachedDocument(path: snapshot, info: info))
            b.activities.setInbox(inbox)
            b.activities.setAcceptedVersions(versions)
        }
        return (a, b, suggestion, inbox)
    }

    @Test func aMismatchIsRefusedByTheSourceBeforeItsAppSavesAndNothingMoves() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion, inbox) = try await suggestedWithDocument(versions: try ActivityVersions(pairs: [(2, 3)]))
        let category = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(category == .versionUnsupported)
        #expect(b.activities.failures == [.versionUnsupported], "the accepting handler hears the category")
        #expect(await a.transfer.versionsRefused == 1, "the source refused it")
        #expect(a.activities.transferRequests == 0, "the source's app was never asked to save (no WillSave)")
        #expect(await a.transfer.activityPayloadsSent == 0, "no ActivityPayload left the source")
        #expect(b.activities.delivered.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox.directory).isEmpty, "no document bytes moved")
        try await Task.sleep(for: .milliseconds(200))
        #expect(a.activities.continuedDevices.isEmpty)
        #expect(b.board.suggestions.map(\.path) == [suggestion.path], "the suggestion stays: a newer app may take it")
        // Ring1.Continue sends the same request and is refused the same way.
        #expect(await failureOf { () throws(ServiceFailure) in try await b.continuation.continueActivity(from: "alpha", type: type, uid: getuid()) }
                == .versionUnsupported)
        #expect(a.activities.transferRequests == 0)
        #expect(await a.transfer.activityPayloadsSent == 0)
        await a.stop()
        await b.stop()
    }

    @Test func aMatchingVersionContinuesAsBefore() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion, inbox) = try await suggestedWithDocument(versions: try ActivityVersions(desktopValue: "0-1;5;"))
        #expect(try await b.continuation.take(suggestion.path, uid: getuid()) == "delivered")
        #expect(b.activities.delivered.map(\.record.title) == ["Chapter 3"])
        #expect(a.activities.transferRequests == 1)
        #expect(await a.transfer.activityPayloadsSent == 1)
        #expect(await a.transfer.versionsRefused == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox.directory).count == 1, "the document came")
        #expect(await eventually(timeout: .seconds(5)) { a.activities.continuedDevices == ["beta"] })
        await a.stop()
        await b.stop()
    }

    /// The app's WillSave answer sets a version that is not asked for: refused after the save, nothing sent.
    @Test func aVersionChangedByTheSaveIsRefusedAfterTheSave() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion, _) = try await suggestedWithDocument(versions: try ActivityVersions(pairs: [(1, 1)]))
        // What the (fake) app's save leaves: the same activity at version 4; the advert is unchanged.
        let saved = try ActivityRecord(activityType: type, title: "Chapter 3", userInfo: ["page": .integer(3)], webpageURL: nil, version: 4)
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), saved)
        let category = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(category == .versionUnsupported)
        #expect(a.activities.transferRequests == 1, "the save ran")
        #expect(await a.transfer.versionsRefused == 1)
        #expect(await a.transfer.activityPayloadsSent == 0)
        #expect(b.activities.delivered.isEmpty)
        await a.stop()
        await b.stop()
    }

    @Test func aPrefetchOfAnotherVersionIsRefusedWithoutASave() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion, _) = try await suggestedWithDocument(prefetchAfter: .milliseconds(100), versions: try ActivityVersions(pairs: [(2, 3)]))
        #expect(await eventually(timeout: .seconds(10)) { await a.transfer.versionsRefused == 1 })
        #expect(a.activities.transferRequests == 0)
        #expect(await a.transfer.activityPayloadsSent == 0)
        #expect(await b.continuation.isPrefetched(suggestion.path) == false)
        #expect(b.board.titles.isEmpty)
        #expect(await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) } == .versionUnsupported)
        #expect(a.activities.transferRequests == 0)
        await a.stop()
        await b.stop()
    }

    /// The source dies while its app saves for a versioned fetch: the fallback FetchActivity reaches
    /// nobody, and the failure reported is the first one, interrupted (a retry may succeed).
    @Test func aSourceKilledDuringAVersionedFetchIsInterrupted() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion) = try await suggestedChapter(in: directory, type: type)
        b.activities.setAcceptedVersions(try ActivityVersions(pairs: [(1, 1)]))
        a.activities.setTransferDelay(.seconds(30))
        let taking = Task { await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) } }
        #expect(await eventually(timeout: .seconds(20)) { a.activities.transferRequests == 1 })
        await a.transfer.stop()
        #expect(await taking.value == .interrupted)
        #expect(b.board.suggestions.map(\.path) == [suggestion.path])
        #expect(b.activities.delivered.isEmpty)
        await a.stop()
        await b.stop()
    }

    /// A source from before 0x0C closes the connection on its header (§2.1): the receiver asks
    /// FetchActivity instead and checks the version itself.
    @Test func aSourceThatDoesNotKnowTheFrameGetsFetchActivityAndTheLocalCheckDecides() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, suggestion) = try await suggestedChapter(in: directory, type: type)
        b.activities.setAcceptedVersions(try ActivityVersions(pairs: [(1, 1)]))
        let publication = try #require(await a.ring.radio.currentPublication())
        let record = try ActivityRecord(activityType: type, title: "Chapter 3", userInfo: [:], webpageURL: nil, version: 1, revision: publication.revision)
        let port = a.transfer.port
        await a.transfer.stop()
        let hello = HelloMessage(deviceID: await a.ring.deviceID, rosterDigest: await a.ring.rosterDigest, maxFramePayload: 1_048_576)
        let identity = await a.ring.keeper.identity, pinned = await b.ring.keeper.identity.publicKey
        // The stopped listener's socket is closed asynchronously: the port may take a moment to be free.
        var fake: FakeSourceBeforeVersionedFetch?
        for _ in 0..<50 where fake == nil {
            fake = try? FakeSourceBeforeVersionedFetch(identity: identity, pinned: pinned, port: port, hello: hello, record: record)
            if fake == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let old = try #require(fake)
        defer { old.close() }
        #expect(try await b.continuation.take(suggestion.path, uid: getuid()) == "delivered")
        #expect(old.closedOnHeader >= 1 && old.fetches == 1 && old.reports == 1)
        // Another version: the fallback payload arrives and the local check refuses it.
        let second = try await suggestedAgain(a: a, b: b, record: record)
        b.activities.setAcceptedVersions(try ActivityVersions(pairs: [(2, 3)]))
        #expect(await failureOf { () throws(ServiceFailure) in try await b.continuation.take(second.path, uid: getuid()) } == .versionUnsupported)
        #expect(old.fetches == 2 && old.reports == 1)
        #expect(b.activities.delivered.count == 1)
        await a.stop()
        await b.stop()
    }

    /// A new revision of the same activity on the air, heard by beta: its suggestion.
    func suggestedAgain(a: BusLessNode, b: BusLessNode, record: ActivityRecord) async throws -> ShownSuggestion {
        try await a.ring.radio.publish(try ActivityRecord(activityType: type, title: "Chapter 4", userInfo: [:], webpageURL: nil, version: 1), uid: getuid())
        b.radio.hear(try #require(a.radio.onAir))
        #expect(await eventually(timeout: .seconds(10)) { b.board.suggestions.count == 1 })
        return try #require(b.board.suggestions.first)
    }
}

/// A fake of a v1 source from before FetchActivityOfVersions existed: it answers Hello, FetchActivity
/// (with `record`, whatever revision is asked) and ActivityContinued, and closes the connection without
/// a reply on a frame type it does not know, as §2.1 says a v1 receiver does.
final class FakeSourceBeforeVersionedFetch: Sendable {
    private struct Counts {
        var closedOnHeader = 0
        var fetches = 0
        var reports = 0
    }
    private let listener: TLSListener
    private let counts = Mutex(Counts())
    var closedOnHeader: Int { counts.withLock { $0.closedOnHeader } }
    var fetches: Int { counts.withLock { $0.fetches } }
    var reports: Int { counts.withLock { $0.reports } }

    init(identity: Ed25519PrivateKey, pinned: [UInt8], port: UInt16, hello: HelloMessage, record: ActivityRecord) throws {
        listener = try TLSListener(identity: identity, pins: { PinSet([pinned]) }, host: "127.0.0.1", port: port)
        Task { [listener] in
            while let channel = try? await listener.accept() {
                Task { await self.serve(channel, hello: hello, record: record) }
            }
        }
    }

    private func serve(_ channel: SecureChannel, hello: HelloMessage, record: ActivityRecord) async {
        defer { channel.close() }
        while let frame = try? await channel.receive(timeout: .seconds(10)) {
            let reply: Frame
            switch frame.type {
            case .hello: reply = Frame(type: .hello, requestID: frame.requestID, payload: hello.payload)
            case .fetchActivity:
                counts.withLock { $0.fetches += 1 }
                var answer = record
                if let asked = try? ActivityReference(payload: frame.payload), asked.revision != ActivityReference.anyRevision { answer.revision = asked.revision }
                guard let payload = try? answer.encoded() else { return }
                reply = Frame(type: .activityPayload, requestID: frame.requestID, payload: payload)
            case .activityContinued:
                counts.withLock { $0.reports += 1 }
                reply = Frame(type: .ack, requestID: frame.requestID, payload: [])
            default:
                counts.withLock { $0.closedOnHeader += 1 }
                return
            }
            guard (try? await channel.send(reply)) != nil else { return }
        }
    }

    func close() { listener.close() }
}
