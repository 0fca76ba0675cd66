// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonStore

/// The trust store: one durable record per concern under the state directory, each written
/// atomically with mode 0600 (BatonStore). A corrupt file is reported and kept, never replaced.
///
/// - `ring`: identity seed, name, roster (keys of every member), the RingSyncs still owed (retried
///   at the member's next sighting, so a re-key reaches a member that was away). Changes on pairing and removal.
/// - `peers`: when each member was paired, last seen, last RSSI, endpoint hints. Changes often.
/// - `advert-counters`: the advert sender's nonce counters (protocol §4.2), with the machine value.
/// - `machine-fallback`: a random machine value, only on systems without a machine id file.
///
/// With a state sealing key (systemd credential, docs/security.md "Key storage at rest") `ring`,
/// the only record holding keys, is sealed with AES-256-GCM; the others stay plain 0600 files.
public final class RingStore: Sendable {
    struct RingRecord: Codable, Sendable {
        var name: String
        var identitySeed: String
        /// Base64 on disk, as the `Data` it was before the store left Foundation.
        var roster: Base64Bytes
        /// Members owed our roster, by device id (hex), with the version they must reach (§7.4).
        /// Optional: records written before it have none.
        var pendingSyncs: [String: UInt64]?
    }

    public struct PeerInfo: Codable, Sendable, Hashable {
        public var pairedSince: Int64
        public var lastSeen: Int64?
        public var lastRSSI: Int?
        /// Where the member may be reached, learned at pairing or from DNS-SD, newest first; the
        /// pinned identity decides.
        public var hints: [Endpoint]

        public init(pairedSince: Int64, lastSeen: Int64? = nil, lastRSSI: Int? = nil, hints: [Endpoint] = []) {
            self.pairedSince = pairedSince
            self.lastSeen = lastSeen
            self.lastRSSI = lastRSSI
            self.hints = hints
        }

        /// The hints' text forms (Ring1.ListMembers, the file). Text that is no endpoint is dropped.
        public var endpoints: [String] {
            get { hints.map(\.description) }
            set { hints = newValue.compactMap { try? Endpoint(parsing: $0) } }
        }

        // On disk the hints stay the strings they always were ("endpoints"); each is parsed at load
        // through Endpoint(parsing:), and one that does not parse is left out rather than failing the file.
        enum CodingKeys: String, CodingKey { case pairedSince, lastSeen, lastRSSI, endpoints }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            pairedSince = try container.decode(Int64.self, forKey: .pairedSince)
            lastSeen = try container.decodeIfPresent(Int64.self, forKey: .lastSeen)
            lastRSSI = try container.decodeIfPresent(Int.self, forKey: .lastRSSI)
            hints = []
            endpoints = try container.decodeIfPresent([String].self, forKey: .endpoints) ?? []
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(pairedSince, forKey: .pairedSince)
            try container.encodeIfPresent(lastSeen, forKey: .lastSeen)
            try container.encodeIfPresent(lastRSSI, forKey: .lastRSSI)
            try container.encode(endpoints, forKey: .endpoints)
        }
    }

    private let ring: DurableRecord<RingRecord>
    private let peerInfo: DurableRecord<[String: PeerInfo]>
    private let counters: DurableRecord<SenderCounters>
    private let machine: DurableRecord<String>

    public init(directory: StateDirectory, sealing: StateSealingKey? = nil) throws(StoreError) {
        ring = try DurableRecord(name: "ring", schemaVersion: 1, in: directory, sealing: sealing)
        peerInfo = try DurableRecord(name: "peers", schemaVersion: 1, in: directory)
        counters = try DurableRecord(name: "advert-counters", schemaVersion: 1, in: directory)
        machine = try DurableRecord(name: "machine-fallback", schemaVersion: 1, in: directory)
    }

    public enum LoadError: Error, Sendable, Equatable, CustomStringConvertible {
        case store(StoreError)
        case invalidContent(String)

        public var description: String {
            switch self {
            case .store(let error): "\(error)"
            case .invalidContent(let what): "the ring record's \(what) does not decode"
            }
        }
    }

    /// The saved ring, or nil on first start.
    public func loadRing() throws(LoadError) -> RingKeeper.State? {
        let record: RingRecord?
        do { record = try ring.load() } catch { throw .store(error) }
        guard let record else { return nil }
        guard let seed = [UInt8](hex: record.identitySeed), seed.count == 32 else { throw .invalidContent("identity seed") }
        let roster: Roster
        do { roster = try Roster(decoding: record.roster.bytes) } catch { throw .invalidContent("roster") }
        var pending: [DeviceID: UInt64] = [:]
        for (key, version) in record.pendingSyncs ?? [:] {
            guard let bytes = [UInt8](hex: key), let id = try? DeviceID(bytes: bytes) else { throw .invalidContent("pending syncs") }
            pending[id] = version
        }
        return RingKeeper.State(name: record.name, identitySeed: seed, roster: roster, pendingSyncs: pending)
    }

    public func saveRing(_ state: RingKeeper.State) throws {
        var pending: [String: UInt64] = [:]
        for (id, version) in state.pendingSyncs { pending[id.description] = version }
        try ring.save(RingRecord(name: state.name, identitySeed: state.identitySeed.hexString,
                                 roster: Base64Bytes(try state.roster.encoded()), pendingSyncs: pending))
    }

    public func loadPeers() throws(StoreError) -> [DeviceID: PeerInfo] {
        var out: [DeviceID: PeerInfo] = [:]
        for (key, value) in try peerInfo.load() ?? [:] {
            if let bytes = [UInt8](hex: key), let id = try? DeviceID(bytes: bytes) { out[id] = value }
        }
        return out
    }

    public func savePeers(_ peers: [DeviceID: PeerInfo]) throws(StoreError) {
        var out: [String: PeerInfo] = [:]
        for (id, info) in peers { out[id.description] = info }
        try peerInfo.save(out)
    }

    /// How the secrets are kept on disk, GetStatus "SecretsAtRest": "plain" (0600 files) or
    /// "sealed-" and the credential's protection ("sealed-host", "sealed-host+tpm2", "sealed-tpm2").
    public var secretsAtRest: String { ring.sealing.map { "sealed-" + $0.protection.rawValue } ?? "plain" }

    /// With a sealing key: seals a `ring` file written plain (by a build or a start without the
    /// key), keeping the record inside byte for byte. Returns whether it sealed one.
    public func sealSecretsIfPlain() throws(LoadError) -> Bool {
        do { return try ring.sealIfPlain() } catch { throw .store(error) }
    }

    /// The state directory's path (names its boot mark, BootMarkStore).
    public var directoryPath: String { ring.directory.path }

    public func loadCounters() throws(StoreError) -> SenderCounters? { try counters.load() }
    public func saveCounters(_ value: SenderCounters) throws(StoreError) { try counters.save(value) }
    /// The counters' record itself: the radio writes it on its publish path (RadioService.persist).
    var advertCounters: DurableRecord<SenderCounters> { counters }

    /// The random machine value used when the system has no machine id (created on first use).
    func machineFallback() throws(StoreError) -> [UInt8] {
        if let text = try machine.load(), let bytes = [UInt8](hex: text), bytes.count == 32 { return bytes }
        let fresh = SystemRandom().bytes(32)
        try machine.save(fresh.hexString)
        return fresh
    }
}
