// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonStore
import BatonTransport
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// A TCP relay on 127.0.0.1 in front of a member's transfer port: a fake of the network between two
/// machines. It forwards both ways and, on its first connection, cuts the link once `cutAfter` bytes
/// went from the source to the receiver, after running `onCut` (a test stops the source there, so
/// nothing can reconnect until it is started again). Later connections are relayed whole.
final class CuttingRelayFake: @unchecked Sendable {
    let port: UInt16
    private let listening: Int32
    private let target: UInt16
    private let cutAfter: Int
    private let onCut: @Sendable () -> Void
    private let connections = Mutex(0)
    private let stopped = Mutex(false)
    /// Drop instead of cut: after `cutAfter` bytes nothing more passes either way and nothing is
    /// closed (a link that went dead: no FIN, no RST), until `stop`.
    private let silently: Bool
    private let dropped = Mutex(false)
    private let sockets = Mutex<[Int32]>([])

    init(target: UInt16, cutAfter: Int, silently: Bool = false, onCut: @escaping @Sendable () -> Void) throws {
        self.target = target
        self.cutAfter = cutAfter
        self.silently = silently
        self.onCut = onCut
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        listening = descriptor
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// How many connections reached the relay.
    var count: Int { connections.withLock { $0 } }

    func stop() {
        stopped.withLock { $0 = true }
        shutdown(listening, Int32(SHUT_RDWR))
        close(listening)
        for socket in sockets.withLock({ $0 }) { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    private func acceptLoop() {
        while !stopped.withLock({ $0 }) {
            let client = accept(listening, nil, nil)
            guard client >= 0 else { return }
            let number = connections.withLock { $0 += 1; return $0 }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = Self.loopback(port: target)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard connected == 0 else {
                close(server)
                close(client)
                continue
            }
            sockets.withLock { $0 += [client, server] }
            let limit = number == 1 ? cutAfter : Int.max
            Thread.detachNewThread { [self] in pump(from: client, to: server, limit: .max) }
            Thread.detachNewThread { [self] in pump(from: server, to: client, limit: limit) }
        }
    }

    private func pump(from source: Int32, to destination: Int32, limit: Int) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var moved = 0
        while true {
            let want = min(buffer.count, limit - moved)
            if want == 0 && silently {
                dropped.withLock { $0 = true }
                onCut()
            }
            // A dead link: whatever comes is lost, in both directions, and nobody is told.
            if dropped.withLock({ $0 }) {
                let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
                if count <= 0 { return }
                continue
            }
            let count = want == 0 ? 0 : buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, want) }
            if count <= 0 { break }
            var written = 0
            while written < count {
                let done = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + written, count - written) }
                if done <= 0 { break }
                written += done
            }
            moved += count
        }
        if moved >= limit && limit != .max { onCut() }
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(destination, Int32(SHUT_RDWR))
    }
}

/// Blocks the calling thread (a relay thread) until `work` is done.
func runBlocking(_ work: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task {
        await work()
        done.signal()
    }
    done.wait()
}

