// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore
import BatonCrypto

@Suite struct LRUCacheTests {
    @Test func evictsLeastRecentlyUsed() {
        var cache = LRUCache<String, Int>(capacity: 3)
        cache.set("a", 1)
        cache.set("b", 2)
        cache.set("c", 3)
        #expect(cache.get("a") == 1) // a is now newest; b is oldest
        let evicted = cache.set("d", 4)
        #expect(evicted?.key == "b")
        #expect(cache.count == 3)
        #expect(!cache.contains("b"))
        #expect(cache.entriesNewestFirst.map(\.key) == ["d", "a", "c"])
    }

    @Test func peekDoesNotRefresh() {
        var cache = LRUCache<Int, Int>(capacity: 2)
        cache.set(1, 1)
        cache.set(2, 2)
        #expect(cache.peek(1) == 1)
        #expect(cache.set(3, 3)?.key == 1)
    }

    @Test func removalKeepsLinksConsistent() {
        var cache = LRUCache<Int, Int>(capacity: 5)
        for key in 0..<5 { cache.set(key, key * 10) }
        #expect(cache.removeValue(forKey: 0) == 0)   // oldest
        #expect(cache.removeValue(forKey: 4) == 40)  // newest
        #expect(cache.removeValue(forKey: 2) == 20)  // middle
        #expect(cache.removeValue(forKey: 2) == nil)
        #expect(cache.entriesNewestFirst.map(\.key) == [3, 1])
        cache.set(7, 70)
        cache.set(8, 80)
        cache.set(9, 90)
        #expect(cache.set(10, 100)?.key == 1)
        #expect(cache.entriesNewestFirst.map(\.key) == [10, 9, 8, 7, 3])
    }

    /// Random operations against a simple reference model.
    @Test func matchesReferenceModel() {
        var cache = LRUCache<Int, Int>(capacity: 16)
        var model: [(key: Int, value: Int)] = [] // newest first
        var state: UInt64 = 42
        func next() -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int(state >> 33)
        }
        for step in 0..<5000 {
            let key = next() % 40
            switch next() % 3 {
            case 0:
                let evicted = cache.set(key, step)
                var expectedEviction: Int?
                if let index = model.firstIndex(where: { $0.key == key }) {
                    model.remove(at: index)
                } else if model.count == 16 {
                    expectedEviction = model.removeLast().key
                }
                model.insert((key, step), at: 0)
                #expect(evicted?.key == expectedEviction)
            case 1:
                let value = cache.get(key)
                if let index = model.firstIndex(where: { $0.key == key }) {
                    let entry = model.remove(at: index)
                    model.insert(entry, at: 0)
                    #expect(value == entry.value)
                } else {
                    #expect(value == nil)
                }
            default:
                let removed = cache.removeValue(forKey: key)
                let index = model.firstIndex(where: { $0.key == key })
                #expect(removed == index.map { model[$0].value })
                if let index { model.remove(at: index) }
            }
        }
        #expect(cache.entriesNewestFirst.map(\.key) == model.map(\.key))
        #expect(cache.entriesNewestFirst.map(\.value) == model.map(\.value))
    }

    @Test func storageStaysAtCapacity() {
        var cache = LRUCache<Int, [UInt8]>(capacity: 64)
        let reserved = cache.storageCapacity
        #expect(reserved >= 64)
        for key in 0..<10_000 { cache.set(key, [UInt8](repeating: 1, count: 4)) }
        #expect(cache.count == 64)
        #expect(cache.storageCapacity == reserved)
    }
}

extension AdvertiserTable {
    /// Test helper: classifies the report in one pass as the service does (`AdvertMatcher.hear`,
    /// with a matcher that knows no member unless one is given), then records it.
    @discardableResult
    mutating func record(_ report: AdvertisementReport, nowMilliseconds: Int64) -> AdvertiserRecord {
        var matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: nowMilliseconds / 1000))
        return record(report, nowMilliseconds: nowMilliseconds, matcher: &matcher)
    }

    @discardableResult
    mutating func record(_ report: AdvertisementReport, nowMilliseconds: Int64, matcher: inout AdvertMatcher) -> AdvertiserRecord {
        record(report, heard: matcher.hear(report, batonCompanyID: batonCompanyID), nowMilliseconds: nowMilliseconds)
    }
}

@Suite struct AdvertiserTableTests {
    static let now: Int64 = 1_800_000_000_000

