// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Foundation
import Testing
@testable import BatonService
@testable import BatonStore

/// Every record batond keeps, and the status file, against Foundation's JSONEncoder/JSONDecoder,
/// which wrote them before the store's own coder (issue 10): files of today's daemon read back
/// identically, what this build writes is the same bytes (so an older build reads it: downgrades
/// work), older schemas still read.
@Suite("State file compatibility")
struct StateFileCompatibilityTests {
    static let peer = DeviceID(identityKey: [UInt8](repeating: 7, count: 32))
    static let other = DeviceID(identityKey: [UInt8](repeating: 9, count: 32))

    /// The ring record as it was declared while Foundation coded it (the roster a `Data`).
    struct FoundationRingRecord: Codable, Equatable {
        var name: String
        var identitySeed: String
        var roster: Data
        var pendingSyncs: [String: UInt64]?
    }

    /// Same bytes as Foundation with the store's options, and each side reads the other's.
    private func expectFoundationCompatible<Value: Codable & Equatable>(_ value: Value, pretty: Bool = false,
                                                                     sourceLocation: SourceLocation = #_sourceLocation) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys] : [.sortedKeys]
        let theirs = Array(try encoder.encode(value))
        let ours = try JSONValueEncoder(pretty: pretty).encode(value)
        #expect(String(decoding: ours, as: UTF8.self) == String(decoding: theirs, as: UTF8.self), sourceLocation: sourceLocation)
        #expect(try JSONValueDecoder().decode(Value.self, from: theirs) == value, sourceLocation: sourceLocation)
        #expect(try JSONDecoder().decode(Value.self, from: Data(ours)) == value, sourceLocation: sourceLocation)
    }

    static func editSessions() throws -> EditSessionRecord {
        var keeper = EditSessionKeeper()
        try keeper.book.commitLocal("notes/today.md", digest: SHA256.hash([1]))
        try keeper.book.commitLocal("plan \"Q4\"", digest: SHA256.hash([2]))
        let claim = try EditSessionClaim(documentID: "plan \"Q4\"", baseRevision: 0)
        let request = Frame(type: .claimEditSession, requestID: 12, payload: claim.payload)
        _ = keeper.grant(request, claim: claim, from: peer, savedDigest: SHA256.hash([3]))
        try keeper.book.importGranted("shared", base: 0, granted: try DocumentRevision(revision: 4, digest: SHA256.hash([4])), from: other)
        var user = UserEditSessions(documentLimit: 8)
        user.keeper = keeper
        user.lastUsed = ["notes/today.md", "plan \"Q4\"", "shared"]
        return EditSessionRecord(users: ["1000": user, "0": UserEditSessions(documentLimit: 3)])
    }

    static func status() -> DaemonStatus {
        DaemonStatus(state: .degraded, busName: "org.baton.Daemon", adapter: "hci0", radio: "unavailable",
                     radioDetail: "bluetoothd is not running",
                     activities: [.init(objectPath: "/org/baton/activities/1000/1", type: "org.example.Reader", status: "current", current: true, lastError: nil),
                                  .init(objectPath: "/org/baton/activities/1000/2", type: "org.example.Édit/ör", status: "failed", current: false, lastError: "source-timeout")],
                     errors: [ErrorRecord(time: 1_764_500_000, category: .radioUnavailable, count: 3), ErrorRecord(time: -1, category: .noAgent, count: .max)],
                     updated: 1_764_550_000)
    }

    @Test func everyRecordIsWrittenAndReadAsFoundationDid() throws {
        let sessions = try Self.editSessions()
        try expectFoundationCompatible(sessions)
        try expectFoundationCompatible(EditSessionRecord())
        try expectFoundationCompatible(sessions.users["1000"]!.keeper)  // schema 1 of document-sessions
        let claims = [JournalledClaim(PendingClaim(requestID: 41, peer: Self.peer, claim: try EditSessionClaim(documentID: "plan-2", baseRevision: 3),
                                                   activityType: "org.example.Plan", uid: 1000)),
                      JournalledClaim(PendingClaim(requestID: .max, peer: Self.other, claim: try EditSessionClaim(documentID: "old", baseRevision: 0)))]
        try expectFoundationCompatible(claims)
        try expectFoundationCompatible(claims.map(\.pending))
        try expectFoundationCompatible(SenderCounters(generation: 3, epoch: 1_961_000, nextSequence: 256, revision: .max, machine: SHA256.hash([8])))
        try expectFoundationCompatible(SenderCounters(generation: 0, epoch: 0, nextSequence: 0, revision: 0))
        let peers = ["00112233445566778899aabbccddeeff": RingStore.PeerInfo(pairedSince: 1_700_000_000, lastSeen: 1_700_000_100, lastRSSI: -67,
                                                                               hints: [.ip(host: "fd00::7", port: 4100), .ip(host: "10.0.0.7", port: 1)]),
                     Self.peer.description: RingStore.PeerInfo(pairedSince: -5)]
        try expectFoundationCompatible(peers)
        try expectFoundationCompatible(String(repeating: "ab", count: 32))  // machine-fallback
        try expectFoundationCompatible(Self.status(), pretty: true)
        var quiet = Self.status()
        quiet.radioDetail = nil
        quiet.activities = []
        quiet.errors = []
        try expectFoundationCompatible(quiet, pretty: true)
    }

