// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonStore
import BatonTransport
import Foundation
import Glibc
import Synchronization
import Testing
@testable import BatonService

/// A ring member's source side that answers FetchDocument with whatever frames a test scripts: a fake
/// of a hostile member, over real pinned TLS on loopback. The puller under attack is batond's.
final class HostileDocumentSourceFake: Sendable {
    typealias Script = @Sendable (_ request: Frame, _ asked: DocumentRequest, _ channel: SecureChannel) async throws -> Void

    let listener: TLSListener
    let connector: TLSConnector
    private let acceptTask = Mutex<Task<Void, Never>?>(nil)
    private let requests = Mutex<[DocumentRequest]>([])

    init(script: @escaping Script) throws {
        let server = try Ed25519PrivateKey(), client = try Ed25519PrivateKey()
        listener = try TLSListener(identity: server, pins: { PinSet([client.publicKey]) }, host: "127.0.0.1", port: 0)
        connector = try TLSConnector(identity: client, pins: { PinSet([server.publicKey]) })
        let dispatcher = FrameDispatcher(streamedTypes: [.fetchDocument], streamer: { [self] request, channel in
            let asked = try DocumentRequest(payload: request.payload)
            requests.withLock { $0.append(asked) }
            try await script(request, asked, channel)
        }) { request, _ in request }
        let task = Task { [listener] in
            while let channel = try? await listener.accept() {
                Task { _ = await dispatcher.serve(channel) }
            }
        }
        acceptTask.withLock { $0 = task }
    }

    var seen: [DocumentRequest] { requests.withLock { $0 } }

    /// Connects, says Hello, sends the request and returns the first reply, as batond's transfer does.
    func connect(_ request: Frame) async throws(TransportError) -> (channel: SecureChannel, reply: Frame) {
        let channel = try await connector.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(30))
        let exchange = FrameExchange(channel: channel)
        do {
            _ = try await exchange.request(Frame(type: .hello, requestID: 0, payload: []), timeout: .seconds(30))
            return (channel, try await exchange.request(request, timeout: .seconds(30)))
        } catch {
            channel.close()
            throw error
        }
    }

    func stop() {
        acceptTask.withLock { $0?.cancel() }
        listener.close()
    }
}

