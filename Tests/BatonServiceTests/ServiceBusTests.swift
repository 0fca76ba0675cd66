// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonDBus
import Foundation
import Testing
@testable import BatonService

@Suite("BatonServiceTests: activities over a real bus", .serialized)
struct ServiceBusTests {
    @Test func createReadUpdateAndInvalidate() async throws {
        try await withService { fixture in
            let client = fixture.client
            let path = try await client.createActivity(
                title: "Chapter 1",
                userInfo: ["page": .int32(12), "tags": .stringArray(["a", "b"]), "when": .structure([.string("date"), .double(1.5e9)])],
                options: ["WebpageURL": .string("https://example.org/book"), "Version": .int64(3), "NeedsSave": .boolean(false)])
            let uid = getuid()
            #expect(path.hasPrefix("/org/baton/activity/u\(uid)_"))
            #expect(try await client.property(path, "Type") == .string("org.example.Reader.reading"))
            #expect(try await client.property(path, "Title") == .string("Chapter 1"))
            #expect(try await client.property(path, "WebpageURL") == .string("https://example.org/book"))
            #expect(try await client.property(path, "Version") == .int64(3))
            #expect(try await client.property(path, "Owner") == .uint32(uid))
            #expect(try await client.property(path, "Status") == .string("idle"))
            #expect(try await client.property(path, "Current") == .boolean(false))
            #expect(try await client.property(path, "LastError") == .string(""))
            // Canonical form: integers as x, arrays as av, dates as (sd).
            let userInfo = try #require(try await client.property(path, "UserInfo").asDictionary)
            #expect(userInfo["page"] == .int64(12))
            #expect(userInfo["tags"] == .array(elementSignature: "v", [.variant(.string("a")), .variant(.string("b"))]))
            #expect(userInfo["when"] == .structure([.string("date"), .double(1.5e9)]))

            let changes = try await client.signals(matching: DBusMatchRule(interface: "org.freedesktop.DBus.Properties",
                                                                           member: "PropertiesChanged", path: path))
            _ = try await client.activity(path, "Update", [.propertyDictionary(["Title": .string("Chapter 2"), "WebpageURL": .string("")])])
            let signal = try await first(of: changes)
            let changed = try #require(signal.arguments[1].asDictionary)
            #expect(changed["Title"] == .string("Chapter 2"))
            #expect(changed["WebpageURL"] == .string(""))
            #expect(try await client.property(path, "Title") == .string("Chapter 2"))

            let payload = try #require(try await client.activity(path, "GetPayload").first?.asDictionary)
            #expect(payload["Type"] == .string("org.example.Reader.reading"))
            #expect(payload["Title"] == .string("Chapter 2"))
            #expect(payload["WebpageURL"] == nil)
            #expect(payload["Version"] == .int64(3))

            _ = try await client.activity(path, "Invalidate")
            await expectError(DBusError.unknownObjectName) { _ = try await client.property(path, "Type") }
            let status = try #require(try await client.manager("GetStatus").first?.asDictionary)
            #expect(status["State"] == .string("running"))
            // Nothing private in logs.
            #expect(!fixture.log.lines.contains { $0.contains("Chapter") || $0.contains("example.org") })
        }
    }