    @Test func theRingRecordKeepsItsBase64Roster() throws {
        let roster = try Roster(version: 7).encoded() + [0xFB, 0xFF, 0x3E]  // bytes whose base64 holds "+" and "/"
        let old = FoundationRingRecord(name: "laptop", identitySeed: [UInt8](repeating: 0xA5, count: 32).hexString, roster: Data(roster),
                                       pendingSyncs: [Self.peer.description: 9])
        let oldBytes = Array(try { let encoder = JSONEncoder(); encoder.outputFormatting = [.sortedKeys]; return try encoder.encode(old) }())
        let new = RingStore.RingRecord(name: old.name, identitySeed: old.identitySeed, roster: Base64Bytes(roster), pendingSyncs: old.pendingSyncs)
        #expect(try JSONValueEncoder().encode(new) == oldBytes)
        let read = try JSONValueDecoder().decode(RingStore.RingRecord.self, from: oldBytes)
        #expect(read.roster.bytes == roster && read.name == "laptop" && read.pendingSyncs == [Self.peer.description: 9])
        #expect(try JSONDecoder().decode(FoundationRingRecord.self, from: Data(try JSONValueEncoder().encode(new))) == old)
        // Written before pending syncs were kept.
        let older = try JSONValueDecoder().decode(RingStore.RingRecord.self, from: Array(#"{"identitySeed":"00","name":"n","roster":"AQID"}"#.utf8))
        #expect(older.pendingSyncs == nil && older.roster.bytes == [1, 2, 3])
    }

    /// Files as today's daemon left them in a state directory, read by this build's stores, and
    /// written back the same bytes.
    @Test func aStateDirectoryWrittenWithFoundationLoads() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("compat-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try StateDirectory(path: path)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        func place(_ name: String, _ value: some Encodable, schema: UInt32 = 1) throws -> [UInt8] {
            let body = Array(try encoder.encode(value))
            let file = try RecordFormat.encode(body: body, schemaVersion: schema)
            #expect(FileManager.default.createFile(atPath: directory.filePath(name), contents: Data(file), attributes: [.posixPermissions: 0o600]))
            return file
        }
        let seed = [UInt8](repeating: 0x5A, count: 32)
        let ringFile = try place("ring", FoundationRingRecord(name: "desk", identitySeed: seed.hexString, roster: Data(try Roster(version: 2).encoded()),
                                                              pendingSyncs: [Self.peer.description: 2]))
        let peersFile = try place("peers", [Self.peer.description: RingStore.PeerInfo(pairedSince: 10, lastSeen: 20, lastRSSI: -50, hints: [.ip(host: "192.0.2.1", port: 7)])])
        let countersFile = try place("advert-counters", SenderCounters(generation: 1, epoch: 99, nextSequence: 4, revision: 5, machine: [1, 2]))
        let store = try RingStore(directory: directory)
        let ring = try #require(try store.loadRing())
        #expect(ring.name == "desk" && ring.identitySeed == seed && ring.roster == Roster(version: 2) && ring.pendingSyncs == [Self.peer: 2])
        let peers = try store.loadPeers()
        #expect(peers[Self.peer] == RingStore.PeerInfo(pairedSince: 10, lastSeen: 20, lastRSSI: -50, hints: [.ip(host: "192.0.2.1", port: 7)]))
        #expect(try store.loadCounters() == SenderCounters(generation: 1, epoch: 99, nextSequence: 4, revision: 5, machine: [1, 2]))
        // Saved again by this build: byte for byte the files Foundation wrote.
        try store.saveRing(ring)
        try store.savePeers(peers)
        try store.saveCounters(try #require(try store.loadCounters()))
        #expect(contents(directory.filePath("ring")) == ringFile)
        #expect(contents(directory.filePath("peers")) == peersFile)
        #expect(contents(directory.filePath("advert-counters")) == countersFile)

        let sessions = try Self.editSessions()
        let sessionsFile = try place(EditSessions.recordName, sessions, schema: EditSessionRecord.schemaVersion)
        let record = try DurableRecord<EditSessionRecord>(name: EditSessions.recordName, schemaVersion: EditSessionRecord.schemaVersion, in: directory)
        #expect(try record.load() == sessions)
        try record.save(sessions)
        #expect(contents(directory.filePath(EditSessions.recordName)) == sessionsFile)
        // Schema 1 (one machine-wide keeper) still reads, into droppedLegacy.
        _ = try place(EditSessions.recordName, sessions.users["1000"]!.keeper, schema: 1)
        #expect(try record.load()?.droppedLegacy == sessions.users["1000"]!.keeper)
        // A claim journalled before claims named their user.
        let pending = PendingClaim(requestID: 5, peer: Self.peer, claim: try EditSessionClaim(documentID: "d", baseRevision: 1))
        _ = try place(EditSessions.journalName, [pending])
        #expect(try Journal<JournalledClaim>(name: EditSessions.journalName, capacity: 8, in: directory).entries() == [JournalledClaim(pending)])
    }

    /// Frozen texts that Foundation's JSONEncoder wrote (swift-6.3.1 toolchain, 2026-12-01): a
    /// schema-1 document-sessions body, a claim journalled before claims named their user, and
    /// status.json. Read into the values they were written from, and written back the same text.
    @Test func frozenFoundationTextsReadAndWriteBack() throws {
        let keeperText = #"{"applied":{"capacity":2,"entries":[{"grant":{"granted":{"digest":[2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2],"revision":2}},"peer":"4bb06f8e4e3a7715d201d573d0aa4237","requestDigest":[3,224,104,100,82,43,135,129,183,41,175,105,17,82,72,170,116,203,46,178,116,246,213,175,192,91,139,178,253,24,10,11],"requestID":3}]},"book":{"documentLimit":4,"ledgers":{"a\/b":{"current":{"digest":[2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2],"revision":2},"documentID":"a\/b","owner":{"peer":{"_0":"4bb06f8e4e3a7715d201d573d0aa4237"}}}}}}"#
        var keeper = EditSessionKeeper(book: EditSessionBook(documentLimit: 4), applied: AppliedClaims(capacity: 2))
        try keeper.book.commitLocal("a/b", digest: [UInt8](repeating: 1, count: 32))
        let claim = try EditSessionClaim(documentID: "a/b", baseRevision: 0)
        _ = keeper.grant(Frame(type: .claimEditSession, requestID: 3, payload: claim.payload), claim: claim, from: Self.peer,
                         savedDigest: [UInt8](repeating: 2, count: 32))
        #expect(keeper.book.owner(of: "a/b") == .peer(Self.peer))
        let legacy = try JSONValueDecoder().decode(EditSessionRecord.self, from: Array(keeperText.utf8))
        #expect(legacy.droppedLegacy == keeper && legacy.users.isEmpty)
        #expect(try JSONValueEncoder().encode(keeper) == Array(keeperText.utf8))

        let claimText = #"[{"claim":{"baseRevision":1,"documentID":"d"},"peer":"4bb06f8e4e3a7715d201d573d0aa4237","requestID":5}]"#
        let pending = PendingClaim(requestID: 5, peer: Self.peer, claim: try EditSessionClaim(documentID: "d", baseRevision: 1))
        #expect(try JSONValueDecoder().decode([JournalledClaim].self, from: Array(claimText.utf8)) == [JournalledClaim(pending)])
        #expect(try JSONValueEncoder().encode([JournalledClaim(pending)]) == Array(claimText.utf8))

        let statusText = """
{
  "activities" : [
    {
      "current" : true,
      "objectPath" : "\\/org\\/baton\\/activities\\/1000\\/1",
      "status" : "current",
      "type" : "org.example.Reader"
    }
  ],
  "adapter" : "hci0",
  "busName" : "org.baton.Daemon",
  "errors" : [
    {
      "category" : "radio-unavailable",
      "count" : 3,
      "time" : 1764500000
    }
  ],
  "radio" : "unavailable",
  "radioDetail" : "bluetoothd is not running",
  "state" : "degraded",
  "updated" : 1764550000
}
"""
        var status = Self.status()
        status.activities.removeLast()
        status.errors.removeLast()
        #expect(try JSONValueDecoder().decode(DaemonStatus.self, from: Array(statusText.utf8)) == status)
        #expect(String(decoding: try JSONValueEncoder(pretty: true).encode(status), as: UTF8.self) == statusText)
    }

    @Test func theStatusFileIsTheBytesFoundationWrote() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("compat-status-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try StatusFile<DaemonStatus>(name: "status.json", in: StateDirectory(path: path))
        try file.write(Self.status())
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        #expect(contents(file.filePath) == Array(try encoder.encode(Self.status())) + [0x0A])
        #expect(try file.read() == Self.status())
    }

    private func contents(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }
}