/// Red-team attacks on the receiving side of documents (protocol §6.5 "Receiver rules", security.md
/// "Documents") by a ring member that streams hostile answers, and on the inbox on disk.
@Suite("BatonServiceTests: red team, hostile document streams", .serialized)
struct RedTeamDocumentStreamTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-documents-\(UUID().uuidString)")
    static let content = Array("the snapshot a hostile member claims to send".utf8)
    static let digest = SHA256.hash(content)

    func makePuller(chunkTimeout: Duration = .seconds(30), maxInterruptions: Int = 2) throws -> (DocumentPuller, DocumentInbox) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let inbox = try DocumentInbox(directory: directory.appendingPathComponent("inbox").path)
        let ids = RequestIDSource(startingAt: 500)
        return (DocumentPuller(inbox: inbox, activity: ActivityReference(typeHash: TypeHash(value: 0xA11C_E000), revision: 5),
                               chunkTimeout: chunkTimeout, maxInterruptions: maxInterruptions, makeRequestID: { ids.make() }), inbox)
    }

    func inboxFiles(_ inbox: DocumentInbox) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: inbox.directory).sorted()
    }

    static func info(size: UInt64 = UInt64(content.count), digest: [UInt8] = digest, documentID: String = "note-1") throws -> DocumentInfo {
        try DocumentInfo(totalSize: size, digest: digest, mediaType: "text/plain", documentID: documentID)
    }

    static func send(_ channel: SecureChannel, _ type: FrameType, _ request: Frame, _ payload: [UInt8]) async throws {
        try await channel.send(Frame(type: type, requestID: request.requestID, payload: payload))
    }

    /// Attack: a DocumentInfo announcing far more than any snapshot may hold (5 GiB, and 2⁶⁴−1), then
    /// bytes at full speed, to fill the receiver's disk. Found: the receiver had no cap and kept the
    /// partial file for a resume. Fixed: a DocumentInfo over the cap (4 GiB, the sources' per-document
    /// cap) is refused before a byte is written.
    @Test(arguments: [UInt64(5) << 30, UInt64.max])
    func aSnapshotAnnouncedOverTheCapIsRefusedBeforeAnyByteIsKept(announced: UInt64) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = try HostileDocumentSourceFake { request, asked, channel in
            try await Self.send(channel, .documentInfo, request, try Self.info(size: announced).payload)
            var offset = asked.offset
            for _ in 0..<64 {
                try await Self.send(channel, .documentChunk, request, DocumentChunk(offset: offset, data: [UInt8](repeating: 0x55, count: 65_536)).payload)
                offset += 65_536
            }
        }
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        await #expect(throws: DocumentPullError.store(.payloadTooLarge(limit: DocumentPuller.defaultSizeLimit, actual: announced))) {
            try await puller.pull(connect: source.connect, progress: { _, _ in })
        }
        #expect(try inboxFiles(inbox).isEmpty, "nothing of the oversize stream was kept")
        #expect(source.seen.count == 1, "refused, not retried")
    }

    /// Attack: after its DocumentInfo the source sends frames of other request ids, without end, so the
    /// pull never progresses nor times out. Found: the receiver skipped them and waited on. Fixed: the
    /// source sends nothing else before the stream ends (§6.5), so such a frame fails the stream.
    @Test func framesOfAnotherRequestInTheStreamFailItInsteadOfKeepingItWaiting() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = try HostileDocumentSourceFake { request, _, channel in
            try await Self.send(channel, .documentInfo, request, try Self.info().payload)
            try await channel.send(Frame(type: .documentChunk, requestID: request.requestID, payload: DocumentChunk(offset: 0, data: [0x74]).payload))
            for id in 0..<200 {
                try await channel.send(Frame(type: .documentChunk, requestID: request.requestID &+ 1 &+ UInt32(id),
                                             payload: DocumentChunk(offset: 1, data: [0x68]).payload))
            }
            // Then silence with the connection open: a receiver still waiting would time out, not fail.
            try await Task.sleep(for: .seconds(20))
        }
        defer { source.stop() }
        let (puller, inbox) = try makePuller(chunkTimeout: .seconds(3), maxInterruptions: 0)
        await #expect(throws: DocumentPullError.protocolError("a frame of another request in the stream")) {
            try await puller.pull(connect: source.connect, progress: { _, _ in })
        }
        #expect(try inboxFiles(inbox).isEmpty, "a violating stream's bytes are discarded")
    }

    /// Attacks on the stream's order and bounds: each is `malformed` for the stream and what was kept of
    /// it is discarded (§6.5). Held.
    @Test(arguments: ["past the size", "out of order", "overlapping", "empty chunk", "a second DocumentInfo", "chunk before info",
                      "media type with a control character", "another snapshot on resume"])
    func aStreamThatBreaksTheRulesIsRefusedAndDiscarded(attack: String) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let content = Self.content
        let source = try HostileDocumentSourceFake { request, asked, channel in
            let info = try Self.info()
            func chunk(_ offset: UInt64, _ data: [UInt8]) async throws {
                try await Self.send(channel, .documentChunk, request, DocumentChunk(offset: offset, data: data).payload)
            }
            switch attack {
            case "past the size":
                try await Self.send(channel, .documentInfo, request, info.payload)
                try await chunk(0, content + [0x21])
            case "out of order":
                try await Self.send(channel, .documentInfo, request, info.payload)
                try await chunk(10, Array(content[10...]))
            case "overlapping":
                try await Self.send(channel, .documentInfo, request, info.payload)
                try await chunk(0, Array(content[0..<10]))
                try await chunk(5, Array(content[5...]))
            case "empty chunk":
                try await Self.send(channel, .documentInfo, request, info.payload)
                try await Self.send(channel, .documentChunk, request, [0, 0, 0, 0, 0, 0, 0, 0])
            case "a second DocumentInfo":
                try await Self.send(channel, .documentInfo, request, info.payload)
                try await chunk(0, Array(content[0..<4]))
                try await Self.send(channel, .documentInfo, request, info.payload)
            case "chunk before info":
                try await chunk(0, content)
            case "media type with a control character":
                var payload = info.payload
                // "text/plain" starts at offset 8 + 32 + 1: turn its 't' into ESC.
                payload[41] = 0x1B
                try await Self.send(channel, .documentInfo, request, payload)
                try await chunk(0, content)
            default:
                // The first connection announces the real snapshot and breaks part way; the resume is
                // answered with another snapshot's DocumentInfo.
                if asked.asksForAnySnapshot {
                    try await Self.send(channel, .documentInfo, request, info.payload)
                    try await chunk(0, Array(content[0..<8]))
                    channel.close()
                    throw TransportError.closed
                }
                try await Self.send(channel, .documentInfo, request, try Self.info(digest: [UInt8](repeating: 7, count: 32)).payload)
                try await chunk(asked.offset, Array(content[Int(asked.offset)...]))
            }
        }
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        do {
            _ = try await puller.pull(connect: source.connect, progress: { _, _ in })
            Issue.record("\(attack): the pull succeeded")
        } catch {
            guard case .protocolError = error else { Issue.record("\(attack): \(error)"); return }
        }
        #expect(try inboxFiles(inbox).allSatisfy { !$0.hasSuffix(".document") }, "\(attack): nothing imported")
        if attack == "another snapshot on resume" {
            // The bytes kept are those of the first, valid stream of the snapshot asked for: a later
            // pull resumes them and checks them against that digest.
            #expect(inbox.resumeOffset(digest: Self.digest) == 8)
        } else {
            #expect(try inboxFiles(inbox).isEmpty, "\(attack): the violating stream's partial file is discarded")
        }
    }

    /// Attack: a document id made of path separators, "..", and 255 bytes, to make the receiver write
    /// outside its inbox or under a name the source picks. Held: the inbox names files by digest only,
    /// and the id reaches the handler as text.
    @Test func aDocumentIdShapedLikeAPathNamesNoFile() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let hostileID = "../../../../etc/" + String(repeating: "../", count: 79) + "xy"
        #expect(hostileID.utf8.count == 255)
        let content = Self.content
        let source = try HostileDocumentSourceFake { request, _, channel in
            try await Self.send(channel, .documentInfo, request, try Self.info(documentID: hostileID).payload)
            try await Self.send(channel, .documentChunk, request, DocumentChunk(offset: 0, data: content).payload)
        }
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        let pulled = try await puller.pull(connect: source.connect, progress: { _, _ in })
        #expect(pulled.info.documentID == hostileID)
        #expect(pulled.path == inbox.directory + "/" + Self.digest.hexString + ".document")
        #expect(try inboxFiles(inbox) == [Self.digest.hexString + ".document"])
        // A 256-byte id cannot even be framed: the length field is one byte and the decoder checks it.
        #expect(throws: WireError.self) { try Self.info(documentID: String(repeating: "a", count: 256)) }
    }

    /// Attack: a source that sends part of the snapshot, then nothing, with the connection held open
    /// (a slow drip at its limit). Held: each wait is bounded by the chunk timeout, each break counts
    /// against the pull's interruptions, and the pull ends `interrupted` with the bytes kept for a
    /// resume, its partial file closed (no descriptor left open).
    @Test func aSourceThatStallsEndsThePullInterruptedWithTheBytesKept() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let content = Self.content
        let source = try HostileDocumentSourceFake { request, asked, channel in
            try await Self.send(channel, .documentInfo, request, try Self.info().payload)
            if asked.offset < 8 { try await Self.send(channel, .documentChunk, request, DocumentChunk(offset: asked.offset, data: Array(content[Int(asked.offset)..<8])).payload) }
            try await Task.sleep(for: .seconds(30))
        }
        defer { source.stop() }
        let (puller, inbox) = try makePuller(chunkTimeout: .seconds(1), maxInterruptions: 2)
        let started = ContinuousClock.now
        await #expect(throws: DocumentPullError.self) { try await puller.pull(connect: source.connect, progress: { _, _ in }) }
        #expect(ContinuousClock.now - started < .seconds(20), "three waits of one second each, not the source's 30")
        #expect(source.seen.count == 3)
        #expect(inbox.resumeOffset(digest: Self.digest) == 8)
        #expect(try inboxFiles(inbox) == [Self.digest.hexString + ".partial"])
        let partial = inbox.partialPath(digest: Self.digest)
        #expect(await eventually(timeout: .seconds(10)) {
            let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return !open.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == partial }
        }, "the partial file is closed")
    }

    /// Attack on the inbox on disk: symbolic links planted as the partial and the finished file of a
    /// snapshot, pointing at a file elsewhere (only the daemon's user can write in the 0700 inbox, but
    /// the daemon must not follow them even so). Held: the partial is opened with O_NOFOLLOW (the pull
    /// fails and writes nothing through the link), a link is never taken for a received document, and
    /// the victim file is unchanged.
    @Test func symbolicLinksPlantedInTheInboxAreNeverFollowed() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let content = Self.content
        let source = try HostileDocumentSourceFake { request, asked, channel in
            try await Self.send(channel, .documentInfo, request, try Self.info().payload)
            try await Self.send(channel, .documentChunk, request, DocumentChunk(offset: asked.offset, data: Array(content[Int(asked.offset)...])).payload)
        }
        defer { source.stop() }
        let (puller, inbox) = try makePuller()
        let victim = directory.appendingPathComponent("victim").path
        let victimBytes = Array("not yours".utf8)
        try Data(victimBytes).write(to: URL(fileURLWithPath: victim))

        #expect(symlink(victim, inbox.documentPath(digest: Self.digest)) == 0)
        #expect(inbox.received(digest: Self.digest) == nil, "a link is not a received document")
        #expect(symlink(victim, inbox.partialPath(digest: Self.digest)) == 0)
        #expect(inbox.resumeOffset(digest: Self.digest) == 0, "a link's target length is no resume offset")
        await #expect(throws: DocumentPullError.self) { try await puller.pull(connect: source.connect, progress: { _, _ in }) }
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: victim))) == victimBytes)

        // Without the planted partial the pull completes and replaces the planted link by the real file.
        unlink(inbox.partialPath(digest: Self.digest))
        let pulled = try await puller.pull(connect: source.connect, progress: { _, _ in })
        var status = stat()
        #expect(lstat(pulled.path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG)
        #expect(status.st_mode & 0o777 == 0o600)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: pulled.path))) == content)
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: victim))) == victimBytes)
        #expect(stat(inbox.directory, &status) == 0 && status.st_mode & 0o777 == 0o700)
    }
}