    func report(_ address: BluetoothAddress, rssi: Int?, company: UInt16? = nil, data: [UInt8] = [1, 2, 3],
                txPower: Int? = nil, uuids: [String] = [], name: String? = nil) -> AdvertisementReport {
        AdvertisementReport(address: address, addressType: .random, rssi: rssi, txPower: txPower,
                            manufacturerData: company.map { [$0: data] } ?? [:], serviceUUIDs: uuids, name: name)
    }

    @Test func rssiStatisticsIgnoreUnknown127() {
        var table = AdvertiserTable(capacity: 8)
        table.record(report(BluetoothAddress(testing: "AA:00:00:00:00:01"), rssi: 127), nowMilliseconds: Self.now)
        var record = table.record(for: BluetoothAddress(testing: "AA:00:00:00:00:01"))
        #expect(record?.rssi.last == nil)
        #expect(record?.rssi.unknownSamples == 1)
        for (offset, rssi) in [-60, 127, -70, -50].enumerated() {
            table.record(report(BluetoothAddress(testing: "AA:00:00:00:00:01"), rssi: rssi), nowMilliseconds: Self.now + Int64(offset))
        }
        record = table.record(for: BluetoothAddress(testing: "AA:00:00:00:00:01"))
        #expect(record?.rssi.last == -50)
        #expect(record?.rssi.minimum == -70)
        #expect(record?.rssi.maximum == -50)
        #expect(record?.rssi.knownSamples == 3)
        #expect(record?.rssi.unknownSamples == 2)
        // -60, then -60 + 0.25·(-70 + 60) = -62.5, then -62.5 + 0.25·(-50 + 62.5) = -59.375
        #expect(record?.rssi.smoothed == -59.375)
        #expect(record?.reports == 5)
        #expect(record?.lastSeenMilliseconds == Self.now + 3)
        #expect(record?.firstSeenMilliseconds == Self.now)
    }

    @Test func classifiesKinds() throws {
        var matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: Self.now / 1000))
        let member = DeviceID(identityKey: [UInt8](repeating: 7, count: 32))
        let memberSecret = try AdvertisingSecret(bytes: [UInt8](repeating: 9, count: 32), generation: 1)
        matcher.setMember(member, secret: memberSecret)
        var sender = AdvertSender(secret: memberSecret, restored: nil)
        guard case .advertise(let ringAdvert)? = sender.start(nowSeconds: Self.now / 1000).last else {
            Issue.record("sender did not advertise")
            return
        }
        var strangerSender = AdvertSender(secret: try AdvertisingSecret(bytes: [UInt8](repeating: 3, count: 32), generation: 1), restored: nil)
        guard case .advertise(let strangerAdvert)? = strangerSender.start(nowSeconds: Self.now / 1000).last else {
            Issue.record("stranger did not advertise")
            return
        }
        var table = AdvertiserTable(capacity: 16)
        table.record(report(BluetoothAddress(testIndex: 1), rssi: -40, company: 0xFFFF, data: ringAdvert), nowMilliseconds: Self.now, matcher: &matcher)
        table.record(report(BluetoothAddress(testIndex: 2), rssi: -41, company: 0xFFFF, data: strangerAdvert), nowMilliseconds: Self.now, matcher: &matcher)
        table.record(report(BluetoothAddress(testIndex: 3), rssi: -42, company: 0x004C), nowMilliseconds: Self.now, matcher: &matcher)
        table.record(report(BluetoothAddress(testIndex: 4), rssi: -43, company: 0x0006), nowMilliseconds: Self.now, matcher: &matcher)
        table.record(report(BluetoothAddress(testIndex: 5), rssi: -44, uuids: ["0000fe2c-0000-1000-8000-00805f9b34fb"]), nowMilliseconds: Self.now, matcher: &matcher)
        table.record(report(BluetoothAddress(testIndex: 6), rssi: -45, company: 0x0123), nowMilliseconds: Self.now, matcher: &matcher)
        table.record(report(BluetoothAddress(testIndex: 7), rssi: -46), nowMilliseconds: Self.now, matcher: &matcher)
        #expect(table.record(for: BluetoothAddress(testIndex: 1))?.kind == .ringMember(member))
        #expect(table.record(for: BluetoothAddress(testIndex: 2))?.kind == .foreignBaton)
        #expect(table.record(for: BluetoothAddress(testIndex: 3))?.kind == .appleContinuity)
        #expect(table.record(for: BluetoothAddress(testIndex: 4))?.kind == .microsoftCDP)
        #expect(table.record(for: BluetoothAddress(testIndex: 5))?.kind == .googleFastPair)
        #expect(table.record(for: BluetoothAddress(testIndex: 6))?.kind == .other(companyID: 0x0123))
        #expect(table.record(for: BluetoothAddress(testIndex: 7))?.kind == .other(companyID: nil))
        // An RSSI-only update keeps the kind learnt from the advert.
        table.record(report(BluetoothAddress(testIndex: 3), rssi: -30), nowMilliseconds: Self.now + 1, matcher: &matcher)
        #expect(table.record(for: BluetoothAddress(testIndex: 3))?.kind == .appleContinuity)
        #expect(table.record(for: BluetoothAddress(testIndex: 3))?.companyID == 0x004C)
    }

    @Test func boundedWithLeastRecentlyHeardEvicted() {
        var table = AdvertiserTable(capacity: 32)
        let reserved = table.storageCapacity
        for index in 0..<5000 {
            table.record(report(BluetoothAddress(testIndex: index), rssi: -50 - index % 40, company: 0x004C), nowMilliseconds: Self.now + Int64(index))
            // Keep one advertiser fresh: it must survive the crowd.
            table.record(report(BluetoothAddress(testIndex: 0xFFFFFF), rssi: -40, company: 0xFFFF), nowMilliseconds: Self.now + Int64(index))
        }
        #expect(table.count == 32)
        #expect(table.storageCapacity == reserved)
        #expect(table.evictions == 5000 + 1 - 32)
        #expect(table.record(for: BluetoothAddress(testIndex: 0xFFFFFF))?.reports == 5000)
        #expect(table.record(for: BluetoothAddress(testIndex: 0)) == nil)
        #expect(table.record(for: BluetoothAddress(testIndex: 4999)) != nil)
        table.forget(address: BluetoothAddress(testIndex: 0xFFFFFF))
        #expect(table.count == 31)
    }
}

