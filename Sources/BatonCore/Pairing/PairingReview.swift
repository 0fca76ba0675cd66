// SPDX-License-Identifier: LGPL-2.1-or-later

/// What committing a pairing would change in this ring (§7.2 "What the users do"): the peer's
/// roster merged into a copy of ours exactly as the commit merges it (`RingKeeper.pair`), nothing
/// stored. Shown before the person commits, so a pairing that would remove members here (this
/// machine included) or re-key them can be refused.
public struct PairingReview: Hashable, Sendable {
    /// Members the peer's ring adds here (the peer included), by name then id.
    public var joining: [ReviewedMember]
    /// Members of this ring the peer's removal marks (or a cascade, §7.3) would take out.
    public var removals: [ReviewedRemoval]
    /// Members of this ring whose secret generation the peer's roster raises; this machine too
    /// when the commit makes it re-key (it re-keys whenever the merge removes a member, §7.4).
    public var generations: [ReviewedGeneration]

    public init(joining: [ReviewedMember] = [], removals: [ReviewedRemoval] = [], generations: [ReviewedGeneration] = []) {
        self.joining = joining
        self.removals = removals
        self.generations = generations
    }

    /// The dry run: `ours` is this ring's roster, `me` this device, `peer` the pairing peer's own
    /// entry and `peerRoster` the roster it sent. When the merge refuses the peer's roster (the
    /// commit would then fail and change nothing), only the members it lists that are new here are shown.
    public init(ours: Roster, peerRoster: Roster, peer: RosterMember, me: DeviceID) {
        var merged = ours
        let result: Roster.MergeResult
        do {
            result = try merged.merge(peerRoster, me: me, anchor: peer.deviceID)
        } catch {
            self.init(joining: Self.sorted(peerRoster.members.values.filter { ours.members[$0.deviceID] == nil }))
            return
        }
        if merged.members[peer.deviceID] == nil, !merged.isOut(peer.deviceID) { merged.upsert(peer) }
        func name(_ id: DeviceID) -> String {
            merged.entries[id]?.name ?? ours.entries[id]?.name ?? peerRoster.entries[id]?.name ?? ""
        }
        let joining = Self.sorted(merged.members.values.filter { ours.members[$0.deviceID] == nil })
        let removals = ours.members.values.filter { merged.members[$0.deviceID] == nil }
            .sorted { ($0.name, $0.deviceID) < ($1.name, $1.deviceID) }
            .map { member -> ReviewedRemoval in
                let remover = merged.removalMarks[member.deviceID]?.remover
                return ReviewedRemoval(name: member.name, deviceID: member.deviceID, removedBy: remover,
                                       removedByName: remover.map(name) ?? "", isThisDevice: member.deviceID == me)
            }
        var generations = ours.members.values.compactMap { member -> ReviewedGeneration? in
            guard member.deviceID != me, let later = merged.members[member.deviceID],
                  later.secret.generation > member.secret.generation else { return nil }
            return ReviewedGeneration(name: member.name, deviceID: member.deviceID,
                                      from: member.secret.generation, to: later.secret.generation)
        }
        if !result.newlyRemoved.isEmpty, let mine = merged.members[me] {
            let (next, overflow) = mine.secret.generation.addingReportingOverflow(1)
            if !overflow {
                generations.append(ReviewedGeneration(name: mine.name, deviceID: me, from: mine.secret.generation, to: next, isThisDevice: true))
            }
        }
        generations.sort { ($0.name, $0.deviceID) < ($1.name, $1.deviceID) }
        self.init(joining: joining, removals: removals, generations: generations)
    }

    private static func sorted(_ members: some Sequence<RosterMember>) -> [ReviewedMember] {
        members.sorted { ($0.name, $0.deviceID) < ($1.name, $1.deviceID) }.map { ReviewedMember(name: $0.name, deviceID: $0.deviceID) }
    }
}

/// A member of this ring the commit would remove (PairingSession1.PeerRemovals).
public struct ReviewedRemoval: Hashable, Sendable {
    public var name: String
    public var deviceID: DeviceID
    /// Who signed the removal mark; nil when a cascading mark took the member out with the device
    /// that introduced it (§7.3 "Cascade").
    public var removedBy: DeviceID?
    /// The remover's name when either roster still holds its entry, else "".
    public var removedByName: String
    /// The member is this machine: committing would take it out of its own ring.
    public var isThisDevice: Bool

    public init(name: String, deviceID: DeviceID, removedBy: DeviceID?, removedByName: String = "", isThisDevice: Bool = false) {
        self.name = name
        self.deviceID = deviceID
        self.removedBy = removedBy
        self.removedByName = removedByName
        self.isThisDevice = isThisDevice
    }
}

/// A member of this ring whose secret generation the commit would raise (PairingSession1.PeerGenerations).
public struct ReviewedGeneration: Hashable, Sendable {
    public var name: String
    public var deviceID: DeviceID
    public var from: UInt32
    public var to: UInt32
    /// This machine, which re-keys because the commit removes a member here.
    public var isThisDevice: Bool

    public init(name: String, deviceID: DeviceID, from: UInt32, to: UInt32, isThisDevice: Bool = false) {
        self.name = name
        self.deviceID = deviceID
        self.from = from
        self.to = to
        self.isThisDevice = isThisDevice
    }
}