    @Test func becomeCurrentPublishesAndTheNextOneResignsThePrevious() async throws {
        let publisher = FakePublisher()
        var options = FixtureOptions()
        options.publisher = publisher
        try await withService(options) { fixture in
            let client = fixture.client
            let first = try await client.createActivity(title: "one")
            let second = try await client.createActivity(title: "two")
            #expect(try await client.manager("GetCurrentActivity") == [.objectPath("/")])
            _ = try await client.activity(first, "BecomeCurrent")
            #expect(try await eventually { try await client.property(first, "Status") == .string("published") })
            #expect(try await client.property(first, "Current") == .boolean(true))
            #expect(try await client.property(first, "Revision") == .uint32(1))
            #expect(try await client.manager("GetCurrentActivity") == [.objectPath(first)])

            _ = try await client.activity(first, "Update", [.propertyDictionary(["Title": .string("one b")])])
            #expect(try await eventually { try await client.property(first, "Revision") == .uint32(2) })
            #expect(try await eventually { try await client.property(first, "Status") == .string("published") })

            _ = try await client.activity(second, "BecomeCurrent")
            #expect(try await client.property(first, "Current") == .boolean(false))
            #expect(try await client.property(first, "Status") == .string("idle"))
            #expect(try await client.manager("GetCurrentActivity") == [.objectPath(second)])
            #expect(try await eventually { try await client.property(second, "Status") == .string("published") })
            #expect(publisher.publications.map(\.title) == ["one", "one b", "two"])
            // Revision is the advert revision the daemon serves (FetchActivity takes it), device-wide:
            // the third publication's, not a count of the second activity's own changes (issue 23).
            #expect(try await client.property(second, "Revision") == .uint32(3))
            #expect(try await client.property(first, "Revision") == .uint32(2))

            _ = try await client.activity(second, "ResignCurrent")
            #expect(try await client.property(second, "Status") == .string("idle"))
            #expect(try await client.manager("GetCurrentActivity") == [.objectPath("/")])
            #expect(await eventually { publisher.withdrawals.count == 1 })
            // Resigning a non-current activity changes nothing.
            _ = try await client.activity(second, "ResignCurrent")

            let text = try String(contentsOfFile: fixture.statusFilePath, encoding: .utf8)
            #expect(!text.contains("one b") && !text.contains("\"two\""))
            let status = try JSONDecoder().decode(DaemonStatus.self, from: Data(text.utf8))
            #expect(status.activities.map(\.objectPath) == [first, second])
            #expect(status.activities.map(\.type) == ["org.example.Reader.reading", "org.example.Reader.reading"])
            #expect(status.activities.map(\.status) == ["idle", "idle"])
        }
    }

    @Test func withoutARadioBecomeCurrentFailsWithRadioUnavailable() async throws {
        var options = FixtureOptions()
        options.publisher = nil
        try await withService(options) { fixture in
            let path = try await fixture.client.createActivity()
            _ = try await fixture.client.activity(path, "BecomeCurrent")
            #expect(try await eventually { try await fixture.client.property(path, "Status") == .string("failed") })
            #expect(try await fixture.client.property(path, "LastError") == .string("radio-unavailable"))
            let status = try #require(try await fixture.client.manager("GetStatus").first?.asDictionary)
            #expect(status["State"] == .string("degraded"))
            #expect(status["Radio"] == .string("unavailable"))
            let errors = try #require(status["Errors"]?.arrayValue)
            let record = try #require(errors.first?.asDictionary)
            #expect(record["Category"] == .string("radio-unavailable"))
            #expect(record["Count"] == .uint32(1))
            let file = try String(contentsOfFile: fixture.statusFilePath, encoding: .utf8)
            #expect(file.contains("radio-unavailable") && file.contains("\"failed\""))
        }
    }

    @Test func clientDisconnectInvalidatesItsActivitiesAndHandlers() async throws {
        try await withService { fixture in
            let leaving = try fixture.connect()
            let path = try await leaving.createActivity()
            _ = try await leaving.activity(path, "BecomeCurrent")
            _ = try await leaving.manager("RegisterHandler", [.objectPath("/handler"), .stringArray(["org.example.Gone.type"])])
            #expect(try await fixture.client.manager("GetHandledTypes") == [.stringArray(["org.example.Gone.type"])])
            let removed = try await fixture.client.signals(matching: DBusMatchRule(interface: "org.freedesktop.DBus.ObjectManager",
                                                                                   member: "InterfacesRemoved"))
            leaving.close()
            let signal = try await first(of: removed)
            #expect(signal.arguments.first == .objectPath(path))
            #expect(try await fixture.client.manager("GetCurrentActivity") == [.objectPath("/")])
            #expect(try await fixture.client.manager("GetHandledTypes") == [.stringArray([])])
            #expect(await fixture.service.registry.activities.isEmpty)
        }
    }

    @Test func objectManagerAnnouncesActivitiesWithoutPrivateProperties() async throws {
        try await withService { fixture in
            let added = try await fixture.client.signals(matching: DBusMatchRule(interface: "org.freedesktop.DBus.ObjectManager",
                                                                                 member: "InterfacesAdded"))
            let path = try await fixture.client.createActivity(title: "secret title")
            let signal = try await first(of: added)
            #expect(signal.arguments.first == .objectPath(path))
            let interfaces = try #require(signal.arguments[1].dictionaryValue)
            let properties = try #require(interfaces[.string("org.baton.Activity1")]?.asDictionary)
            #expect(Set(properties.keys) == ["Type", "Status"])

            let managed = try await fixture.client.call(destination: "org.baton", path: "/org/baton",
                                                        interface: "org.freedesktop.DBus.ObjectManager", method: "GetManagedObjects")
            let objects = try #require(managed.first?.dictionaryValue)
            let mine = try #require(objects[.objectPath(path)]?.dictionaryValue?[.string("org.baton.Activity1")]?.asDictionary)
            #expect(mine["Title"] == .string("secret title"))
        }
    }