@Suite struct MatcherHearTests {
    /// What `recognise` (gone) checked, now through the one pass: a replay, a forgery and junk
    /// carrying the Baton company ID never name the member, and hearing them leaves the replay state.
    @Test func hearNamesOnlyAcceptedAdverts() throws {
        let epochSeconds: Int64 = 1_800_000_000 / 900 * 900
        let member = DeviceID(identityKey: [UInt8](repeating: 5, count: 32))
        let memberSecret = try AdvertisingSecret(bytes: [UInt8](repeating: 6, count: 32), generation: 1)
        var matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: epochSeconds))
        matcher.setMember(member, secret: memberSecret)
        var sender = AdvertSender(secret: memberSecret, restored: nil)
        guard case .advertise(let first)? = sender.start(nowSeconds: epochSeconds).last,
            case .advertise(let second)? = sender.update(AdvertContent(activityType: "org.example.edit"), nowSeconds: epochSeconds).last
        else {
            Issue.record("sender did not advertise")
            return
        }
        func report(_ data: [UInt8]) -> AdvertisementReport {
            AdvertisementReport(address: BluetoothAddress(testing: "AA:00:00:00:00:05"), addressType: .random, rssi: -50, txPower: nil,
                                manufacturerData: [0xFFFF: data], serviceUUIDs: [], name: nil)
        }
        guard case .ringMember(let sighting) = matcher.hear(report(second), batonCompanyID: 0xFFFF) else {
            Issue.record("the member's advert was not accepted")
            return
        }
        #expect(sighting.member == member && sighting.epoch == Protocol.epoch(unixSeconds: epochSeconds))
        // The older advert is a replay: refused with the member's tag, shown as another ring's.
        let replay = matcher.hear(report(first), batonCompanyID: 0xFFFF)
        #expect(replay == .ringRefused(taggedMember: member, reason: .replayedSequence))
        #expect(replay.advertiserKind(batonCompanyID: 0xFFFF) == .foreignBaton)
        var forged = second
        forged[20] ^= 1
        #expect(matcher.hear(report(forged), batonCompanyID: 0xFFFF) == .ringRefused(taggedMember: member, reason: .authenticationFailed))
        #expect(matcher.hear(report([0x11]), batonCompanyID: 0xFFFF).advertiserKind(batonCompanyID: 0xFFFF) == .other(companyID: 0xFFFF))
        #expect(matcher.hear(report([UInt8](repeating: 0, count: 24)), batonCompanyID: 0xFFFF).advertiserKind(batonCompanyID: 0xFFFF)
                == .other(companyID: 0xFFFF))
        // Refusals did not disturb the replay state: the accepted advert is a re-sighting.
        guard case .ringMember(let again) = matcher.hear(report(second), batonCompanyID: 0xFFFF) else {
            Issue.record("the member's advert was refused after the replay")
            return
        }
        #expect(again.outcome == .sameRevision)
    }
}
