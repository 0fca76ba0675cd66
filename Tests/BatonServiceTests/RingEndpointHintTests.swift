// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// Endpoint hints are typed in the ring (`Endpoint`); the peers file keeps the strings it always had.
@Suite struct RingEndpointHintTests {
    @Test func storedHintsAreParsedAtLoadAndWrittenAsBefore() throws {
        // As the peers record was written before hints were typed, with one entry that is no endpoint.
        let old = #"{"pairedSince":1700000000,"lastSeen":1700000100,"endpoints":["10.0.0.7:4100","not an endpoint","[fd00::7]:4100","ble:00:AA:01:00:00:01/0xba/random"]}"#
        let info = try JSONDecoder().decode(RingStore.PeerInfo.self, from: Data(old.utf8))
        #expect(info.hints == [.ip(host: "10.0.0.7", port: 4100), .ip(host: "fd00::7", port: 4100),
                               .bluetooth(address: try BluetoothAddress("00:AA:01:00:00:01"), type: .random, psm: 0xBA)])
        #expect(info.pairedSince == 1_700_000_000 && info.lastSeen == 1_700_000_100 && info.lastRSSI == nil)
        // Written back: the same key and text forms (the unparsable one is gone), no new keys.
        let written = try JSONSerialization.jsonObject(with: JSONEncoder().encode(info)) as? [String: Any]
        #expect(written?["endpoints"] as? [String] == ["10.0.0.7:4100", "[fd00::7]:4100", "ble:00:AA:01:00:00:01/0xba/random"])
        #expect(Set(written?.keys.map { $0 } ?? []) == ["pairedSince", "lastSeen", "endpoints"])
        // A record without hints at all still loads.
        let bare = try JSONDecoder().decode(RingStore.PeerInfo.self, from: Data(#"{"pairedSince":5}"#.utf8))
        #expect(bare.hints.isEmpty)
    }

    @Test func hintsSurviveTheStoreTyped() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hints-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try RingStore(directory: StateDirectory(path: directory.path))
        let id = DeviceID(identityKey: [UInt8](repeating: 3, count: 32))
        let hints: [Endpoint] = [.ip(host: "192.0.2.1", port: 7), .bluetoothTransfer(address: try BluetoothAddress("00:AA:01:00:00:02"), type: .public)]
        try store.savePeers([id: RingStore.PeerInfo(pairedSince: 9, hints: hints)])
        #expect(try store.loadPeers()[id]?.hints == hints)
    }

    @Test func textFormsReadThroughEndpoint() throws {
        // Stricter than before: white space is no host.
        #expect(RingService.splitEndpoint("bad host:80") == nil)
        #expect(RingService.splitEndpoint("[::1]:7")! == ("::1", 7))
        #expect(RingService.splitBluetoothTarget("ble:00:AA:01:00:00:00/0x80/random") == nil)
    }
}
