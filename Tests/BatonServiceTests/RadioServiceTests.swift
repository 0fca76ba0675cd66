// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import BatonCore
import BatonCrypto
import Foundation
import Testing
@testable import BatonService

/// The diagnostics dump as the service renders it (moved out of the core with the rendering).
@Suite struct AdvertiserTableRenderingTests {
    static let now: Int64 = 1_800_000_000_000

    func report(_ address: BluetoothAddress, rssi: Int?, company: UInt16? = nil, data: [UInt8] = [1, 2, 3],
                txPower: Int? = nil, name: String? = nil) -> AdvertisementReport {
        AdvertisementReport(address: address, addressType: .random, rssi: rssi, txPower: txPower,
                            manufacturerData: company.map { [$0: data] } ?? [:], serviceUUIDs: [], name: name)
    }

    /// Classified in one pass, as RadioService.record does.
    func record(_ report: AdvertisementReport, in table: inout AdvertiserTable, matcher: inout AdvertMatcher, nowMilliseconds: Int64) {
        table.record(report, heard: matcher.hear(report, batonCompanyID: table.batonCompanyID), nowMilliseconds: nowMilliseconds)
    }

    @Test func rendersTextStrongestFirst() {
        var table = AdvertiserTable(capacity: 8)
        var matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: Self.now / 1000))
        record(report(BluetoothAddress(testing: "AA:00:00:00:00:01"), rssi: -80, company: 0x004C, txPower: 4), in: &table, matcher: &matcher, nowMilliseconds: Self.now - 5_000)
        record(report(BluetoothAddress(testing: "AA:00:00:00:00:02"), rssi: -40, company: 0x0006), in: &table, matcher: &matcher, nowMilliseconds: Self.now - 1_000)
        record(report(BluetoothAddress(testing: "AA:00:00:00:00:03"), rssi: 127, company: 0x0123), in: &table, matcher: &matcher, nowMilliseconds: Self.now)
        let lines = AdvertiserTableRendering.text(table, nowMilliseconds: Self.now).split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines[0].hasPrefix("ADDRESS"))
        #expect(lines[1].hasPrefix("AA:00:00:00:00:02"))
        #expect(lines[1].contains("Microsoft CDP"))
        #expect(lines[1].contains("-40.0"))
        #expect(lines[1].contains("1s"))
        #expect(lines[2].hasPrefix("AA:00:00:00:00:01"))
        #expect(lines[2].contains("0x004c"))
        #expect(lines[3].hasPrefix("AA:00:00:00:00:03"))
        #expect(lines[3].contains(" ? "))
        #expect(!lines[3].contains("127"))
        // Columns line up: every row starts the KIND column at the same offset.
        let kindColumn = lines[0].range(of: "KIND")?.lowerBound.utf16Offset(in: lines[0])
        #expect(lines[1].range(of: "Microsoft CDP")?.lowerBound.utf16Offset(in: lines[1]) == kindColumn)
    }

    @Test func rendersJSONLinesInTheDocumentedKeyStyleWithoutPayload() throws {
        var matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: Self.now / 1000))
        let member = DeviceID(identityKey: [UInt8](repeating: 1, count: 32))
        let memberSecret = try AdvertisingSecret(bytes: [UInt8](repeating: 2, count: 32), generation: 1)
        matcher.setMember(member, secret: memberSecret)
        var sender = AdvertSender(secret: memberSecret, restored: nil)
        guard case .advertise(let advert)? = sender.start(nowSeconds: Self.now / 1000).last else {
            Issue.record("sender did not advertise")
            return
        }
        var table = AdvertiserTable(capacity: 8)
        record(report(BluetoothAddress(testing: "AA:00:00:00:00:09"), rssi: -61, company: 0xFFFF, data: advert, name: "quote\" and\nnewline"),
               in: &table, matcher: &matcher, nowMilliseconds: Self.now - 250)
        record(report(BluetoothAddress(testing: "AA:00:00:00:00:08"), rssi: 127, company: 0x004C), in: &table, matcher: &matcher, nowMilliseconds: Self.now)
        let lines = AdvertiserTableRendering.jsonLines(table, nowMilliseconds: Self.now).split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(lines[0] == #"{"Address":"AA:00:00:00:00:09","AddressType":"random","RSSI":-61,"RSSIMin":-61,"RSSIMax":-61,"RSSISmoothed":-61.0,"RSSIKnownSamples":1,"RSSIUnknownSamples":0,"TxPower":null,"CompanyId":"0xffff","Kind":"ringMember","Member":"\#(member.shortForm)","Name":"quote\" and\nnewline","Reports":1,"FirstSeenMs":1799999999750,"LastSeenMs":1799999999750,"AgeMs":250}"#)
        #expect(lines[1].contains(#""RSSI":null"#))
        #expect(lines[1].contains(#""RSSIUnknownSamples":1"#))
        #expect(lines[1].contains(#""Kind":"appleContinuity""#))
        // Every line is JSON with exactly the documented keys (docs/dbus-api.md, Machine-readable outputs).
        let documented: Set<String> = ["Address", "AddressType", "RSSI", "RSSIMin", "RSSIMax", "RSSISmoothed", "RSSIKnownSamples",
                                       "RSSIUnknownSamples", "TxPower", "CompanyId", "Kind", "Member", "Name", "Reports",
                                       "FirstSeenMs", "LastSeenMs", "AgeMs"]
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(Set(object.keys).isSubset(of: documented), "\(object.keys.sorted())")
        }
        // No advert bytes and no secret bytes in any form.
        let text = lines.joined()
        #expect(!text.contains(advert.hexString))
        #expect(!text.contains(Array(advert[1..<7]).hexString))
        #expect(!text.contains(memberSecret.bytes.hexString))
    }

    @Test func kindsHaveLabelsAndTheProtocolsNames() {
        #expect(AdvertiserTableRendering.label(.other(companyID: 0x00E0)) == "company 0x00e0")
        #expect(AdvertiserTableRendering.label(.other(companyID: nil)) == "unknown")
        #expect(AdvertiserTableRendering.label(.foreignBaton) == "baton (other ring)")
        let kinds: [AdvertiserKind] = [.ringMember(DeviceID(identityKey: [UInt8](repeating: 1, count: 32))), .foreignBaton,
                                       .batonPairing(name: "x"), .appleContinuity, .microsoftCDP, .googleFastPair, .other(companyID: 1)]
        #expect(kinds.map(AdvertiserTableRendering.jsonName) == ["ringMember", "foreignBaton", "batonPairing", "appleContinuity",
                                                                 "microsoftCDP", "googleFastPair", "other"])
    }
}

