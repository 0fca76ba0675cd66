// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonDBus
import Foundation
import Testing
@testable import BatonService

/// Lets a test hold an exported method handler open, then release it.
final class Gate: Sendable {
    let stream: AsyncStream<Void>
    let continuation: AsyncStream<Void>.Continuation
    init() { (stream, continuation) = AsyncStream.makeStream(of: Void.self) }
    func wait() async { for await _ in stream {} }
    func open() { continuation.finish() }
}

/// Exports an ActivitySource1 whose WillSave runs `answer`.
func exportSource(on connection: DBusConnection, at path: String = "/source",
                  answer: @escaping @Sendable () async throws -> DBusValue) async throws {
    try await connection.export([DBusInterface("org.baton.ActivitySource1", methods: [
        DBusMethod("WillSave", in: [.init("activity", "o")], out: [.init("changes", "a{sv}")]) { _ in [try await answer()] },
        DBusMethod("WasContinued", in: [.init("activity", "o"), .init("device", "s")]) { _ in [] },
    ])], at: path)
}

@Suite("BatonServiceTests: bad input and WillSave over a real bus", .serialized)
struct InputAndSaveTests {
    @Test func everyBadInputClassIsRefusedAndTheDaemonSurvives() async throws {
        try await withService { fixture in
            let client = fixture.client
            func create(type: String = "org.example.A.b", title: String = "t", userInfo: [String: DBusValue] = [:],
                        options: [String: DBusValue] = [:]) async throws {
                _ = try await client.createActivity(type: type, title: title, userInfo: userInfo, options: options)
            }
            // Bad type strings.
            for type in ["", "nodots", "a..b", "trailing.", "bad char.x", String(repeating: "a", count: 129) + ".b"] {
                await expectError(ErrorName.invalidArguments) { try await create(type: type) }
            }
            // Unknown options and wrong option types.
            await expectError(ErrorName.invalidArguments) { try await create(options: ["Colour": .string("red")]) }
            await expectError(ErrorName.invalidArguments) { try await create(options: ["Version": .int32(1)]) }
            await expectError(ErrorName.invalidArguments) { try await create(options: ["Version": .int64(-1)]) }
            await expectError(ErrorName.invalidArguments) { try await create(options: ["NeedsSave": .string("yes")]) }
            await expectError(ErrorName.invalidArguments) { try await create(options: ["Source": .string("/src")]) }
            await expectError(ErrorName.invalidArguments) { try await create(options: ["WebpageURL": .int64(1)]) }
            // Bad URLs.
            for url in ["ftp://example.org", "http://", "https://exa mple.org", "example.org"] {
                await expectError(ErrorName.invalidArguments) { try await create(options: ["WebpageURL": .string(url)]) }
            }
            await expectError(ErrorName.payloadTooLarge) {
                try await create(options: ["WebpageURL": .string("https://e.org/" + String(repeating: "p", count: 2_100))])
            }
            // Wrong userInfo types, NaN, too deep, too large, long title.
            await expectError(ErrorName.invalidArguments) { try await create(userInfo: ["o": .objectPath("/x")]) }
            await expectError(ErrorName.invalidArguments) { try await create(userInfo: ["g": .signature("s")]) }
            await expectError(ErrorName.invalidArguments) { try await create(userInfo: ["t": .uint64(UInt64.max)]) }
            await expectError(ErrorName.invalidArguments) { try await create(userInfo: ["s": .structure([.int32(1), .int32(2)])]) }
            await expectError(ErrorName.invalidArguments) { try await create(userInfo: ["n": .double(.nan)]) }
            await expectError(ErrorName.invalidArguments) {
                try await create(userInfo: ["d": .structure([.string("date"), .double(.nan)])])
            }
            var deep: DBusValue = .int64(1)
            for _ in 0..<20 { deep = .propertyDictionary(["x": deep]) }
            await expectError(ErrorName.invalidArguments) { try await create(userInfo: ["deep": deep]) }
            await expectError(ErrorName.payloadTooLarge) { try await create(userInfo: ["big": .bytes([UInt8](repeating: 7, count: 70_000))]) }
            await expectError(ErrorName.payloadTooLarge) { try await create(title: String(repeating: "é", count: 129)) }
            // A wrong method signature is refused by the bus layer.
            await expectError(DBusError.invalidArgsName) { _ = try await client.manager("CreateActivity", [.string("a.b"), .string("t")]) }

            // Update: unknown keys, read-only keys, wrong types; nothing changes on error.
            let path = try await client.createActivity(title: "kept")
            await expectError(ErrorName.invalidArguments) {
                _ = try await client.activity(path, "Update", [.propertyDictionary(["Owner": .uint32(0)])])
            }
            await expectError(ErrorName.invalidArguments) {
                _ = try await client.activity(path, "Update", [.propertyDictionary(["Title": .int64(1)])])
            }
            await expectError(ErrorName.invalidArguments) {
                _ = try await client.activity(path, "Update", [.propertyDictionary(["Title": .string("changed"), "UserInfo": .propertyDictionary(["x": .objectPath("/")])])])
            }
            #expect(try await client.property(path, "Title") == .string("kept"))
            // Messages carry no payload.
            do {
                try await create(title: String(repeating: "SECRET", count: 50))
            } catch let error as DBusError {
                #expect(!error.message.contains("SECRET"))
            }
            // The daemon survives all of it.
            #expect(try await client.manager("GetStatus").count == 1)
            #expect(try await client.activity(path, "GetPayload").count == 1)
        }
    }

