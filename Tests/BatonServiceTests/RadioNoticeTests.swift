// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// Radio notices (Ring1.GetRadioNotices) are counted, not repeated (issue 12): a notice that
/// repeats on every publish must not push the rare ones out of the bounded list.
@Suite("BatonServiceTests: radio notices")
struct RadioNoticeTests {
    @Test func aRepeatedNoticeIsCountedAndTheRareOnesStay() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-notices-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let radio = try RadioService(port: nil, store: RingStore(directory: StateDirectory(path: directory)), clock: FakeWallClock(),
                                     companyID: Protocol.defaultCompanyID,
                                     ownSecret: AdvertisingSecret.generate(generation: 1, day: testDay, using: SystemRandom()), log: { _ in })
        await radio.notice("radio ready")
        await radio.notice("pairing advert on the air")
        for _ in 0..<40 { await radio.notice("advertising on hci0 needs a pause of the scan") }
        let notices = await radio.notices()
        #expect(notices == ["radio ready", "pairing advert on the air", "advertising on hci0 needs a pause of the scan (×40)"])
    }
}
