// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import BatonTransport
import Foundation
import Synchronization
import Testing
@testable import BatonService

/// Red-team pass on the receiver's side of FetchActivityOfVersions: a rogue ring member answers the
/// versioned fetch the way no honest source does (protocol §2.1 "Frames", §6.2, §9 steps 3–4). The
/// receiver's (fake) handler accepts version 1 only. Held means: nothing of another version is
/// delivered, no ActivityContinued is sent for what was not delivered, the receiver asks a bounded
/// number of times, and the Continue fails with a category an app can explain.
@Suite("BatonServiceTests: red team, a rogue source answering FetchActivityOfVersions", .serialized)
struct RedTeamVersionSourceTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redteam-version-source-\(UUID().uuidString)")
    let type = "org.example.Reader.reading"

    func failureOf(_ attempt: () async throws(ServiceFailure) -> String) async -> ServiceFailure? {
        do {
            _ = try await attempt()
            return nil
        } catch {
            return error
        }
    }

    /// alpha's listener replaced by `answers` under alpha's identity; beta has the suggestion and
    /// accepts version 1 only.
    func rogueSource(_ answers: RogueVersionSource.Answers, accepting accepted: [(Int64, Int64)] = [(1, 1)])
        async throws -> (a: BusLessNode, b: BusLessNode, suggestion: ShownSuggestion, rogue: RogueVersionSource) {
        let (a, b, suggestion) = try await suggestedChapter(in: directory, type: type)
        b.activities.setAcceptedVersions(try ActivityVersions(pairs: accepted))
        let publication = try #require(await a.ring.radio.currentPublication())
        let port = a.transfer.port
        await a.transfer.stop()
        let hello = HelloMessage(deviceID: await a.ring.deviceID, rosterDigest: await a.ring.rosterDigest, maxFramePayload: 1_048_576)
        let identity = await a.ring.keeper.identity, pinned = await b.ring.keeper.identity.publicKey
        var rogue: RogueVersionSource?
        // The stopped listener's socket is closed asynchronously: the port may take a moment to be free.
        for _ in 0..<50 where rogue == nil {
            rogue = try? RogueVersionSource(identity: identity, pinned: pinned, port: port, hello: hello, revision: publication.revision,
                                            answers: answers)
            if rogue == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        return (a, b, suggestion, try #require(rogue))
    }

    func record(version: Int64) throws -> ActivityRecord {
        try ActivityRecord(activityType: type, title: "Chapter 3", userInfo: ["page": .integer(3)], webpageURL: nil, version: version)
    }

    /// Attack: the source answers 0x0C (ranges [1, 1]) with an ActivityPayload of version 7. Held: the
    /// receiver's own check refuses it before any handler gets it; versionUnsupported, no report.
    @Test func aPayloadOfAnotherVersionIsNeverDeliveredNorReported() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let seven = try record(version: 7)
        let (a, b, suggestion, rogue) = try await rogueSource(.init(versioned: .payload(seven), plain: .payload(seven)))
        defer { rogue.close() }
        let failure = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(failure?.continuationFailure == .versionUnsupported)
        #expect(b.activities.delivered.isEmpty)
        #expect(b.activities.failures == [.versionUnsupported])
        try await Task.sleep(for: .milliseconds(300))
        #expect(rogue.counts == .init(versioned: 1, plain: 0, reports: 0))
        #expect(b.board.suggestions.map(\.path) == [suggestion.path], "the suggestion stays for a newer app")
        await a.stop()
        await b.stop()
    }

    /// Attack: the source answers `versionUnsupported` although its version (1) is the one asked for.
    /// Held: the receiver believes it (the source is the authority on its activity), asks once per
    /// Continue, never falls back to FetchActivity (which would get the payload around the refusal),
    /// and reports versionUnsupported; a retry asks once more.
    @Test func aFalseVersionRefusalIsReportedOnceWithoutAFallbackOrARetryLoop() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let refusal = ErrorFrame(code: .versionUnsupported, message: "no")
        let (a, b, suggestion, rogue) = try await rogueSource(.init(versioned: .error(refusal.payload), plain: .payload(try record(version: 1))))
        defer { rogue.close() }
        for attempt in 1...2 {
            let failure = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
            #expect(failure?.continuationFailure == .versionUnsupported)
            #expect(rogue.counts == .init(versioned: attempt, plain: 0, reports: 0))
        }
        #expect(b.activities.delivered.isEmpty)
        #expect(b.activities.failures == [.versionUnsupported, .versionUnsupported])
        await a.stop()
        await b.stop()
    }

    /// Attack: the source answers 0x0C with `malformed` (as if it did not take the frame) and then the
    /// fallback FetchActivity with version 7. Held: one fallback, the local check refuses the payload.
    /// And when the fallback is refused `malformed` too, the Continue ends after those two requests.
    @Test func aMalformedAnswerFallsBackOnceAndTheLocalCheckStillDecides() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let malformed = ErrorFrame(code: .malformed, message: "what").payload
        let (a, b, suggestion, rogue) = try await rogueSource(.init(versioned: .error(malformed), plain: .payload(try record(version: 7))))
        defer { rogue.close() }
        let failure = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(failure?.continuationFailure == .versionUnsupported)
        try await Task.sleep(for: .milliseconds(300))
        #expect(rogue.counts == .init(versioned: 1, plain: 1, reports: 0))
        rogue.setAnswers(.init(versioned: .error(malformed), plain: .error(malformed)))
        let second = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        #expect(second != nil)
        #expect(rogue.counts == .init(versioned: 2, plain: 2, reports: 0))
        #expect(b.activities.delivered.isEmpty)
        await a.stop()
        await b.stop()
    }

    /// An ActivityPayload of version 1 whose version integer is overwritten with -1 (§6.4: ≥ 0).
    static let negativeVersionPayload: [UInt8] = {
        var bytes = try! ActivityRecord(activityType: "org.example.Reader.reading", title: "Chapter 3", userInfo: [:], webpageURL: nil, version: 1).encoded()
        let key: [UInt8] = [0, 0, 0, 7] + Array("version".utf8) + [0x02]
        let at = (0...(bytes.count - key.count)).first { Array(bytes[$0..<$0 + key.count]) == key }! + key.count
        bytes.replaceSubrange(at..<at + 8, with: [UInt8](repeating: 0xFF, count: 8))
        return bytes
    }()

    /// Attack: answers no v1 source sends: an Error frame with the reserved code 11, an Ack, a Hello,
    /// a payload whose version is -1 (a handler may declare negative ranges). Held: the request
    /// failed (§2.1 "Error codes", §6.4), nothing is delivered or reported, one request.
    @Test(arguments: [
        RogueVersionSource.Answer.frame(.activityPayload, negativeVersionPayload),
        .error([0, 11, 0, 0]),
        .frame(.ack, []),
        .frame(.hello, HelloMessage(deviceID: try! DeviceID(bytes: [UInt8](repeating: 7, count: 16)), rosterDigest: 1, maxFramePayload: 1_048_576).payload),
    ])
    func answersOfTheWrongKindDeliverNothing(answer: RogueVersionSource.Answer) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        // The handler declares negative versions too: only the decoder stands against version -1.
        let (a, b, suggestion, rogue) = try await rogueSource(.init(versioned: answer, plain: .payload(try record(version: 7))),
                                                              accepting: [(Int64.min, 1)])
        defer { rogue.close() }
        let failure = await failureOf { () throws(ServiceFailure) in try await b.continuation.take(suggestion.path, uid: getuid()) }
        // The caller gets the category the handler hears ("Continuation failures" in dbus-api.md).
        #expect(failure?.continuationFailure == .interrupted, "\(String(describing: failure))")
        #expect(b.activities.delivered.isEmpty)
        try await Task.sleep(for: .milliseconds(300))
        #expect(rogue.counts.reports == 0)
        #expect(rogue.counts.versioned == 1)
        #expect(rogue.counts.plain <= 1)
        await a.stop()
        await b.stop()
    }
}

