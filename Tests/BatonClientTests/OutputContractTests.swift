// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
@testable import BatonClient
import BatonCommandLine
import BatonDBus
import Foundation
import Testing

/// The key lists of docs/dbus-api.md, "Machine-readable outputs", read from the document itself:
/// one block per command line ("baton --json status", "bt-pair --json discover", ...).
enum DocumentedOutputs {
    /// Command (as the document writes it) → every key its block names, nested ones included.
    static func keys() throws -> [String: Set<String>] {
        let text = try String(contentsOf: Built.packageRoot.appendingPathComponent("docs/dbus-api.md"), encoding: .utf8)
        let start = try #require(text.range(of: "Machine-readable outputs\n"))
        var blocks: [String: Set<String>] = [:]
        var current: String?
        let keyPattern = try NSRegularExpression(pattern: #""([A-Za-z]+)":"#)
        let lines = text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // The section ends where the next one's "====" underline begins (its own comes first).
        for line in lines.dropFirst() {
            if line.hasPrefix("===") { break }
            if line.hasPrefix("\t"), let first = line.dropFirst().first, first != " " {
                // "\tbaton --json status        {...": the command is what comes before the wide gap.
                let body = line.dropFirst()
                var name = body.range(of: "  ").map { String(body[..<$0.lowerBound]) } ?? String(body)
                if let document = name.range(of: #" [\[{(]"#, options: .regularExpression) { name = String(name[..<document.lowerBound]) }
                current = name
                blocks[name, default: []] = []
            } else if !line.hasPrefix("\t") {
                if !line.isEmpty, current != nil, !line.hasPrefix(" ") { current = nil }
                continue
            }
            guard let name = current else { continue }
            let range = NSRange(line.startIndex..., in: line)
            for match in keyPattern.matches(in: line, range: range) {
                if let key = Range(match.range(at: 1), in: line) { blocks[name]?.insert(String(line[key])) }
            }
        }
        return blocks
    }
}

/// Every key of a JSON document, nested ones included, except inside UserInfo (the app's own data).
func jsonKeys(_ value: JSONValue) -> Set<String> {
    switch value {
    case .object(let members):
        var keys = Set(members.map(\.key))
        for member in members where member.key != "UserInfo" { keys.formUnion(jsonKeys(member.value)) }
        return keys
    case .array(let items):
        return items.reduce(into: Set<String>()) { $0.formUnion(jsonKeys($1)) }
    default:
        return []
    }
}

@Suite("CLI outputs follow docs/dbus-api.md")
struct OutputContractTests {
    /// Each command's document, with every optional field set, so its keys are all the documented ones.
    static func fullDocuments() throws -> [String: [JSONValue]] {
        let status = try DaemonStatus(
            status: ManagerStatus(state: "degraded", adapter: "hci0", radio: "unavailable", radioDetail: "bluetoothd is not running",
                                  lePrivacy: "off", lePrivacyDetail: "LE privacy is off: …",
                                  errors: [.init(time: 1, category: "radio-unavailable", count: 2)], sessionAgent: false, secretsAtRest: "sealed-host",
                                  ringChangeRefused: "the removal of x was refused: …", ringChangeRefusedTime: 3),
            managerProperties: ["Version": .string("0.1.0"), "BusName": .string("org.baton")])
        let activity = try ActivityInfo(path: "/org/baton/activity/u0_1", properties: [
            "Type": .string("org.example.A.b"), "Status": .string("failed"), "Title": .string("t"),
            "UserInfo": PropertyValueCoding.encodeUserInfo(["page": .integer(1)]), "WebpageURL": .string("https://example.org"),
            "Version": .int64(1), "NeedsSave": .boolean(false), "Current": .boolean(true), "Owner": .uint32(0),
            "Revision": .uint32(1), "LastError": .string("radio-unavailable"), "EditSession": .string("this"),
            "Document": .propertyDictionary(["Id": .string("plan-2"), "MediaType": .string("application/pdf"), "Size": .uint64(3),
                                             "Digest": .string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")]),
        ])
        let suggestion = SuggestionInfo(path: "/org/baton/suggestion/1", SuggestionProperties(
            device: "abcd-ef01", deviceName: "laptop", activityType: "org.example.A.b", revision: 3, hasWebpageURL: true, near: true))
        let member = RingMember(name: "laptop", deviceID: "00", shortID: "0000-0000", isSelf: false, pairedSince: 1, lastSeen: 2,
                                lastRSSI: -50, endpoints: ["10.0.0.1:4433"], introducedBy: "1111-2222",
                                introducerRemoved: true)
        let endpoint = PairingEndpoint(name: "laptop", sessionID: "0011223344556677", address: "10.0.0.1", port: 4433, host: "laptop.local",
                                       transport: "ble", psm: 129, addressType: "public")
        return [
            "baton --json status": [OutputDocument.status(status)],
            "baton --json list": [OutputDocument.activity(activity)],
            "baton --json suggestions": [OutputDocument.suggestion(suggestion)],
            "baton --json continue": [OutputDocument.continued("/org/baton/suggestion/1", outcome: "delivered")],
            "baton --json publish": [OutputDocument.published(path: "/p", type: "t", current: true, status: "failed",
                                                              lastError: "radio-unavailable", onAir: false)],
            "baton --json handled-types": [OutputDocument.handledTypes(["org.example.A.b"])],
            "baton --json doctor": [OutputDocument.doctor([DoctorFinding("adapter", .failed, "bluetoothd is not running", fix: "start it")])],
            "bt-pair --json": [OutputDocument.ringMember(member)],
            "bt-pair --json discover": [OutputDocument.pairingEndpoint(endpoint)],
            "bt-pair --json accept": [OutputDocument.acceptOffer(port: 4433, sessionID: "0011223344556677")],
            "bt-pair --json with ...": [OutputDocument.paired(name: "laptop", deviceID: "00", code: "123456"),
                                        OutputDocument.pairingFailed(error: "rejected")],
            "bt-pair --json remove X": [OutputDocument.removed(device: "laptop", introduced: ["1111-2222"], alsoRemoved: true)],
            "bt-pair --json reset-identity": [OutputDocument.identityReset(deviceID: "00", previousDeviceID: "11")],
        ]
    }

    @Test("every documented output has a document here, and nothing else")
    func everyCommandIsCovered() throws {
        let documented = Set(try DocumentedOutputs.keys().keys)
        // `baton diag rssi --json` prints the daemon's DumpRadio JSON Lines; its own tests check them.
        #expect(documented.subtracting(["baton diag rssi --json"]) == Set(try Self.fullDocuments().keys))
    }

    @Test("each command's keys are exactly the documented ones", arguments: [
        "baton --json status", "baton --json list", "baton --json suggestions", "baton --json continue", "baton --json publish",
        "baton --json handled-types", "baton --json doctor", "bt-pair --json", "bt-pair --json discover", "bt-pair --json accept",
        "bt-pair --json with ...", "bt-pair --json remove X", "bt-pair --json reset-identity",
    ])
    func keysMatchTheDocument(command: String) throws {
        let documented = try #require(try DocumentedOutputs.keys()[command], "docs/dbus-api.md lists no \(command)")
        let documents = try #require(try Self.fullDocuments()[command])
        let emitted = documents.reduce(into: Set<String>()) { $0.formUnion(jsonKeys($1)) }
        #expect(emitted == documented, "\(command): emitted \(emitted.sorted()), documented \(documented.sorted())")
    }
}

/// The outputs of the real tools against the real daemon carry exactly the documented keys, and
/// say the truth about the radio (issue 10 item 9).
@Suite("baton and bt-pair against batond: documented keys, truthful status", .serialized)
struct TruthfulStatusTests {
    static func documented(_ command: String) throws -> Set<String> {
        try #require(try DocumentedOutputs.keys()[command])
    }

    @Test("a radio that cannot reach bluetoothd: degraded, unavailable and why; publish says it is not on the air")
    func bluetoothdAbsent() async throws {
        try await withDaemon(radio: .bluetoothdAbsent) { daemon in
            let tool = BatonTool(daemon: daemon)
            let publish = try await tool.run(["--json", "publish", "--type", "org.example.Reader.reading", "--title", "x",
                                              "--url", "https://example.org/x", "--current", "--for", "0.2"])
            #expect(publish.status == 0, "\(publish.stderr)")
            let printed = try JSONValue.parse(publish.stdout)
            #expect(printed["OnAir"] == .boolean(false))
            #expect(jsonKeys(printed).isSubset(of: try Self.documented("baton --json publish")))
            #expect(publish.stderr.contains("is held but not on the air: the radio is unavailable (bluetoothd is not running)"),
                    "\(publish.stderr)")
            #expect(!publish.stderr.contains("published org.example.Reader.reading;"))

            let (_, status) = try await tool.json(["status"])
            #expect(status["State"] == .string("degraded"))
            #expect(status["Radio"] == .string("unavailable"))
            #expect(status["RadioDetail"] == .string("bluetoothd is not running"))
            let text = try await tool.run(["status"])
            #expect(text.stdout.contains("State:    degraded\n"))
            #expect(text.stdout.contains("Radio:    unavailable (bluetoothd is not running)\n"))
        }
    }

    @Test("no BlueZ at all: the activity fails, status and publish agree with its error record")
    func noSystemBus() async throws {
        try await withDaemon(radio: .noSystemBus) { daemon in
            let tool = BatonTool(daemon: daemon)
            let publish = try await tool.run(["--json", "publish", "--type", "org.example.Reader.reading", "--title", "x",
                                              "--url", "https://example.org/x", "--current", "--for", "0.2"])
            #expect(publish.status == 0, "\(publish.stderr)")
            let printed = try JSONValue.parse(publish.stdout)
            #expect(printed["Status"] == .string("failed"))
            #expect(printed["LastError"] == .string("radio-unavailable"))
            #expect(printed["OnAir"] == .boolean(false))
            #expect(jsonKeys(printed) == (try Self.documented("baton --json publish")))
            #expect(publish.stderr.contains("is held but not on the air: the radio is unavailable (BlueZ cannot be reached on the system bus)"),
                    "\(publish.stderr)")

            let (_, status) = try await tool.json(["status"])
            #expect(status["State"] == .string("degraded"))
            #expect(status["Radio"] == .string("unavailable"))
            // With an error record and the radio's reason, every documented key is there but LE
            // privacy's, which status says only while the radio is ready, and the refused ring
            // change's, said only after one.
            #expect(jsonKeys(status) == (try Self.documented("baton --json status"))
                        .subtracting(["LEPrivacy", "LEPrivacyDetail", "RingChangeRefused", "RingChangeRefusedTime"]), "\(status)")
            guard case .array(let errors) = status["Errors"] else { throw FixtureError.timedOut("no Errors array") }
            #expect(errors.contains { $0["Category"] == .string("radio-unavailable") })
        }
    }

    @Test("--no-radio: running, radio off; list and publish keys as documented")
    func radioOff() async throws {
        try await withDaemon { daemon in
            let tool = BatonTool(daemon: daemon)
            let (_, status) = try await tool.json(["status"])
            #expect(status["State"] == .string("running"))
            #expect(status["Radio"] == .string("off"))
            #expect(status["RadioDetail"] == nil)
            #expect(jsonKeys(status).isSubset(of: try Self.documented("baton --json status")))

            // An activity held by a client, made current (it fails: no radio), then listed.
            let connection = try daemon.connect()
            defer { connection.close() }
            let activity = connection.makeActivity(type: "org.example.Reader.reading")
            activity.title = "Chapter 1"
            activity.webpageURL = URL(string: "https://example.org/1")
            try await activity.becomeCurrent()
            try await eventually("the publish settles") { try await connection.activities().first?.status == "failed" }
            let (_, list) = try await tool.json(["list"])
            // This activity has no document: the Document object's keys are checked by keysMatchTheDocument.
            #expect(jsonKeys(list).union(["Document", "Id", "MediaType", "Size", "Digest"]) == (try Self.documented("baton --json list")), "\(list)")
            #expect(jsonKeys(list).isDisjoint(with: ["Document", "Id", "MediaType", "Size", "Digest"]))

            let publish = try await tool.run(["--json", "publish", "--type", "org.example.Reader.reading", "--title", "x", "--current", "--for", "0.1"])
            #expect(jsonKeys(try JSONValue.parse(publish.stdout)) == (try Self.documented("baton --json publish")))
            #expect(publish.stderr.contains("not on the air: batond runs without a radio (--no-radio)"), "\(publish.stderr)")
            let (_, types) = try await tool.json(["handled-types"])
            let documentedTypeKeys = try Self.documented("baton --json handled-types")
            #expect(jsonKeys(types).isEmpty && documentedTypeKeys.isEmpty)
        }
    }

    @Test("batond not running: both tools say so in words and how to start it")
    func daemonNotRunning() async throws {
        try await withDaemon { daemon in
            let global = ["--bus", daemon.bus.address, "--bus-name", "org.baton.NobodyHere"]
            let status = try await runTool(try Built.executable("baton"), global + ["status"])
            #expect(status.status == 1)
            #expect(status.stderr.contains("baton status: batond is not running on the bus at \(daemon.bus.address) (nothing owns org.baton.NobodyHere)"),
                    "\(status.stderr)")
            #expect(status.stderr.contains("`batond --bus-address \(daemon.bus.address) --state-dir DIR --bus-name org.baton.NobodyHere`"))
            #expect(!status.stderr.contains("was not provided by any .service files"))
            let list = try await runTool(try Built.executable("bt-pair"), global + ["list"])
            #expect(list.status == 1)
            #expect(list.stderr.contains("bt-pair list: batond is not running"), "\(list.stderr)")
            #expect(!list.stderr.contains("was not provided by any .service files"))
        }
    }
}
