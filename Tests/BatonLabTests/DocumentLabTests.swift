// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus
import Foundation
import Synchronization
import Testing

/// A small drawing app on one daemon (a fake of a real app): it holds a two-page document (JSON:
/// pages, comments, annotations, the page shown), publishes it as its current activity with the
/// document attached by descriptor, answers WillSave (optionally running a hook first), and
/// handles the type: every continued document's bytes are kept as they arrived.
final class LabDrawingApp: @unchecked Sendable {
    static let type = "org.example.Drawing.editing"
    let connection: DBusConnection
    let daemon: String
    let directory: URL
    private final class Records: Sendable {
        let received = Mutex<[(bytes: [UInt8], userInfo: [String: DBusValue])]>([])
        let saves = Mutex(0)
        let saveHook = Mutex<(@Sendable (Int) async -> Void)?>(nil)
    }
    private let records = Records()

    init(_ lab: DaemonPair, daemon: String) async throws {
        self.daemon = "org.baton.\(daemon)"
        directory = lab.directory.appendingPathComponent("app-\(daemon)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        connection = try DBusConnection(bus: .address(lab.address))
        let records = self.records
        try await connection.export([DBusInterface("org.baton.ActivityHandler1", methods: [
            DBusMethod("WillContinue", in: [.init("type", "s"), .init("device", "s")], out: [.init("accept", "b")]) { _ in [.boolean(true)] },
            DBusMethod("Continue", in: [.init("type", "s"), .init("title", "s"), .init("userInfo", "a{sv}"), .init("info", "a{sv}")]) { call in
                let info = call.arguments.count > 3 ? call.arguments[3].asDictionary ?? [:] : [:]
                var bytes: [UInt8] = []
                if let descriptor = info["Document"]?.asDictionary?["Fd"]?.unixFDValue {
                    bytes = Array(FileHandle(fileDescriptor: descriptor, closeOnDealloc: true).readDataToEndOfFile())
                }
                let userInfo = call.arguments.count > 2 ? call.arguments[2].asDictionary ?? [:] : [:]
                records.received.withLock { $0.append((bytes, userInfo)) }
                return []
            },
            DBusMethod("FailedToContinue", in: [.init("type", "s"), .init("error", "s"), .init("message", "s")]) { _ in [] },
        ])], at: "/handler")
        try await connection.export([DBusInterface("org.baton.ActivitySource1", methods: [
            DBusMethod("WillSave", in: [.init("activity", "o")], out: [.init("changes", "a{sv}")]) { _ in
                let count = records.saves.withLock { $0 += 1; return $0 }
                if let hook = records.saveHook.withLock({ $0 }) { await hook(count) }
                return [.propertyDictionary([:])]
            },
            DBusMethod("WasContinued", in: [.init("activity", "o"), .init("device", "s")]) { _ in [] },
        ])], at: "/source")
        _ = try await call("/org/baton", "org.baton.Manager1", "RegisterHandler", [.objectPath("/handler"), .stringArray([Self.type])])
    }

    var received: [(bytes: [UInt8], userInfo: [String: DBusValue])] { records.received.withLock { $0 } }
    var saves: Int { records.saves.withLock { $0 } }
    func onWillSave(_ hook: (@Sendable (Int) async -> Void)?) { records.saveHook.withLock { $0 = hook } }

    @discardableResult
    func call(_ path: String, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
              timeout: Duration = .seconds(60)) async throws -> [DBusValue] {
        try await connection.call(destination: daemon, path: path, interface: interface, method: method, arguments: arguments, timeout: timeout)
    }

    /// A new current activity showing `page`, with `document` attached; its path.
    func publish(_ document: [UInt8], page: Int64, needsSave: Bool = false) async throws -> String {
        let reply = try await call("/org/baton", "org.baton.Manager1", "CreateActivity",
                                   [.string(Self.type), .string("Plan, page \(page)"), .propertyDictionary(["page": .int64(page)]),
                                    .propertyDictionary(["Source": .objectPath("/source"), "NeedsSave": .boolean(needsSave)])])
        let path = try #require(reply.first?.objectPathValue)
        try await attach(document, to: path)
        try await call(path, "org.baton.Activity1", "BecomeCurrent")
        return path
    }

    func attach(_ document: [UInt8], to path: String) async throws {
        let file = directory.appendingPathComponent("plan-\(UUID().uuidString).json")
        try Data(document).write(to: file)
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        try await call(path, "org.baton.Activity1", "AttachDocument",
                       [.unixFD(handle.fileDescriptor), .string("application/json"), .string(DocumentLabTests.documentID)])
    }

    func editSession(_ path: String) async throws -> String {
        let reply = try await call(path, "org.freedesktop.DBus.Properties", "Get", [.string("org.baton.Activity1"), .string("EditSession")])
        return reply.first?.unwrapped.stringValue ?? ""
    }

    func deviceID() async throws -> String {
        let members = (try await call("/org/baton/ring", "org.baton.Ring1", "ListMembers").first?.arrayValue ?? []).compactMap(\.asDictionary)
        return try #require(members.first { $0["Self"]?.boolValue == true }?["DeviceId"]?.stringValue)
    }

    /// The suggestions this daemon shows (object paths).
    func suggestions() async throws -> [String] {
        let reply = try await call("/org/baton", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        return (reply.first?.asDictionary?.keys).map { Array($0) }?.filter { $0.hasPrefix("/org/baton/suggestion/") } ?? []
    }

    func close() { connection.close() }
}

/// Issue 14's device check on real bluetoothd: two daemons (hci0, hci1) paired over TCP in the VM.
/// A opens a two-page document, edits a comment, deletes an annotation, moves to page two and
/// publishes it; B hears the advert and continues the suggestion: the same bytes, page, comment
/// and deletion arrive, and the edit session moves to B (A's Activity1.EditSession names B, A's
/// newer edit is refused). B edits and publishes; A hears it and continues back: A owns the session
/// and B no longer does. Then the network is cut during A's save: A's batond is stopped (SIGSTOP;
/// the lab image has no iptables or nft to make its port unreachable) right after its app saved
/// on release, beyond B's request timeout; B's Continue fails with EditSessionBusy and delivers
/// nothing; after SIGCONT, B's retry gets the saved snapshot once (its journalled claim replayed)
/// and A cannot commit over it.
@Suite(.serialized, .enabled(if: Lab.isInside, "needs the BlueZ lab VM (LAB_VM=1)"))
struct DocumentLabTests {
    static let documentID = "plan-two-pages"

    static func json(_ object: [String: Any]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    static func object(_ bytes: [UInt8]) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:]
    }

    @Test func aTwoPageDocumentGoesAToBAndBackWithItsEditSessionAndSurvivesACutDuringTheSave() async throws {
        let lab = try DaemonPair()
        defer { lab.stop() }
        try lab.start(name: "alpha", adapter: "hci0", extraArguments: ["--away-after", "300"])
        try lab.start(name: "beta", adapter: "hci1", extraArguments: ["--away-after", "300"])
        #expect(await lab.eventually(10) { (try? await lab.cli("bt-pair", "alpha", ["list"]))?.0 == 0 })
        #expect(await lab.eventually(10) { (try? await lab.cli("bt-pair", "beta", ["list"]))?.0 == 0 })
        try await TwoDaemonsLabTests().pairOverTCP(lab)
        let a = try await LabDrawingApp(lab, daemon: "alpha"), b = try await LabDrawingApp(lab, daemon: "beta")
        defer { a.close(); b.close() }
        let alphaID = try await a.deviceID(), betaID = try await b.deviceID()
        func logs() -> String { "\n--- alpha\n\(lab.log("alpha"))\n--- beta\n\(lab.log("beta"))" }

        // A: open, edit a comment, delete an annotation, move to page two; publish with the document.
        var drawing: [String: Any] = [
            "pages": ["page one: the site plan", "page two: the elevations"],
            "comments": [["page": 2, "text": "check the roof height"]],
            "annotations": [["id": "a1", "page": 1, "shape": "arrow"], ["id": "a2", "page": 2, "shape": "circle"]],
            "page": 1,
        ]
        drawing["comments"] = [["page": 2, "text": "roof height checked: 7.2 m"]]
        drawing["annotations"] = [["id": "a2", "page": 2, "shape": "circle"]]
        drawing["page"] = 2
        let fromA = try Self.json(drawing)
        let activityA = try await a.publish(fromA, page: 2)

        // B hears it and continues the suggestion.
        #expect(try await lab.eventually(30) { try await b.suggestions().count == 1 }, "beta offered nothing\(logs())")
        let offered = try #require(try await b.suggestions().first)
        let taken = try await b.call(offered, "org.baton.Suggestion1", "Continue")
        #expect(taken.first?.stringValue == "delivered", "\(taken)\(logs())")
        let arrived = try #require(b.received.last)
        #expect(arrived.bytes == fromA, "the same document bytes")
        #expect(arrived.userInfo["page"]?.unwrapped == .int64(2))
        let onB = Self.object(arrived.bytes)
        #expect(onB["page"] as? Int == 2)
        #expect((onB["comments"] as? [[String: Any]])?.first?["text"] as? String == "roof height checked: 7.2 m")
        #expect((onB["annotations"] as? [[String: Any]])?.map { $0["id"] as? String } == ["a2"], "the deletion arrived")
        #expect(try await a.editSession(activityA) == betaID, "A no longer owns the session: B does")
        await #expect(throws: DBusError.self, "A cannot commit while B owns the session") {
            try await a.attach(Array("a late edit on A".utf8), to: activityA)
        }

        // B edits and publishes; A hears it and continues back.
        var edited = onB
        edited["comments"] = [["page": 2, "text": "roof height checked: 7.2 m"], ["page": 1, "text": "north arrow added on B"]]
        let fromB = try Self.json(edited)
        let activityB = try await b.publish(fromB, page: 1)
        #expect(try await b.editSession(activityB) == "this")
        #expect(try await lab.eventually(30) { try await a.suggestions().count == 1 }, "alpha offered nothing\(logs())")
        let back = try await a.call(try #require(try await a.suggestions().first), "org.baton.Suggestion1", "Continue")
        #expect(back.first?.stringValue == "delivered", "\(back)\(logs())")
        #expect(a.received.last?.bytes == fromB)
        #expect(try await b.editSession(activityB) == alphaID, "B no longer owns the session: A does")
        _ = try? await a.call(activityA, "org.baton.Activity1", "Invalidate")

        // A edits again and publishes with NeedsSave; B continues; A's batond stops right after its
        // app saved on release (the claim's WillSave, the second of that Continue) and resumes after
        // B's 15 s request timeout.
        let alphaPID = try #require(lab.named["alpha"]?.processIdentifier)
        var third = Self.object(fromB)
        third["page"] = 1
        let reopened = try await a.publish(try Self.json(third), page: 1, needsSave: true)
        #expect(try await a.editSession(reopened) == "this")
        var saved = third
        saved["annotations"] = []
        let savedBytes = try Self.json(saved)
        let savesBefore = a.saves
        a.onWillSave { [a] count in
            guard count == savesBefore + 2 else { return }
            try? await a.attach(savedBytes, to: reopened)
            kill(alphaPID, SIGSTOP)
            Task.detached {
                try? await Task.sleep(for: .seconds(18))
                kill(alphaPID, SIGCONT)
            }
        }
        let receivedBefore = b.received.count
        #expect(try await lab.eventually(30) { try await b.suggestions().count == 1 }, "beta offered nothing\(logs())")
        let cut = try #require(try await b.suggestions().first)
        do {
            let reply = try await b.call(cut, "org.baton.Suggestion1", "Continue", timeout: .seconds(90))
            Issue.record("the Continue went through while alpha was stopped: \(reply)\(logs())")
        } catch let error as DBusError {
            #expect(error.name == "org.baton.Error.EditSessionBusy", "\(error)\(logs())")
        }
        #expect(b.received.count == receivedBefore, "nothing delivered without the session")
        a.onWillSave(nil)
        // alpha runs again: B's retry (by hand: alpha's advert moved on with the saved snapshot)
        // replays its journalled claim and gets the saved snapshot once.
        #expect(await lab.eventually(30) {
            (try? String(contentsOfFile: "/proc/\(alphaPID)/stat", encoding: .utf8))?.contains(") T ") == false
        }, "alpha was not resumed")
        // Alpha heard again also replays B's journalled claim, which pulls the same snapshot: the
        // retry's pull waits for that one (a CI run failed here when the second pull was refused).
        let retry: [DBusValue]
        do {
            retry = try await b.call("/org/baton/ring", "org.baton.Ring1", "Continue", [.string("alpha"), .string(LabDrawingApp.type)], timeout: .seconds(90))
        } catch {
            Issue.record("the retry failed: \(error)\(logs())")
            return
        }
        #expect(retry.first?.stringValue == "delivered", "\(retry)\(logs())")
        #expect(b.received.count == receivedBefore + 1)
        #expect(b.received.last?.bytes == savedBytes, "the snapshot saved on release, not an older one")
        #expect(try await a.editSession(reopened) == betaID)
        await #expect(throws: DBusError.self, "no newer edit on A over B's copy") {
            try await a.attach(Array("another late edit on A".utf8), to: reopened)
        }
    }
}
