// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
import BatonCore

@Suite("Pairing advert book")
struct PairingAdvertBookTests {
    func advert(_ byte: UInt8, name: String = "alpha") -> PairingAdvert {
        try! PairingAdvert(sessionID: [UInt8](repeating: byte, count: 8), tcpPublished: false, psm: 0x80, name: name)
    }

    @Test("Recent adverts by name, without own sessions and without expired ones")
    func recent() {
        var book = PairingAdvertBook()
        book.record(advert(1, name: "zeta"), address: BluetoothAddress(testing: "00:aa:01:00:00:01"), addressType: .random, nowMilliseconds: 0)
        book.record(advert(2, name: "beta"), address: BluetoothAddress(testing: "00:AA:01:00:00:02"), addressType: .public, nowMilliseconds: 10)
        book.record(advert(3, name: "gamma"), address: BluetoothAddress(testing: "00:AA:01:00:00:03"), addressType: .public, nowMilliseconds: 20)
        #expect(book.recent(nowMilliseconds: 30, excludingSessions: []).map(\.advert.name) == ["beta", "gamma", "zeta"])
        #expect(book.recent(nowMilliseconds: 30, excludingSessions: [advert(3).sessionID]).map(\.advert.name) == ["beta", "zeta"])
        // 130 s after the last report it is still listed; a millisecond later it is gone.
        #expect(book.recent(nowMilliseconds: 130_000, excludingSessions: []).map(\.advert.name) == ["beta", "gamma", "zeta"])
        #expect(book.recent(nowMilliseconds: 130_001, excludingSessions: []).map(\.advert.name) == ["beta", "gamma"])
        // A new report of the same session refreshes it.
        book.record(advert(1, name: "zeta"), address: BluetoothAddress(testing: "00:aa:01:00:00:01"), addressType: .random, nowMilliseconds: 130_000)
        #expect(book.count == 3)
        #expect(book.recent(nowMilliseconds: 140_011, excludingSessions: []).map(\.advert.name) == ["zeta"])
    }

    @Test("Address types are looked up case-insensitively among recent adverts")
    func addressTypes() throws {
        var book = PairingAdvertBook()
        book.record(advert(1), address: BluetoothAddress(testing: "00:aa:01:00:00:01"), addressType: .random, nowMilliseconds: 0)
        let address = try BluetoothAddress("00:AA:01:00:00:01")
        #expect(book.addressType(of: address, nowMilliseconds: 1, excludingSessions: []) == .random)
        #expect(book.addressType(of: address, nowMilliseconds: 1, excludingSessions: [advert(1).sessionID]) == nil)
        #expect(book.addressType(of: address, nowMilliseconds: 200_000, excludingSessions: []) == nil)
        #expect(book.addressType(of: try BluetoothAddress("00:AA:01:00:00:02"), nowMilliseconds: 1, excludingSessions: []) == nil)
    }

    @Test("At most 16 sessions: the least recently heard goes")
    func bounded() {
        var book = PairingAdvertBook()
        for byte in UInt8(0)..<20 {
            book.record(advert(byte, name: "n\(byte)"), address: BluetoothAddress(testIndex: 1), addressType: .public, nowMilliseconds: Int64(byte))
        }
        #expect(book.count == PairingAdvertBook.capacity)
        let names = Set(book.recent(nowMilliseconds: 20, excludingSessions: []).map(\.advert.name))
        #expect(names == Set((4..<20).map { "n\($0)" }))
    }
}