/// The radio actor with a fake radio, two nodes paired over loopback (no bus).
@Suite("BatonServiceTests: the radio's listener and broadcaster", .serialized)
struct RadioServiceTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("radio-\(UUID().uuidString)")

    func pairedNodes(handled: Set<String> = []) async throws -> (BusLessNode, BusLessNode) {
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta", handled: handled)
        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        return (a, b)
    }

    func report(_ data: [UInt8], from address: BluetoothAddress) -> AdvertisementReport {
        AdvertisementReport(address: address, addressType: .random, rssi: -50, txPower: nil, manufacturerData: [Protocol.defaultCompanyID: data])
    }

    func dumpLines(_ node: BusLessNode) async throws -> [[String: Any]] {
        let dump = try await node.ring.radio.dumpRadio(format: "json")
        return dump.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    @Test func aHeardRingAdvertIsOpenedExactlyOnce() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b) = try await pairedNodes()
        let record = try ActivityRecord(activityType: "org.example.edit", title: "t", userInfo: [:], webpageURL: nil, version: 1)
        try await a.ring.radio.publish(record, uid: getuid())
        let advert = try #require(a.radio.onAir)
        let radio = b.ring.radio
        for (index, address) in ["C0:00:00:00:00:01", "C0:00:00:00:00:01", "C0:00:00:00:00:02"].map(BluetoothAddress.init(testing:)).enumerated() {
            let before = await radio.sealOpens
            let sighting = await radio.record(report(advert, from: address))
            #expect(sighting?.member == (await a.ring.deviceID))
            #expect(sighting?.outcome == (index == 0 ? .newRevision : .sameRevision))
            #expect(await radio.sealOpens == before + 1, "one AES-GCM open per heard ring advert (table and matcher share it)")
        }
        // A forgery with a member's tag is opened once too, a stranger's advert not at all.
        var forged = advert
        forged[23] ^= 1
        var before = await radio.sealOpens
        #expect(await radio.record(report(forged, from: BluetoothAddress(testing: "C0:00:00:00:00:03"))) == nil)
        #expect(await radio.sealOpens == before + 1)
        var stranger = AdvertSender(secret: try AdvertisingSecret(bytes: [UInt8](repeating: 0x5A, count: 32), generation: 1), restored: nil)
        guard case .advertise(let strangerAdvert)? = stranger.start(nowSeconds: SystemWallClock().unixSeconds()).last else {
            Issue.record("the stranger did not advertise")
            return
        }
        before = await radio.sealOpens
        #expect(await radio.record(report(strangerAdvert, from: BluetoothAddress(testing: "C0:00:00:00:00:04"))) == nil)
        #expect(await radio.sealOpens == before)
        await a.stop()
        await b.stop()
    }

    /// Issue 9 item 17: a stranger re-broadcasting a member's captured advert from a new address is
    /// shown as another ring's advert, never as the member (docs/protocol.md §4.5).
    @Test func aReplayedMemberAdvertShowsAsForeignBatonInTheDump() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b) = try await pairedNodes()
        let short = await a.ring.deviceID.shortForm
        let first = try ActivityRecord(activityType: "org.example.edit", title: "one", userInfo: [:], webpageURL: nil, version: 1)
        try await a.ring.radio.publish(first, uid: getuid())
        let captured = try #require(a.radio.onAir)
        b.radio.hear(captured, from: BluetoothAddress(testing: "C0:00:00:00:00:0A"))
        let second = try ActivityRecord(activityType: "org.example.edit", title: "two", userInfo: [:], webpageURL: nil, version: 2)
        try await a.ring.radio.publish(second, uid: getuid())
        let current = try #require(a.radio.onAir)
        #expect(current != captured)
        b.radio.hear(current, from: BluetoothAddress(testing: "C0:00:00:00:00:0A"))
        #expect(await eventually(timeout: .seconds(5)) { await b.ring.radio.lastSighting(of: await a.ring.deviceID)?.body.revision == (await a.ring.radio.currentPublication())?.revision })
        let lastSeenBefore = await b.ring.memberSummaries().first { $0.name == "alpha" }?.peer?.lastSeen

        // The replay, from an address the member never used.
        b.radio.hear(captured, from: BluetoothAddress(testing: "D0:66:66:66:66:66"))
        var replay: [String: Any]?
        #expect(await eventually(timeout: .seconds(5)) {
            replay = (try? await dumpLines(b))?.first { $0["Address"] as? String == "D0:66:66:66:66:66" }
            return replay != nil
        })
        #expect(replay?["Kind"] as? String == "foreignBaton")
        #expect(replay?["Member"] == nil)
        let member = try await dumpLines(b).first { $0["Address"] as? String == "C0:00:00:00:00:0A" }
        #expect(member?["Kind"] as? String == "ringMember" && member?["Member"] as? String == short)
        #expect(try await dumpLines(b).filter { $0["Member"] as? String == short }.count == 1)
        // The text dump counts the refusal and names no member for the replay.
        let text = try await b.ring.radio.dumpRadio(format: "text")
        #expect(text.contains("rejected ring adverts: replayedSequence 1"), "\(text)")
        let replayRow = text.split(separator: "\n").first { $0.hasPrefix("D0:66:66:66:66:66") }
        #expect(replayRow?.contains("baton (other ring)") == true && replayRow?.contains(short) == false)
        // Nor does it refresh the member's sighting.
        #expect(await b.ring.radio.lastSighting(of: await a.ring.deviceID)?.body.revision == (await a.ring.radio.currentPublication())?.revision)
        #expect(await b.ring.memberSummaries().first { $0.name == "alpha" }?.peer?.lastSeen == lastSeenBefore)
        await a.stop()
        await b.stop()
    }

    /// Issue 9 item 18 (docs/protocol.md §4.2 "Ring of one"): nothing on the air alone, the current
    /// content as soon as a member joins, nothing again when the last other member is removed.
    @Test func aRingOfOnePutsNothingOnTheAir() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let type = "org.example.edit"
        let a = try await BusLessNode.start(in: directory, name: "alpha"), b = try await BusLessNode.start(in: directory, name: "beta")
        let record = try ActivityRecord(activityType: type, title: "alone", userInfo: [:], webpageURL: nil, version: 1)
        try await a.ring.radio.publish(record, uid: getuid())
        await a.ring.tick()
        #expect(a.radio.allAdverts.isEmpty, "a ring of one sent \(a.radio.allAdverts.count) advert(s)")
        #expect(await a.ring.radio.onAir == .nothing)
        // The revision still moved: a fetch after pairing sees this publication.
        let revision = try #require(await a.ring.radio.currentPublication()?.revision)
        #expect(revision > 0)

        let (pathA, pathB) = try await pairWithoutBus(a.pairing, b.pairing)
        for (pairing, path) in [(a.pairing, pathA), (b.pairing, pathB)] {
            #expect(await eventually(timeout: .seconds(10)) { await pairing.session(path)?.phase.stateName == "paired" })
        }
        // Joined: the current activity (not presence) is on the air at once, with the same revision.
        #expect(await eventually(timeout: .seconds(5)) { a.radio.onAir.flatMap { try? AdvertKind.classify($0) } == .ring })
        let advert = try #require(a.radio.onAir)
        let sighting = await b.ring.radio.record(report(advert, from: BluetoothAddress(testing: "C0:00:00:00:00:0B")))
        #expect(sighting?.body.isActivity == true && sighting?.body.revision == revision)

        // The last other member removed: the ring advert stops, and a publish stays off the air.
        try await a.ring.remove("beta")
        #expect(a.radio.onAir == nil)
        #expect(await a.ring.radio.onAir == .nothing)
        let count = a.radio.allAdverts.count
        try await a.ring.radio.publish(record, uid: getuid())
        await a.ring.tick()
        #expect(a.radio.allAdverts.count == count && a.radio.onAir == nil)
        await a.stop()
        await b.stop()
    }

    /// Issue 9 item 16 (§9 steps 2–3): accepting a suggestion fetches exactly its revision; when
    /// the source has published something newer since, nothing is delivered, the call fails with
    /// UnknownActivity "noLongerCurrent" and the suggestion goes.
    @Test func aSuggestionWhoseSourceMovedOnIsNotDelivered() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let type = "org.example.Reader.reading"
        let (a, b) = try await pairedNodes(handled: [type])
        let uid = getuid()
        let first = try ActivityRecord(activityType: type, title: "Chapter 3", userInfo: [:], webpageURL: nil, version: 1)
        a.activities.setCurrent(ActivityID(uid: uid, serial: 1), first)
        try await a.ring.radio.publish(first, uid: uid)
        b.radio.hear(try #require(a.radio.onAir))
        #expect(await eventually(timeout: .seconds(10)) { b.board.suggestions.count == 1 })
        let suggestion = try #require(b.board.suggestions.first)

        // The source moves on before beta hears its new advert.
        let newer = try ActivityRecord(activityType: type, title: "Chapter 4", userInfo: [:], webpageURL: nil, version: 2)
        a.activities.setCurrent(ActivityID(uid: uid, serial: 1), newer)
        try await a.ring.radio.publish(newer, uid: uid)
        await #expect(throws: ServiceFailure.unknownActivity("noLongerCurrent")) {
            _ = try await b.continuation.take(suggestion.path, uid: uid)
        }
        #expect(b.activities.delivered.isEmpty, "delivered \(b.activities.delivered.map(\.record.title)) instead of the suggested revision")
        #expect(b.board.suggestions.isEmpty)
        await #expect(throws: ServiceFailure.unknownObject("the suggestion is gone")) {
            _ = try await b.continuation.take(suggestion.path, uid: uid)
        }
        // The newer advert brings a suggestion for the newer revision, and that one is delivered.
        b.radio.hear(try #require(a.radio.onAir))
        #expect(await eventually(timeout: .seconds(10)) { b.board.suggestions.count == 1 })
        let next = try #require(b.board.suggestions.first)
        #expect(next.revision == suggestion.revision + 1 && next.path != suggestion.path)
        #expect(try await b.continuation.take(next.path, uid: uid) == "delivered")
        #expect(b.activities.delivered.map(\.record.title) == ["Chapter 4"])
        await a.stop()
        await b.stop()
    }
}