    @Test func perUserLimitOf64Activities() async throws {
        try await withService { fixture in
            for _ in 0..<ActivityRegistry.maxActivitiesPerUser { _ = try await fixture.client.createActivity() }
            await expectError(ErrorName.limitExceeded) { _ = try await fixture.client.createActivity() }
            #expect(try await fixture.client.manager("GetStatus").count == 1)
        }
    }

    @Test func handlerRegistrationRules() async throws {
        try await withService { fixture in
            let client = fixture.client
            _ = try await client.manager("RegisterHandler", [.objectPath("/h"), .stringArray(["org.example.A.b"])])
            await expectError(ErrorName.alreadyExists) {
                _ = try await client.manager("RegisterHandler", [.objectPath("/h"), .stringArray(["org.example.A.c"])])
            }
            await expectError(ErrorName.invalidArguments) {
                _ = try await client.manager("RegisterHandler", [.objectPath("/h2"), .stringArray(["nodots"])])
            }
            await expectError(ErrorName.invalidArguments) {
                _ = try await client.manager("RegisterHandler", [.objectPath("/h3"), .stringArray([])])
            }
            for index in 1..<Handlers.maxHandlersPerUser {
                _ = try await client.manager("RegisterHandler", [.objectPath("/many/h\(index)"), .stringArray(["org.example.A.b"])])
            }
            await expectError(ErrorName.limitExceeded) {
                _ = try await client.manager("RegisterHandler", [.objectPath("/many/over"), .stringArray(["org.example.A.b"])])
            }
            _ = try await client.manager("UnregisterHandler", [.objectPath("/h")])
            await expectError(ErrorName.unknownActivity) { _ = try await client.manager("UnregisterHandler", [.objectPath("/h")]) }
        }
    }

    @Test func privateChangesGoOnlyToTheOwningConnection() async throws {
        try await withService { fixture in
            let path = try await fixture.client.createActivity(title: "before")
            let bystander = try fixture.connect()
            defer { bystander.close() }
            let rule = DBusMatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", path: path)
            let ownerSignals = try await fixture.client.signals(matching: rule)
            let bystanderSignals = try await bystander.signals(matching: rule)
            _ = try await fixture.client.activity(path, "Update", [.propertyDictionary(["Title": .string("private")])])
            let ownerSignal = try await first(of: ownerSignals)
            #expect(ownerSignal.arguments[1].asDictionary?["Title"] == .string("private"))
            // The next thing the bystander sees is the public Status change, not the title.
            _ = try await fixture.client.activity(path, "BecomeCurrent")
            let seen = try await first(of: bystanderSignals)
            let changed = try #require(seen.arguments[1].asDictionary)
            #expect(Set(changed.keys).isSubset(of: ["Type", "Status"]))
            #expect(changed["Status"] == .string("preparing"))
        }
    }

    @Test func wasContinuedReachesTheSource() async throws {
        try await withService { fixture in
            let recorder = CallRecorder()
            try await fixture.client.export([DBusInterface("org.baton.ActivitySource1", methods: [
                DBusMethod("WasContinued", in: [.init("activity", "o"), .init("device", "s")]) { call in
                    recorder.append(call)
                    return []
                },
            ])], at: "/src")
            let path = try await fixture.client.createActivity(options: ["Source": .objectPath("/src")])
            let id = try #require(ActivityID(objectPath: path))
            await fixture.service.notifyWasContinued(id, device: "Tablet")
            #expect(recorder.calls.map(\.arguments) == [[.objectPath(path), .string("Tablet")]])
            // A source that vanished is recorded as source-gone.
            let other = try await fixture.client.createActivity(options: ["Source": .objectPath("/nowhere")])
            await fixture.service.notifyWasContinued(try #require(ActivityID(objectPath: other)), device: "Tablet")
            #expect(await fixture.service.status().errors.map(\.category) == [.sourceGone])
        }
    }
}
