// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonStore
import Foundation
import Testing
@testable import BatonService

/// Issue 23 (B2c/P3): a ring of 64 members with 1,000 removals over its life persists through the
/// real store, sealed as ring records are: a restarted ring service reads back the same roster
/// (digest), and a change made by the service is written and read back too. The record's size on
/// disk is in docs/benchmarks.md "Roster sizes".
@Suite("BatonServiceTests: a large roster persists", .serialized)
struct LargeRosterPersistenceTests {
    static func scratch() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("large-roster-\(UUID().uuidString)").path
    }

    static func service(_ path: String, sealing: StateSealingKey) throws -> RingService {
        try RingService(store: RingStore(directory: StateDirectory(path: path), sealing: sealing), radio: nil, clock: SystemWallClock(),
                        configuration: .init(deviceName: "machine-0", listenHost: "127.0.0.1"), log: { _ in })
    }

    @Test func aSixtyFourMemberRingWithAThousandRemovalsSurvivesARestartSealed() async throws {
        let random = SystemRandom()
        let path = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sealing = try StateSealingKey(bytes: random.bytes(32), protection: .host)
        let day = RingService.keyDay(clock: SystemWallClock())
        let seeds = (0..<1_064).map { _ in random.bytes(32) }
        let keys = try seeds.map { try Ed25519PrivateKey(seed: $0) }
        // As the core test builds it (every entry introduced by machine-0, four removers), but with
        // the tombstones made directly: a removal at a time re-merges the whole roster each time.
        var members: [RosterMember] = [], marks: [DeviceID: RemovalMark] = [:]
        for (i, key) in keys.enumerated() {
            var entry = try RosterMember.signed(name: "machine-\(i)", identity: key, secret: .generate(generation: 1, day: day, using: random))
            if i > 0 { entry = entry.introduced(by: try Introduction.make(for: key.publicKey, by: keys[0])) }
            if i < 64 {
                members.append(entry)
            } else {
                marks[DeviceID(identityKey: key.publicKey)] = try RemovalMark.make(removing: entry, by: keys[(i - 64) % 4])
            }
        }
        let roster = Roster(version: 1, members: members, removalMarks: marks)
        #expect(roster.members.count == 64 && roster.removed.count == 1_000)
        // Written as batond writes it: the sealed ring record of machine-0.
        let store = try RingStore(directory: StateDirectory(path: path), sealing: sealing)
        try store.saveRing(RingKeeper.State(name: "machine-0", identitySeed: seeds[0], roster: roster))
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path + "/ring")[.size] as? Int)
        print("roster sizes: 64 members + 1,000 removals: roster \(try roster.encoded().count) bytes, sealed ring record \(size) bytes on disk")

        // A restart reads the same roster back.
        let first = try Self.service(path, sealing: sealing)
        #expect(await first.deviceID == DeviceID(identityKey: keys[0].publicKey))
        #expect(await first.snapshot().roster.digest == roster.digest)
        #expect(await first.memberSummaries().count == 64)
        // A change the service makes (a removal: a 1,001st mark) is saved and read back after the next restart.
        try await first.remove("machine-5")
        let changed = await first.snapshot().roster
        #expect(changed.removed.count == 1_001 && changed.members.count == 63)
        await first.stop()
        let second = try Self.service(path, sealing: sealing)
        #expect(await second.snapshot().roster.digest == changed.digest)
        #expect(await second.snapshot().roster.removed.count == 1_001)
        // Sealed: no member's name is readable in the file.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path + "/ring"))
        #expect(bytes.range(of: Data("machine-1".utf8)) == nil)
        await second.stop()
    }
}
