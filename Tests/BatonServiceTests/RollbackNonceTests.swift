// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTestBus
import Foundation
import Testing
@testable import BatonService

/// Issue 23 finding 7: a state directory restored from an older copy on the same machine (backup,
/// btrfs or Timeshift rollback, VM disk snapshot) and started again in the epoch the lost run last
/// sealed in must never seal a second body under a used (key, epoch, sequence), and a plain restart
/// within one boot must not keep the ring advert off the air (protocol §4.2 "Restarts").
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

    func publish(_ node: BusLessNode, _ title: String, version: Int64) async throws {
        try await node.ring.radio.publish(try ActivityRecord(activityType: "org.example.Reader.reading", title: title, userInfo: [:],
                                                             webpageURL: nil, version: version), uid: getuid())
    }

    /// Alpha (with a runtime directory) paired with beta, so its ring advert is on the air.
    func pairedAlpha(runtime: String) async throws -> (alpha: BusLessNode, beta: BusLessNode) {
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let a = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        let b = try await BusLessNode.start(in: directory, name: "beta")
        let (pathA, _) = try await pairWithoutBus(a.pairing, b.pairing)
        #expect(await eventually(timeout: .seconds(10)) { await a.pairing.session(pathA)?.phase.stateName == "paired" })
        return (a, b)
    }

    var alphaPath: String { directory.appendingPathComponent("alpha").path }

    /// The seals of `adverts` (under `secret`) that were made in the epoch of `nowSeconds`.
    func sealsNow(_ adverts: [[UInt8]], secret: AdvertisingSecret, nowSeconds: Int64) -> [Nonce] {
        var seen: [Nonce: Set<[UInt8]>] = [:]
        Self.record(adverts, secrets: [secret], nowSeconds: nowSeconds, into: &seen)
        return seen.keys.filter { $0.epoch == Protocol.epoch(unixSeconds: nowSeconds) }
    }

    /// §4.2 "Restarts": a plain restart within one boot (an upgrade, Restart=on-failure) finds the
    /// boot mark of its own secret and seals at once; it does not wait for the next epoch boundary
    /// (the guard before the boot mark kept the ring advert off the air for up to 900 s here).
    @Test func aPlainRestartWithinOneBootSealsAtOnce() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let runtime = directory.appendingPathComponent("run").path
        let (a, b) = try await pairedAlpha(runtime: runtime)
        try await publish(a, "one", version: 1)
        let secret = await a.ring.snapshot().ownSecret
        let firstAdverts = a.radio.allAdverts
        await a.stop()
        let again = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        try await publish(again, "two", version: 2)
        let now = Int64(Date().timeIntervalSince1970)
        let startEpoch = Protocol.epoch(unixSeconds: now)
        #expect(await again.ring.snapshot().ownSecret == secret)
        // Sealed in the epoch it started in (unless the test itself crossed a boundary).
        let sealed = sealsNow(again.radio.allAdverts, secret: secret, nowSeconds: now)
        #expect(!sealed.isEmpty || Protocol.epoch(unixSeconds: Int64(Date().timeIntervalSince1970)) > startEpoch,
                "the restart sealed nothing in its epoch: \(again.radio.allAdverts.count) adverts")
        var seen: [Nonce: Set<[UInt8]>] = [:]
        Self.record(firstAdverts + again.radio.allAdverts, secrets: [secret], nowSeconds: now, into: &seen)
        #expect(seen.filter { $0.value.count > 1 }.isEmpty)
        await again.stop()
        await b.stop()
    }

    /// An unreadable boot mark is removed, said in the log, and the start waits for the next epoch
    /// (the conservative floor); a missing one is the first start of a boot and seals at once.
    @Test func anUnreadableBootMarkFallsBackToWaiting() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let runtime = directory.appendingPathComponent("run").path
        let (a, b) = try await pairedAlpha(runtime: runtime)
        try await publish(a, "one", version: 1)
        let secret = await a.ring.snapshot().ownSecret
        await a.stop()
        let markPath = try BootMarkStore(runtimeDirectory: runtime, stateDirectory: alphaPath).filePath
        #expect(FileManager.default.fileExists(atPath: markPath))
        try Data("not a mark".utf8).write(to: URL(fileURLWithPath: markPath))
        chmod(markPath, 0o600)
        let start = Int64(Date().timeIntervalSince1970)
        let waiting = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        try await publish(waiting, "two", version: 2)
        let now = Int64(Date().timeIntervalSince1970)
        #expect(sealsNow(waiting.radio.allAdverts, secret: secret, nowSeconds: start).isEmpty
                || Protocol.epoch(unixSeconds: now) > Protocol.epoch(unixSeconds: start))
        // Removed, so the next persist wrote a fresh one.
        let reread = try BootMarkStore(runtimeDirectory: runtime, stateDirectory: alphaPath).read()
        guard case .present(let mark) = reread else { Issue.record("no valid boot mark after the start: \(reread)"); return }
        #expect(mark.secretID == AdvertSender.secretID(of: secret))
        await waiting.stop()
        try FileManager.default.removeItem(atPath: markPath)
        // No mark at all: the first start of a boot (a rolled-back disk comes with a reboot, and the
        // boot is older than this epoch), so it seals at once.
        let booted = try await BusLessNode.start(in: directory, name: "alpha", runtimeDirectory: runtime)
        try await publish(booted, "three", version: 3)
        #expect(!booted.radio.allAdverts.isEmpty)
        #expect(FileManager.default.fileExists(atPath: markPath))
        await booted.stop()
        await b.stop()
    }

    @Test func restoringAnOlderStateDirectoryWithTheBootMarkPresentNeverSealsANonceTwice() async throws {
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
        // Restored (from a backup, without a reboot; the runtime directory keeps its boot mark) and
        // started again, within the same epoch as the lost seals (the test takes seconds).
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
        // The boot mark (in the runtime directory, not restored) names the same secret: the restart
        // continues after the lost seals and seals at once, in this epoch (no re-key needed).
        #expect(secondSecret == firstSecret)
        #expect(!sealsNow(secondAdverts, secret: secondSecret, nowSeconds: now).isEmpty
                || Protocol.epoch(unixSeconds: Int64(Date().timeIntervalSince1970)) > Protocol.epoch(unixSeconds: now))
        await again.stop()
        await b.stop()
    }
}
