// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
import BatonCore
import BatonCrypto

/// One pass from a scanner report to one classified value (§4.3), shared by the matcher and
/// the diagnostics table.
@Suite("Heard adverts")
struct HeardAdvertTests {
    static let baton: UInt16 = 0xFFFF
    let now: Int64 = 1_800_000_000
    let member = deviceID(1)
    let memberSecret = secret(1)

    func matcher() -> AdvertMatcher {
        var matcher = AdvertMatcher(epoch: Protocol.epoch(unixSeconds: now))
        matcher.setMember(member, secret: memberSecret)
        return matcher
    }

    func report(_ data: [UInt8]?, company: UInt16 = baton, address: BluetoothAddress = BluetoothAddress(testing: "AA:00:00:00:00:01"), uuids: [String] = []) -> AdvertisementReport {
        AdvertisementReport(address: address, addressType: .random, rssi: -50, txPower: nil,
                            manufacturerData: data.map { [company: $0] } ?? [:], serviceUUIDs: uuids)
    }

    /// Two successive adverts of the member: presence, then an activity (a newer revision).
    func adverts() -> (older: [UInt8], newer: [UInt8]) {
        var sender = AdvertSender(secret: memberSecret, restored: nil)
        guard case .advertise(let first)? = sender.start(nowSeconds: now).last,
              case .advertise(let second)? = sender.update(AdvertContent(activityType: "org.example.edit"), nowSeconds: now).last else {
            Issue.record("sender did not advertise")
            return ([], [])
        }
        return (first, second)
    }

    @Test("An accepted ring advert is the member's sighting, opened once")
    func acceptedOpensOnce() {
        var matcher = matcher()
        let heard = matcher.hear(report(adverts().older), batonCompanyID: Self.baton)
        guard case .ringMember(let sighting) = heard else {
            Issue.record("not accepted: \(heard)")
            return
        }
        #expect(sighting.member == member)
        #expect(sighting.outcome == .newRevision)
        #expect(matcher.sealOpens == 1)
        #expect(heard.advertiserKind(batonCompanyID: Self.baton) == .ringMember(member))
        #expect(heard.ringRefusal == nil)
    }

    @Test("Classifying and recording a heard ring advert opens it exactly once")
    func tableDoesNotReopen() {
        var matcher = matcher()
        var table = AdvertiserTable(capacity: 8, batonCompanyID: Self.baton)
        let (older, newer) = adverts()
        for (index, data) in [older, newer, newer].enumerated() {
            let report = report(data)
            let heard = matcher.hear(report, batonCompanyID: Self.baton)
            table.record(report, heard: heard, nowMilliseconds: now * 1000)
            #expect(matcher.sealOpens == index + 1)
        }
        // The repeat of the same advert is a same-revision sighting, still the member.
        #expect(table.record(for: BluetoothAddress(testing: "AA:00:00:00:00:01"))?.kind == .ringMember(member))
        #expect(table.record(for: BluetoothAddress(testing: "AA:00:00:00:00:01"))?.reports == 3)
    }

    @Test("A replayed advert with a member's tag is refused and not shown as the member")
    func replayIsNotTheMember() {
        var matcher = matcher()
        var table = AdvertiserTable(capacity: 8, batonCompanyID: Self.baton)
        let (older, newer) = adverts()
        _ = matcher.hear(report(newer), batonCompanyID: Self.baton)
        let replayReport = report(older, address: BluetoothAddress(testing: "BB:00:00:00:00:02"))
        let heard = matcher.hear(replayReport, batonCompanyID: Self.baton)
        #expect(heard == .ringRefused(taggedMember: member, reason: .replayedSequence))
        #expect(heard.ringRefusal == .replayedSequence)
        #expect(matcher.sealOpens == 2)
        table.record(replayReport, heard: heard, nowMilliseconds: now * 1000)
        #expect(table.record(for: BluetoothAddress(testing: "BB:00:00:00:00:02"))?.kind == .foreignBaton)
    }

    @Test("A forged advert with a member's tag does not open and is not shown as the member")
    func forgedIsNotTheMember() {
        var matcher = matcher()
        var forged = adverts().older
        forged[20] ^= 1
        let heard = matcher.hear(report(forged), batonCompanyID: Self.baton)
        #expect(heard == .ringRefused(taggedMember: member, reason: .authenticationFailed))
        #expect(matcher.sealOpens == 1)
        #expect(heard.advertiserKind(batonCompanyID: Self.baton) == .foreignBaton)
    }

    @Test("Another ring's advert is not opened at all")
    func otherRingNotOpened() {
        var matcher = matcher()
        var stranger = AdvertSender(secret: secret(9), restored: nil)
        guard case .advertise(let data)? = stranger.start(nowSeconds: now).last else {
            Issue.record("stranger did not advertise")
            return
        }
        let heard = matcher.hear(report(data), batonCompanyID: Self.baton)
        #expect(heard == .otherRing)
        #expect(matcher.sealOpens == 0)
        #expect(heard.ringRefusal == nil)
        #expect(heard.advertiserKind(batonCompanyID: Self.baton) == .foreignBaton)
    }

