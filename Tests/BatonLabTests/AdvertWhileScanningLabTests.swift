// SPDX-License-Identifier: GPL-2.0-or-later
import BatonBlueZ
import BatonCore
import Foundation
import Testing

/// Advertising while the same adapter scans (issue 12): the lab's legacy LE controllers cannot
/// take a new advert while discovery runs. The radio learns that once per adapter and pauses the
/// scan itself, so publishes never make bluetoothd refuse a registration again.
@Suite(.serialized, .enabled(if: Lab.isInside, "needs the BlueZ lab VM (LAB_VM=1)"))
struct AdvertWhileScanningLabTests {
    @Test func publishesWhileScanningMakeNoRefusedRegistration() async throws {
        let secret = try Lab.secret(0x66)
        var sender = AdvertSender(secret: secret, restored: nil)
        _ = sender.start(nowSeconds: Lab.startSeconds)
        let advertiser = try await BlueZRadio(adapter: "hci0")
        let scanner = try await BlueZRadio(adapter: "hci1")
        let own = EventRecorder(advertiser)
        let heard = EventRecorder(scanner)
        try await advertiser.startScanning()
        try await scanner.startScanning()

        var refusalsAfterEachPublish: [Int] = []
        for round in 0..<8 {
            let content = AdvertContent(activityType: "org.example.scanning\(round)")
            let advert = try #require(AdvertSender.advert(in: sender.update(content, nowSeconds: Lab.startSeconds)))
            let mark = await heard.count
            try await advertiser.advertise(companyID: Lab.companyID, data: advert, connectable: false)
            #expect(await heard.first(from: mark, within: .seconds(10)) { $0.carries(advert) } != nil, "round \(round) not heard")
            let status = await advertiser.status()
            // The scan is back (or never stopped) once advertise() returns.
            #expect(status.scanning && status.wantsScanning, "round \(round): \(status)")
            refusalsAfterEachPublish.append(status.refusedRegistrations)
        }
        let status = await advertiser.status()
        print("LAB advert while scanning: refused registrations after each publish \(refusalsAfterEachPublish), "
              + "pauses the scan: \(status.pausesScanToAdvertise)")
        // At most the very first registration is refused (that is how the radio learns); none after it.
        #expect((refusalsAfterEachPublish.first ?? 0) <= 1)
        #expect(Set(refusalsAfterEachPublish).count == 1, "\(refusalsAfterEachPublish)")
        #expect(status.pausesScanToAdvertise == (status.refusedRegistrations == 1))
        let notices = await own.notices(from: 0)
        #expect(notices.filter { $0.contains("pause of the scan") }.count <= 1, "\(notices)")
        #expect(!notices.contains { $0.contains("RegisterAdvertisement") && $0.contains("failed") }, "\(notices)")

        await advertiser.close()
        await scanner.close()
    }

    /// The scan keeps working after publishes that paused it: a foreign advert registered after
    /// the last publish is heard by the advertising radio itself.
    @Test func scanResumesAfterAPausedPublish() async throws {
        let secret = try Lab.secret(0x67)
        var sender = AdvertSender(secret: secret, restored: nil)
        let advertiser = try await BlueZRadio(adapter: "hci0")
        let other = try await BlueZRadio(adapter: "hci1")
        let own = EventRecorder(advertiser)
        try await advertiser.startScanning()
        for round in 0..<3 {
            let content = AdvertContent(activityType: "org.example.resume\(round)")
            let actions = round == 0 ? sender.start(nowSeconds: Lab.startSeconds) : sender.update(content, nowSeconds: Lab.startSeconds)
            let advert = try #require(AdvertSender.advert(in: actions))
            try await advertiser.advertise(companyID: Lab.companyID, data: advert, connectable: false)
        }
        let foreign: [UInt8] = (0..<24).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 5) }
        let mark = await own.count
        try await other.advertise(companyID: 0x0BA7, data: foreign, connectable: false)
        #expect(await own.first(from: mark, within: .seconds(10)) { $0.carries(foreign, companyID: 0x0BA7) } != nil)
        await advertiser.close()
        await other.close()
    }
}
