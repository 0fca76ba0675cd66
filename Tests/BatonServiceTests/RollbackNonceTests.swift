// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTestBus
import Foundation
import Testing
@testable import BatonService

/// Issue 23 finding 7: a state directory restored from an older copy on the same machine (backup,
/// btrfs or Timeshift rollback, VM disk snapshot) and started again in the epoch the lost run last
/// sealed in must never seal a second body under a used (key, epoch, sequence) (protocol §4.2).
@Suite("BatonServiceTests: advert nonces survive a restored state directory", .serialized)
struct RollbackNonceTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rollback-\(UUID().uuidString)")

    struct Nonce: Hashable { var key: [UInt8]; var epoch: UInt64; var sequence: UInt8 }

    /// Opens every advert with each secret, recording which body each nonce sealed.
    static func record(_ adverts: [[UInt8]], secrets: [AdvertisingSecret], nowSeconds: Int64, into seen: inout [Nonce: Set<[UInt8]>]) {
        let now = Protocol.epoch(unixSeconds: nowSeconds)
        for advert in adverts {
            for secret in secrets {
                let keys = DerivedKeys(secret: secret)
                for epoch in (now - 2)...(now + 1) where keys.covers(epoch: epoch) {
                    let material = keys.epochMaterial(epoch)
                    guard advert.count == 24, Array(advert[1..<7]) == material.tag,
                          let opened = try? RingAdvert.open(advert, keys: keys, epoch: epoch, mask: material.mask) else { continue }
                    seen[Nonce(key: material.tag, epoch: epoch, sequence: opened.sequence), default: []].insert(Array(advert[8...]))
                }
            }
        }
    }

    func copyDirectory(_ from: URL, to: URL) throws {
        try? FileManager.default.removeItem(at: to)
        try FileManager.default.copyItem(at: from, to: to)
    }

    @Test func restoringAnOlderStateDirectoryAndRestartingNeverSealsANonceTwice() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        // One boot: the runtime directory (systemd's RuntimeDirectory) outlives the restart below.
        let runtime = directory.appendingPathComponent("run").path
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let a = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, _) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await eventually(timeout: .seconds(10)) { await a.pairing.session(pathA)?.phase.stateName == "paired" })
        let uid = getuid()
        try await a.ring.radio.publish(try ActivityRecord(activityType: "org.example.Reader.reading", title: "one", userInfo: [:], webpageURL: nil, version: 1), uid: uid)
        // The copy (a backup or snapshot) is taken here; the run goes on sealing.
        let alpha = directory.appendingPathComponent("alpha"), copy = directory.appendingPathComponent("alpha-copy")
        try copyDirectory(alpha, to: copy)
        for title in ["two", "three"] {
            try await a.ring.radio.publish(try ActivityRecord(activityType: "org.example.Reader.reading", title: title, userInfo: [:], webpageURL: nil, version: 2), uid: uid)
        }
        let firstSecret = await a.ring.snapshot().ownSecret
        let firstAdverts = a.radio.allAdverts
        await a.stop()
        // Restored (from a backup, without a reboot) and started again, within the same epoch as the
        // lost seals (the test takes seconds).
        try copyDirectory(copy, to: alpha)
        let again = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        try await again.ring.radio.publish(try ActivityRecord(activityType: "org.example.Reader.reading", title: "four", userInfo: [:], webpageURL: nil, version: 3), uid: uid)
        try await again.ring.radio.publish(try ActivityRecord(activityType: "org.example.Reader.reading", title: "five", userInfo: [:], webpageURL: nil, version: 4), uid: uid)
        let secondSecret = await again.ring.snapshot().ownSecret
        let secondAdverts = again.radio.allAdverts
        var seen: [Nonce: Set<[UInt8]>] = [:]
        let now = Int64(Date().timeIntervalSince1970)
        Self.record(firstAdverts + secondAdverts, secrets: [firstSecret, secondSecret], nowSeconds: now, into: &seen)
        #expect(!seen.isEmpty)
        let reused = seen.filter { $0.value.count > 1 }
        #expect(reused.isEmpty, "nonces sealed twice: \(reused.keys.map { "epoch \($0.epoch) seq \($0.sequence)" })")
        // The restart seals nothing before the next epoch (the same secret: no re-key needed).
        #expect(secondSecret == firstSecret)
        let startEpoch = Protocol.epoch(unixSeconds: now)
        var laterSeen: [Nonce: Set<[UInt8]>] = [:]
        Self.record(secondAdverts, secrets: [secondSecret], nowSeconds: now, into: &laterSeen)
        #expect(laterSeen.keys.allSatisfy { $0.epoch > startEpoch } || Protocol.epoch(unixSeconds: Int64(Date().timeIntervalSince1970)) > startEpoch)
        // A start that is the first of its boot (no marker) trusts the counters: it seals at once.
        await again.stop()
        try FileManager.default.removeItem(atPath: runtime + "/started")
        let booted = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        try await booted.ring.radio.publish(try ActivityRecord(activityType: "org.example.Reader.reading", title: "six", userInfo: [:], webpageURL: nil, version: 5), uid: uid)
        #expect(!booted.radio.allAdverts.isEmpty)
        #expect(FileManager.default.fileExists(atPath: runtime + "/started"))
        await booted.stop()
        await b.stop()
    }
}