    @Test("Pairing adverts decode; malformed ones are named as such")
    func pairingAdverts() throws {
        var matcher = matcher()
        let advert = try PairingAdvert(sessionID: [1, 2, 3, 4, 5, 6, 7, 8], tcpPublished: true, psm: 0x81, name: "alpha")
        let heard = matcher.hear(report(advert.encoded), batonCompanyID: Self.baton)
        #expect(heard == .pairing(advert))
        #expect(heard.advertiserKind(batonCompanyID: Self.baton) == .batonPairing(name: "alpha"))
        var bad = advert.encoded
        bad[9] = 2  // the PSM flag set with a zero PSM field
        bad[10] = 0
        bad[11] = 0
        let malformed = matcher.hear(report(bad), batonCompanyID: Self.baton)
        #expect(malformed == .malformedPairing(.malformed("psm")))
        #expect(malformed.advertiserKind(batonCompanyID: Self.baton) == .foreignBaton)
        #expect(matcher.sealOpens == 0)
    }

    @Test("Malformed data under Baton's company ID", arguments: [
        ([UInt8](), WireError.malformed("length")), ([0x11, 2, 3], .malformed("length")),
        ([0x21] + [UInt8](repeating: 0, count: 23), .unsupportedVersion(2)),
        ([0x13] + [UInt8](repeating: 0, count: 23), .unknownKind(3)),
    ])
    func malformedBaton(data: [UInt8], error: WireError) {
        var matcher = matcher()
        let heard = matcher.hear(report(data), batonCompanyID: Self.baton)
        #expect(heard == .malformedBaton(error))
        #expect(heard.advertiserKind(batonCompanyID: Self.baton) == .other(companyID: Self.baton))
        #expect(matcher.sealOpens == 0)
    }

    @Test("Foreign reports are named by company ID and service UUIDs")
    func foreign() {
        var matcher = matcher()
        #expect(matcher.hear(report([0x0C], company: 0x004C), batonCompanyID: Self.baton) == .foreign(.appleContinuity))
        #expect(matcher.hear(report([1], company: 0x0006), batonCompanyID: Self.baton) == .foreign(.microsoftCDP))
        #expect(matcher.hear(report(nil, uuids: ["0000FE2C-0000-1000-8000-00805f9b34fb"]), batonCompanyID: Self.baton) == .foreign(.googleFastPair))
        #expect(matcher.hear(report([1], company: 0x0123), batonCompanyID: Self.baton) == .foreign(.other(companyID: 0x0123)))
        #expect(matcher.hear(report(nil), batonCompanyID: Self.baton) == .foreign(.other(companyID: nil)))
        // The lowest company ID names a report with several.
        let several = AdvertisementReport(address: BluetoothAddress(testIndex: 1), addressType: .public, rssi: nil, txPower: nil,
                                          manufacturerData: [0x0123: [1], 0x004C: [2]])
        #expect(matcher.hear(several, batonCompanyID: Self.baton) == .foreign(.appleContinuity))
        // A report with Baton data next to others is a Baton report.
        let mixed = AdvertisementReport(address: BluetoothAddress(testIndex: 1), addressType: .public, rssi: nil, txPower: nil,
                                        manufacturerData: [0x004C: [2], Self.baton: [1, 2]])
        #expect(matcher.hear(mixed, batonCompanyID: Self.baton) == .malformedBaton(.malformed("length")))
        #expect(matcher.sealOpens == 0)
    }

    @Test("An RSSI-only report keeps the kind learnt from the advert")
    func rssiOnlyUpdateKeepsKind() {
        var matcher = matcher()
        var table = AdvertiserTable(capacity: 8, batonCompanyID: Self.baton)
        let first = report(adverts().older)
        table.record(first, heard: matcher.hear(first, batonCompanyID: Self.baton), nowMilliseconds: 1)
        let bare = report(nil)
        table.record(bare, heard: matcher.hear(bare, batonCompanyID: Self.baton), nowMilliseconds: 2)
        #expect(table.record(for: bare.address)?.kind == .ringMember(member))
        #expect(table.record(for: bare.address)?.companyID == Self.baton)
    }

    @Test("Random bytes under Baton's company ID never trap and are never a member")
    func randomBytes() {
        var matcher = matcher()
        let random = SeededRandomFake(seed: 17)
        let tag = DerivedKeys(secret: memberSecret).epochMaterial(Protocol.epoch(unixSeconds: now)).tag
        for round in 0..<2_000 {
            var data = random.bytes(random.int(0...30))
            // Every fourth report carries the member's real header and tag, so the seal is tried.
            if round % 4 == 0 { data = [AdvertKind.ring.headerByte] + tag + random.bytes(17) }
            let heard = matcher.hear(report(data), batonCompanyID: Self.baton)
            if case .ringMember = heard { Issue.record("random bytes accepted: \(data)") }
            if round % 4 == 0 { #expect(heard == .ringRefused(taggedMember: member, reason: .authenticationFailed)) }
        }
        #expect(matcher.sealOpens == 500)
    }
}
