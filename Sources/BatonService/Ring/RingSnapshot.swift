// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import Synchronization

/// What other parts of the daemon may know about the ring, as one value: published by
/// `RingService` after every change, read by the transfer (pins, Hello) and the continuation.
public struct RingSnapshot: Sendable {
    public var deviceID: DeviceID
    public var name: String
    /// This device's identity (the TLS key, protocol §8.1).
    public var identity: Ed25519PrivateKey
    public var roster: Roster
    /// This device's advertising secret (the advert seal, the DNS-SD instance name).
    public var ownSecret: AdvertisingSecret
    /// Where members reach this device's transfer listener; nil while the transfer is not running.
    public var transferPort: UInt16?
    public var localEndpoints: [String] = []
    /// Members a RingSync is still owed to, with the roster version it carries (durable, §7.4).
    public var pendingSyncs: [DeviceID: UInt64] = [:]
    public var rosterVersion: UInt64 { roster.version }
    /// What Hello carries (§6.2, §7.3).
    public var rosterDigest: UInt64 { roster.digestPrefix }

    /// Every member's advertising secret but this device's.
    public var peerSecrets: [DeviceID: AdvertisingSecret] {
        var out: [DeviceID: AdvertisingSecret] = [:]
        for (id, member) in roster.members where id != deviceID { out[id] = member.secret }
        return out
    }

    /// Identity keys of every member but this device: the TLS pins.
    /// Identity keys of removed devices (tombstones that keep one) and of devices a cascading mark
    /// took out (§7.3): they may still connect, but only to deliver a RingSync (its marks count)
    /// and to learn that they were removed.
    public var removedKeys: [DeviceID: [UInt8]] {
        var out: [DeviceID: [UInt8]] = [:]
        for (id, mark) in roster.removalMarks { if let key = mark.removedKey { out[id] = key } }
        for id in roster.derivedOut { if let entry = roster.entries[id] { out[id] = entry.identityKey } }
        return out
    }

    public func wasMember(_ id: DeviceID) -> Bool { roster.removalMarks[id]?.removedKey != nil || roster.derivedOut.contains(id) }

    public var memberKeys: [DeviceID: [UInt8]] {
        var keys: [DeviceID: [UInt8]] = [:]
        for (id, member) in roster.members where id != deviceID { keys[id] = member.identityKey }
        return keys
    }

    public func isMember(_ id: DeviceID) -> Bool { id != deviceID && roster.members[id] != nil }

    public func memberName(_ id: DeviceID) -> String { roster.members[id]?.name ?? id.shortForm }

    /// Resolves a name, a short id (xxxx-xxxx) or a full device id to one member.
    public func member(matching text: String) -> RosterMember? {
        let found = members(matching: text)
        return found.count == 1 ? found.first : nil
    }

    /// Every member `text` may mean, most specific first (dbus-api.md, Pairing1.Remove): a device id,
    /// else a short id, else a name. Ids win over names, so a member cannot hide another behind
    /// names shaped like its ids. Among namesakes, one that introduced all the others is meant: a
    /// member that names the identities it introduces after itself cannot make itself ambiguous.
    /// More than one result: ambiguous (sorted by device id).
    public func members(matching text: String) -> [RosterMember] {
        let wanted = text.lowercased()
        let all = roster.members.values.sorted { $0.deviceID < $1.deviceID }
        if let exact = all.first(where: { $0.deviceID.description == wanted }) { return [exact] }
        let byShortID = all.filter { $0.deviceID.shortForm == wanted }
        if !byShortID.isEmpty { return byShortID }
        let namesakes = all.filter { $0.name == text }
        let ids = Set(namesakes.map(\.deviceID))
        let introducers = Set(namesakes.compactMap { $0.introduction?.introducer }.filter { ids.contains($0) })
        if introducers.count == 1, let root = introducers.first,
           namesakes.allSatisfy({ $0.deviceID == root || $0.introduction?.introducer == root }) {
            return namesakes.filter { $0.deviceID == root }
        }
        return namesakes
    }
}

/// The ring as it is now, read without entering the ring's actor: `RingService` sets it in the same
/// step as every change of its state (its `keeper` and the transfer's reachability), with nothing
/// suspending in between, so a reader never sees an older ring than `snapshot()` would give. A
/// change is committed there only once it was saved (§7.3), so nothing unsaved shows here either.
/// The transfer re-checks membership and identity on it (§7.4, §7.5) as often as it needs.
public final class RingView: Sendable {
    private let state: Mutex<RingSnapshot>

    init(_ snapshot: RingSnapshot) { state = Mutex(snapshot) }

    public var current: RingSnapshot { state.withLock { $0 } }

    /// Whether `member` is in the ring and this machine is still `identity`.
    public func isMember(_ member: DeviceID, asIdentity identity: DeviceID) -> Bool {
        state.withLock { $0.deviceID == identity && $0.isMember(member) }
    }

    func publish(_ snapshot: RingSnapshot) { state.withLock { $0 = snapshot } }
}

/// The ring's published state: the snapshot, its live view and the observers of its changes.
extension RingService {
    public func snapshot() -> RingSnapshot { Self.snapshot(of: keeper, reachability: transferReachability) }

    static func snapshot(of keeper: RingKeeper, reachability: (port: UInt16, localEndpoints: [String])?) -> RingSnapshot {
        RingSnapshot(deviceID: keeper.deviceID, name: keeper.state.name, identity: keeper.identity, roster: keeper.state.roster,
                     ownSecret: keeper.ownSecret, transferPort: reachability?.port, localEndpoints: reachability?.localEndpoints ?? [],
                     pendingSyncs: keeper.state.pendingSyncs)
    }

    /// Calls `observer` now and after every ring change, until `stopObserving(key)`. The first call
    /// names the RingSyncs still owed (durable, §7.4), so the transfer retries them when it starts.
    public func observe(_ key: String, _ observer: @escaping ChangeObserver) async {
        observers[key] = observer
        let owed = keeper.state.pendingSyncs.keys.filter { keeper.state.roster.members[$0] != nil }.sorted()
        await observer(RingChange(snapshot: snapshot(), syncTo: owed))
    }

    public func stopObserving(_ key: String) { observers[key] = nil }

    /// The transfer tells where members reach it (announced at pairing and over DNS-SD); nil when it stops.
    public func setTransferReachability(port: UInt16?, localEndpoints: [String]) async {
        transferReachability = port.map { ($0, localEndpoints) }
        await notifyObservers(syncTo: [])
    }

    func notifyObservers(syncTo: [DeviceID]) async {
        let change = RingChange(snapshot: snapshot(), syncTo: syncTo)
        for observer in observers.values { await observer(change) }
    }
}

/// One ring change as observers see it: the new snapshot, and the members a RingSync is owed to.
public struct RingChange: Sendable {
    public var snapshot: RingSnapshot
    public var syncTo: [DeviceID]
}

/// A ring member as Ring1.ListMembers shows it.
struct MemberSummary: Sendable, Equatable {
    var name: String
    var deviceID: DeviceID
    var isSelf: Bool
    var peer: RingStore.PeerInfo?
    /// The member that paired this one, when this device learned it from another member's roster.
    var introducedBy: DeviceID?
    /// The introducer has since left the ring (removed, or taken out by a cascade): the attribution
    /// stays, "introduced by X, removed" (§7.3).
    var introducerRemoved: Bool = false
}