/// A rogue ring member's listener: answers Hello honestly, then 0x0C and FetchActivity as told
/// (`.close` closes the connection without a reply), and acknowledges every ActivityContinued.
final class RogueVersionSource: Sendable {
    enum Answer: Sendable, CustomTestStringConvertible {
        case payload(ActivityRecord)
        /// An Error frame with this exact payload (code, length, message).
        case error([UInt8])
        case frame(FrameType, [UInt8])
        case close

        var testDescription: String {
            switch self {
            case .payload(let record): "payload of version \(record.version)"
            case .error(let bytes): "error \(bytes.prefix(2))"
            case .frame(let type, let payload): "frame \(type) of \(payload.count) bytes"
            case .close: "close"
            }
        }
    }

    struct Answers: Sendable {
        var versioned: Answer
        var plain: Answer
    }

    struct Counts: Equatable, Sendable {
        var versioned = 0
        var plain = 0
        var reports = 0
    }

    private let listener: TLSListener
    private let state: Mutex<(counts: Counts, answers: Answers)>
    var counts: Counts { state.withLock { $0.counts } }
    func setAnswers(_ answers: Answers) { state.withLock { $0.answers = answers } }

    init(identity: Ed25519PrivateKey, pinned: [UInt8], port: UInt16, hello: HelloMessage, revision: UInt32, answers: Answers) throws {
        listener = try TLSListener(identity: identity, pins: { PinSet([pinned]) }, host: "127.0.0.1", port: port)
        state = Mutex((Counts(), answers))
        Task { [listener] in
            while let channel = try? await listener.accept() {
                Task { await self.serve(channel, hello: hello, revision: revision) }
            }
        }
    }

    private func serve(_ channel: SecureChannel, hello: HelloMessage, revision: UInt32) async {
        defer { channel.close() }
        while let frame = try? await channel.receive(timeout: .seconds(10)) {
            let answer: Answer
            switch frame.type {
            case .hello: answer = .frame(.hello, hello.payload)
            case .fetchActivityOfVersions: answer = state.withLock { $0.counts.versioned += 1; return $0.answers.versioned }
            case .fetchActivity: answer = state.withLock { $0.counts.plain += 1; return $0.answers.plain }
            case .activityContinued:
                state.withLock { $0.counts.reports += 1 }
                answer = .frame(.ack, [])
            default: return
            }
            let reply: Frame
            switch answer {
            case .payload(var record):
                record.revision = revision
                guard let payload = try? record.encoded() else { return }
                reply = Frame(type: .activityPayload, requestID: frame.requestID, payload: payload)
            case .error(let payload): reply = Frame(type: .error, requestID: frame.requestID, payload: payload)
            case .frame(let type, let payload): reply = Frame(type: type, requestID: frame.requestID, payload: payload)
            case .close: return
            }
            guard (try? await channel.send(reply)) != nil else { return }
        }
    }

    func close() { listener.close() }
}