    @Test func willSaveAnswerIsAppliedBeforeThePayloadLeaves() async throws {
        try await withService { fixture in
            try await exportSource(on: fixture.client) {
                .propertyDictionary(["Title": .string("saved"), "UserInfo": .propertyDictionary(["page": .int64(42)]), "Version": .int64(2)])
            }
            let path = try await fixture.client.createActivity(
                title: "unsaved", options: ["NeedsSave": .boolean(true), "Source": .objectPath("/source")])
            let payload = try #require(try await fixture.client.activity(path, "GetPayload").first?.asDictionary)
            #expect(payload["Title"] == .string("saved"))
            #expect(payload["Version"] == .int64(2))
            #expect(payload["UserInfo"]?.asDictionary?["page"] == .int64(42))
            #expect(try await fixture.client.property(path, "Title") == .string("saved"))
            #expect(try await fixture.client.property(path, "LastError") == .string(""))
        }
    }

    @Test func slowSourceAnsweringAfterTheTimeoutSendsTheLastSavedState() async throws {
        var options = FixtureOptions()
        options.saveTimeout = .milliseconds(300)
        // The source answers only when the test lets it: GetPayload returning before that proves the
        // daemon did not wait for it past the save timeout, on a machine of any load.
        let gate = SourceGate()
        try await withService(options) { fixture in
            try await exportSource(on: fixture.client) {
                await gate.waitUntilOpened()
                return .propertyDictionary(["Title": .string("too late")])
            }
            let path = try await fixture.client.createActivity(
                title: "last saved", options: ["NeedsSave": .boolean(true), "Source": .objectPath("/source")])
            let payload = try #require(try await fixture.client.activity(path, "GetPayload").first?.asDictionary)
            #expect(await !gate.isOpen, "GetPayload waited for the source")
            #expect(payload["Title"] == .string("last saved"))
            #expect(try await fixture.client.property(path, "LastError") == .string("source-timeout"))
            // The late answer is dropped, not applied afterwards.
            await gate.open()
            await gate.waitUntilAnswered()
            try await Task.sleep(for: .seconds(1))
            #expect(try await fixture.client.property(path, "Title") == .string("last saved"))
            let errors = try #require(try await fixture.client.manager("GetStatus").first?.asDictionary?["Errors"]?.arrayValue)
            #expect(errors.compactMap { $0.asDictionary?["Category"] } == [.string("source-timeout")])
        }
    }

    @Test func silentSourceNeverAnsweringSendsTheLastSavedState() async throws {
        var options = FixtureOptions()
        options.saveTimeout = .milliseconds(300)
        let gate = Gate()
        defer { gate.open() }
        try await withService(options) { fixture in
            try await exportSource(on: fixture.client) {
                await gate.wait()
                return .propertyDictionary([:])
            }
            let path = try await fixture.client.createActivity(
                title: "last saved", options: ["NeedsSave": .boolean(true), "Source": .objectPath("/source")])
            let payload = try #require(try await fixture.client.activity(path, "GetPayload").first?.asDictionary)
            #expect(payload["Title"] == .string("last saved"))
            #expect(try await fixture.client.property(path, "LastError") == .string("source-timeout"))
            #expect(try await fixture.client.manager("GetStatus").count == 1)
        }
    }

    @Test func invalidFailingOrAbsentSourcesRecordSourceTimeout() async throws {
        try await withService { fixture in
            try await exportSource(on: fixture.client, at: "/invalid") { .propertyDictionary(["Title": .int64(5)]) }
            try await exportSource(on: fixture.client, at: "/readonly") { .propertyDictionary(["NeedsSave": .boolean(false)]) }
            try await exportSource(on: fixture.client, at: "/failing") { throw DBusError.failed("app crashed") }
            for source in ["/invalid", "/readonly", "/failing", "/absent"] {
                let path = try await fixture.client.createActivity(
                    title: "kept", options: ["NeedsSave": .boolean(true), "Source": .objectPath(source)])
                let payload = try #require(try await fixture.client.activity(path, "GetPayload").first?.asDictionary)
                #expect(payload["Title"] == .string("kept"), "\(source)")
                #expect(try await fixture.client.property(path, "LastError") == .string("source-timeout"), "\(source)")
                #expect(try await fixture.client.property(path, "NeedsSave") == .boolean(true))
            }
            // Without NeedsSave the source is not asked at all.
            let quiet = try await fixture.client.createActivity(options: ["Source": .objectPath("/failing")])
            _ = try await fixture.client.activity(quiet, "GetPayload")
            #expect(try await fixture.client.property(quiet, "LastError") == .string(""))
        }
    }
}

/// Holds a test source's WillSave answer until the test opens it, and tells when it went out.
actor SourceGate {
    private(set) var isOpen = false
    private var answered = false
    private var openWaiters: [CheckedContinuation<Void, Never>] = []
    private var answerWaiters: [CheckedContinuation<Void, Never>] = []

    func waitUntilOpened() async {
        if !isOpen { await withCheckedContinuation { openWaiters.append($0) } }
        answered = true
        for waiter in answerWaiters { waiter.resume() }
        answerWaiters = []
    }

    func open() {
        isOpen = true
        for waiter in openWaiters { waiter.resume() }
        openWaiters = []
    }

    func waitUntilAnswered() async {
        if !answered { await withCheckedContinuation { answerWaiters.append($0) } }
    }
}