@Suite("BatonServiceTests: Continue brings the activity's document, resumable", .serialized)
struct DocumentContinueTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("document-continue-\(UUID().uuidString)")
    static let type = "org.example.Drawing.editing"

    /// Two paired nodes; alpha publishes an activity with a document of `size` bytes; beta pulls
    /// documents into its inbox.
    func makePair(size: Int, receiver: TransferService.Configuration = BusLessNode.transferConfiguration)
        async throws -> (a: BusLessNode, b: BusLessNode, bytes: [UInt8], info: DocumentInfo, inbox: DocumentInbox) {
        let a = try await BusLessNode.start(in: directory, name: "alpha")
        let b = try await BusLessNode.start(in: directory, name: "beta", handled: [Self.type], transfer: receiver)
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(30)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        let record = try ActivityRecord(activityType: Self.type, title: "Plan", userInfo: ["page": .integer(2)], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), record)
        try await a.ring.radio.publish(record, uid: getuid())
        let bytes = documentBytes(count: size, seed: 0x9E37_79B9)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let snapshotPath = directory.appendingPathComponent("snapshot-alpha").path
        try Data(bytes).write(to: URL(fileURLWithPath: snapshotPath))
        let info = try DocumentInfo(totalSize: UInt64(size), digest: SHA256.hash(bytes), mediaType: "application/pdf", documentID: "plan-2")
        a.activities.setDocument(AttachedDocument(path: snapshotPath, info: info))
        let base = directory.appendingPathComponent("beta-documents")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        let inbox = try DocumentInbox.ofUser(getuid(), under: base.path)
        b.activities.setInbox(inbox)
        return (a, b, bytes, info, inbox)
    }

    func inboxFiles(_ inbox: DocumentInbox) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: inbox.directory).sorted() }

    @Test func aContinueBringsTheDocumentOnItsOneChannelWithProgressForTheCallerOnly() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, bytes, info, inbox) = try await makePair(size: 40 * DocumentChunk.maxDataBytes + 17)
        let channels = await a.transfer.acceptedChannels
        let outcome = try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid(), caller: ":1.77")
        #expect(outcome == "delivered")
        #expect(await a.transfer.acceptedChannels == channels + 1, "fetch, document and ActivityContinued share one TLS session")
        let document = try #require(b.activities.deliveredDocuments.first ?? nil)
        #expect(document.info == info)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: document.path))) == bytes)
        #expect(try inboxFiles(inbox) == [info.digest.hexString + ".document"])
        #expect(await eventually(timeout: .seconds(5)) { a.activities.continuedDevices == ["beta"] })
        // Progress went to the caller only, ends at the total, and is rate-limited (41 chunks arrived).
        #expect(await eventually(timeout: .seconds(5)) { b.board.progress.last?.0.received == UInt64(bytes.count) })
        let progress = b.board.progress
        #expect(progress.allSatisfy { $0.1 == ":1.77" && $0.0.total == UInt64(bytes.count) && $0.0.activityType == Self.type })
        #expect(progress.count < 41)
        #expect(progress.map(\.0.received) == progress.map(\.0.received).sorted())
        // The metadata that went over the wire carries neither the document's bytes nor its path.
        let delivered = try #require(b.activities.delivered.first?.record)
        let wire = try delivered.encoded()
        #expect(!Self.contains(wire, Array(directory.path.utf8)))
        #expect(!Self.contains(wire, Array(bytes[0..<32])))
        await a.stop()
        await b.stop()
    }

    @Test func anActivityWithoutADocumentIsDeliveredWithout() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, _, _, inbox) = try await makePair(size: 10)
        a.activities.setDocument(nil)
        #expect(try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid()) == "delivered")
        #expect(b.activities.deliveredDocuments.count == 1 && b.activities.deliveredDocuments[0] == nil)
        #expect(try inboxFiles(inbox).isEmpty)
        await a.stop()
        await b.stop()
    }

    /// The app's WillSave changes the activity as it leaves (a media player's position): the
    /// change is republished under a new advert revision while the payload carries the revision
    /// the fetch named. The FetchDocument that follows names the payload's revision: served
    /// (protocol §6.5), where before it was refused and the activity delivered without its document.
    @Test func aDocumentIsServedForThePayloadWhoseSaveMovedTheRevision() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, bytes, info, _) = try await makePair(size: 3 * DocumentChunk.maxDataBytes + 5)
        let before = try #require(await a.ring.radio.currentPublication()?.revision)
        let saved = try ActivityRecord(activityType: Self.type, title: "Plan", userInfo: ["page": .integer(3)], webpageURL: nil, version: 1)
        a.activities.setOnTransfer { [radio = a.ring.radio] in
            a.activities.setCurrent(ActivityID(uid: getuid(), serial: 1), saved)
            try? await radio.publish(saved, uid: getuid())
        }
        #expect(try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid()) == "delivered")
        #expect(await a.ring.radio.currentPublication()?.revision != before, "the save did not move the revision")
        let document = try #require(b.activities.deliveredDocuments.first ?? nil, "delivered without its document")
        #expect(document.info == info)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: document.path))) == bytes)
        await a.stop()
        await b.stop()
    }

    /// The link breaks mid-document (a relay cuts it); the pull goes on over a new connection from
    /// the offset reached: one delivery, one imported document, digest checked.
    @Test func aLinkCutMidDocumentResumesFromItsOffset() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, bytes, info, inbox) = try await makePair(size: 64 * DocumentChunk.maxDataBytes)
        let relay = try CuttingRelayFake(target: a.transfer.port, cutAfter: 1 << 20, onCut: {})
        defer { relay.stop() }
        let idA = await a.ring.deviceID
        await b.ring.endpointWorked(idA, "127.0.0.1:\(relay.port)")
        #expect(try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid()) == "delivered")
        let document = try #require(b.activities.deliveredDocuments.first ?? nil)
        #expect(document.resumes == 1)
        #expect(document.resumedBytes == 0)
        #expect(relay.count >= 2)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: document.path))) == bytes)
        #expect(try inboxFiles(inbox) == [info.digest.hexString + ".document"])
        #expect(b.activities.delivered.count == 1)
        #expect(await eventually(timeout: .seconds(5)) { a.activities.continuedDevices == ["beta"] })
        await a.stop()
        await b.stop()
    }

    /// The link goes dead mid-document (packets dropped, nothing closed): the pull notices by its
    /// chunk timeout and resumes from its offset on a new connection.
    @Test func aLinkThatGoesSilentMidDocumentResumesAfterTheTimeout() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, bytes, info, inbox) = try await makePair(size: 64 * DocumentChunk.maxDataBytes,
                                                            receiver: .init(listenHost: "127.0.0.1", requestTimeout: .seconds(2), bluetooth: false))
        let relay = try CuttingRelayFake(target: a.transfer.port, cutAfter: 1 << 20, silently: true, onCut: {})
        defer { relay.stop() }
        let idA = await a.ring.deviceID
        await b.ring.endpointWorked(idA, "127.0.0.1:\(relay.port)")
        #expect(try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid()) == "delivered")
        let document = try #require(b.activities.deliveredDocuments.first ?? nil)
        #expect(document.resumes == 1)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: document.path))) == bytes)
        #expect(try inboxFiles(inbox) == [info.digest.hexString + ".document"])
        #expect(b.activities.delivered.count == 1)
        await a.stop()
        await b.stop()
    }

    /// The source dies mid-document: Continue fails as interrupted (retryable) and keeps what arrived;
    /// once the source is back, a retry of Continue resumes from the partial file's offset.
    @Test func aSourceKilledMidDocumentIsResumedByTheNextContinue() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b, bytes, info, inbox) = try await makePair(size: 64 * DocumentChunk.maxDataBytes)
        let port = a.transfer.port
        let transfer = a.transfer
        let relay = try CuttingRelayFake(target: port, cutAfter: 1 << 20, onCut: { runBlocking { await transfer.stop() } })
        defer { relay.stop() }
        let idA = await a.ring.deviceID
        await b.ring.endpointWorked(idA, "127.0.0.1:\(relay.port)")
        await #expect(throws: ServiceFailure.self) {
            _ = try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid())
        }
        #expect(b.activities.delivered.isEmpty, "nothing reaches a handler without its document")
        let held = inbox.resumeOffset(digest: info.digest)
        #expect(held > 0 && held < UInt64(bytes.count), "what arrived before the source died is kept")
        #expect(try inboxFiles(inbox) == [info.digest.hexString + ".partial"])
        // The source comes back on the same port.
        let restarted = try await TransferService.start(ring: a.ring, activities: a.activities,
                                                        configuration: .init(listenHost: "127.0.0.1", port: port, bluetooth: false), log: { _ in })
        #expect(try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid()) == "delivered")
        let document = try #require(b.activities.deliveredDocuments.first ?? nil)
        #expect(document.resumedBytes == held)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: document.path))) == bytes)
        #expect(try inboxFiles(inbox) == [info.digest.hexString + ".document"])
        #expect(b.activities.delivered.count == 1)
        await restarted.stop()
        await a.stop()
        await b.stop()
    }

    /// Twenty rounds, each with a fresh document: odd rounds kill the source at a random byte of the
    /// stream (restarted on its port, then Continue retried); even rounds play a receiver killed
    /// mid-pull (its inbox holds a random-length prefix, as a killed process leaves its appends) and
    /// restarted. Counted outcomes: every round ends with exactly one imported document with the
    /// right digest, no partial file, one delivery; never a corrupt or duplicated import.
    @Test func killingEitherSideAtRandomPointsNeverCorruptsOrDuplicatesAnImport() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var (a, b, _, _, inbox) = try await makePair(size: 16)
        let idA = await a.ring.deviceID
        var source = a.transfer
        let port = source.port
        var generator = SystemRandomNumberGenerator()
        var resumedRounds = 0, failedFirstTries = 0
        var restarted: [TransferService] = []
        for round in 1...20 {
            let size = Int.random(in: 8...24, using: &generator) * DocumentChunk.maxDataBytes + Int.random(in: 0..<1000, using: &generator)
            var bytes = [UInt8](repeating: 0, count: size)
            for index in stride(from: 0, to: size, by: 8) { bytes[index] = UInt8(truncatingIfNeeded: round &* 31 &+ index / 8) }
            let snapshot = directory.appendingPathComponent("round-\(round)").path
            try Data(bytes).write(to: URL(fileURLWithPath: snapshot))
            let info = try DocumentInfo(totalSize: UInt64(size), digest: SHA256.hash(bytes), mediaType: "application/pdf", documentID: "plan-\(round)")
            a.activities.setDocument(AttachedDocument(path: snapshot, info: info))
            if round % 2 == 1 {
                let dying = source
                let relay = try CuttingRelayFake(target: port, cutAfter: Int.random(in: (2 * DocumentChunk.maxDataBytes)..<size, using: &generator),
                                                 onCut: { runBlocking { await dying.stop() } })
                defer { relay.stop() }
                await b.ring.endpointWorked(idA, "127.0.0.1:\(relay.port)")
                do {
                    _ = try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid())
                } catch {
                    failedFirstTries += 1
                }
                source = try await TransferService.start(ring: a.ring, activities: a.activities,
                                                         configuration: .init(listenHost: "127.0.0.1", port: port, bluetooth: false), log: { _ in })
                restarted.append(source)
            } else {
                // The receiver died mid-pull: what it had appended (a prefix) is on disk; it starts again.
                let cut = Int.random(in: 1..<size, using: &generator)
                try Data(bytes[0..<cut]).write(to: URL(fileURLWithPath: inbox.partialPath(digest: info.digest)))
                await b.stop()
                b = try await BusLessNode.restart(b, in: directory, name: "beta", handled: [Self.type])
                b.activities.setInbox(inbox)
            }
            let before = b.activities.deliveredDocuments.count
            let outcome = try await b.continuation.continueActivity(from: "alpha", type: Self.type, uid: getuid())
            #expect(outcome == "delivered", "round \(round)")
            let document = try #require(b.activities.deliveredDocuments.last ?? nil)
            #expect(b.activities.deliveredDocuments.count == before + 1)
            if document.resumedBytes > 0 { resumedRounds += 1 }
            #expect(try SHA256.hash(Array(Data(contentsOf: URL(fileURLWithPath: document.path)))) == info.digest, "round \(round)")
            let files = try inboxFiles(inbox)
            #expect(files.filter { $0.hasSuffix(".partial") }.isEmpty, "round \(round): \(files)")
            #expect(files.filter { $0.hasSuffix(".document") }.count == round, "one import per round, none twice")
        }
        // Both kinds of kill happened ten times and every one resumed from what was kept.
        #expect(failedFirstTries == 10)
        #expect(resumedRounds == 20)
        for service in restarted { await service.stop() }
        await a.stop()
        await b.stop()
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start..<start + needle.count].elementsEqual(needle) { return true }
        return false
    }
}
