// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// The ring: who is in, who was removed and by whom (§7.3). Every entry is signed by the identity
/// it describes; removal marks are signed by the remover; merging checks both (`merge`).
public struct Roster: Hashable, Sendable {
    public static let maxMembers = 10_000
    public var version: UInt64
    public private(set) var members: [DeviceID: RosterMember]
    public private(set) var removalMarks: [DeviceID: RemovalMark]
    public var removed: Set<DeviceID> { Set(removalMarks.keys) }

    public init(version: UInt64 = 0, members: [RosterMember] = [], removalMarks: [DeviceID: RemovalMark] = [:]) {
        self.version = version
        self.removalMarks = removalMarks
        var byID: [DeviceID: RosterMember] = [:]
        for member in members where removalMarks[member.deviceID] == nil { byID[member.deviceID] = member }
        self.members = byID
    }

    /// Adds or updates a member; ignored for a removed device or an older generation.
    @discardableResult
    public mutating func upsert(_ member: RosterMember) -> Bool {
        let id = member.deviceID
        guard removalMarks[id] == nil else { return false }
        if let existing = members[id], existing.secret.generation >= member.secret.generation { return false }
        members[id] = member
        bumpVersion()
        return true
    }

    /// Removes a member for good with a mark signed by `remover`. Marks and introductions the
    /// removed device signed are re-signed by the remover, so members joining later can still
    /// check them against a current member (§7.3).
    @discardableResult
    public mutating func remove(_ id: DeviceID, by remover: Ed25519PrivateKey) -> Bool {
        guard removalMarks[id] == nil, let mark = try? RemovalMark.make(removing: id, by: remover) else { return false }
        removalMarks[id] = mark
        members[id] = nil
        for (other, mark) in removalMarks where mark.remover == id {
            removalMarks[other] = (try? RemovalMark.make(removing: other, by: remover)) ?? mark
        }
        for (other, member) in members where member.introduction?.introducer == id {
            members[other] = member.introduced(by: try? Introduction.make(for: member.identityKey, by: remover))
        }
        bumpVersion()
        return true
    }

    /// Records `introducer` as the member who paired `id` in (§7.3); false when `id` is unknown.
    @discardableResult
    public mutating func introduce(_ id: DeviceID, by introducer: Ed25519PrivateKey) -> Bool {
        guard let member = members[id], let introduction = try? Introduction.make(for: member.identityKey, by: introducer),
              member.introduction != introduction else { return false }
        members[id] = member.introduced(by: introduction)
        bumpVersion()
        return true
    }

    /// Moves every member's key forward to `day` and drops the earlier value (§3.1). The version
    /// does not change: the day of a stored key is local, members agree on the roster without it.
    @discardableResult
    public mutating func ratchet(toDay day: UInt64) -> Bool {
        var changed = false
        for (id, member) in members where member.secret.day < day {
            guard let later = member.ratcheted(toDay: day) else { continue }
            members[id] = later
            changed = true
        }
        return changed
    }

    public struct MergeResult: Hashable, Sendable {
        public var changed: Bool
        /// Device ids that became removed by this merge (the caller rotates its own secret, §7.4).
        public var newlyRemoved: Set<DeviceID>
        /// Entries left out: this device's own entry, members nobody current introduced, marks
        /// whose remover is not a current member.
        public var ignored: Set<DeviceID>
    }

    /// Merges a received roster (§7.3). `me` is never taken from it; `anchor` is the device the
    /// roster came from when it is not a member yet (the pairing peer). A signature that does
    /// not verify refuses the whole roster (`badSignature`); entries that cannot be vouched
    /// for are left out and listed in `ignored`.
    public mutating func merge(_ other: Roster, me: DeviceID, anchor: DeviceID? = nil) throws(WireError) -> MergeResult {
        var ignored: Set<DeviceID> = []
        // Members this device can vouch for: its own, then new ones introduced by a vouched member.
        var vouched = members.mapValues(\.identityKey)
        if let anchor, let entry = other.members[anchor], removalMarks[anchor] == nil, anchor != me { vouched[anchor] = entry.identityKey }
        var pending = other.members.filter { id, _ in vouched[id] == nil && id != me && removalMarks[id] == nil }
        // Walk from the vouched members along introductions: linear in the roster size.
        var introducedBy: [DeviceID: [DeviceID]] = [:]
        for (id, member) in pending { if let by = member.introduction?.introducer { introducedBy[by, default: []].append(id) } }
        var frontier = Array(vouched.keys)
        while let introducer = frontier.popLast() {
            guard let introducerKey = vouched[introducer] else { continue }
            for id in introducedBy.removeValue(forKey: introducer) ?? [] {
                guard let member = pending.removeValue(forKey: id), let introduction = member.introduction else { continue }
                guard introduction.isValid(for: member.identityKey, introducerKey: introducerKey) else { throw .badSignature }
                vouched[id] = member.identityKey
                frontier.append(id)
            }
        }
        ignored.formUnion(pending.keys)
        if other.members[me] != nil { ignored.insert(me) }

        var acceptedMarks: [DeviceID: RemovalMark] = [:]
        for (id, mark) in other.removalMarks where removalMarks[id] == nil || removerGone(removalMarks[id]!, vouched) {
            guard let remover = vouched[mark.remover], mark.remover != id else { ignored.insert(id); continue }
            guard mark.isValid(removing: id, removerKey: remover) else { throw .badSignature }
            acceptedMarks[id] = mark
        }

        var changed = false
        var newlyRemoved: Set<DeviceID> = []
        for (id, mark) in acceptedMarks where removalMarks[id] != mark {
            if removalMarks[id] == nil { newlyRemoved.insert(id) }
            removalMarks[id] = mark
            changed = true
        }
        for id in removalMarks.keys where members.removeValue(forKey: id) != nil { changed = true }
        for (id, member) in other.members where id != me && removalMarks[id] == nil && vouched[id] != nil {
            if let mine = members[id] {
                if member.secret.generation > mine.secret.generation {
                    members[id] = member
                    changed = true
                } else if member.secret.generation == mine.secret.generation {
                    // Same generation: the earlier day's key of the same chain (§3.1), whoever sent it,
                    // and the received introduction when ours is by a device that is gone.
                    var kept = mine
                    if member.secret.day < mine.secret.day, member.secret.chain?.commitment == mine.secret.chain?.commitment {
                        kept = member.introduced(by: mine.introduction)
                    }
                    if introducerGone(mine, vouched) && !introducerGone(member, vouched) {
                        kept = kept.introduced(by: member.introduction)
                        changed = true
                    }
                    // A key moved back alone is local state, like a ratchet step: no new version.
                    members[id] = kept
                }
            } else {
                members[id] = member
                changed = true
            }
        }
        // Members holding the same roster agree on its version, so a Hello stops triggering syncs (§7.3).
        let sameAsReceived = members == other.members && removalMarks == other.removalMarks
        let highest = max(version, other.version)
        version = highest
        if changed && !sameAsReceived { bumpVersion() }
        return MergeResult(changed: changed, newlyRemoved: newlyRemoved, ignored: ignored)
    }

    /// Versions travel as non-negative integers (§7.3): they stop at 2⁶³ − 1 rather than wrap.
    private mutating func bumpVersion() {
        if version < UInt64(Int64.max) { version += 1 }
    }

    private func removerGone(_ mark: RemovalMark, _ vouched: [DeviceID: [UInt8]]) -> Bool {
        vouched[mark.remover] == nil || removalMarks[mark.remover] != nil
    }

    private func introducerGone(_ member: RosterMember, _ vouched: [DeviceID: [UInt8]]) -> Bool {
        guard let introducer = member.introduction?.introducer else { return false }
        return vouched[introducer] == nil || removalMarks[introducer] != nil
    }

    public var propertyValue: PropertyValue {
        let list = members.values.sorted { $0.deviceID < $1.deviceID }.map(\.propertyValue)
        let marks = removalMarks.sorted { $0.key < $1.key }.map { id, mark -> PropertyValue in
            .dictionary(["deviceId": .bytes(id.bytes), "removedBy": .bytes(mark.remover.bytes), "signature": .bytes(mark.signature)])
        }
        return .dictionary([
            "version": .integer(Int64(bitPattern: version)),
            "members": .array(list),
            "removed": .array(marks),
        ])
    }

    public func encoded() throws(WireError) -> [UInt8] {
        try PropertyValueCodec.encode(propertyValue, limit: FrameType.ringSync.maxPayload)
    }

    public init(decoding bytes: [UInt8]) throws(WireError) {
        try self.init(value: PropertyValueCodec.decode(bytes, limit: FrameType.ringSync.maxPayload))
    }

    public init(value: PropertyValue) throws(WireError) {
        guard let entries = value.dictionaryValue, let version = entries["version"]?.integerValue, version >= 0,
              let list = entries["members"]?.arrayValue, let removedList = entries["removed"]?.arrayValue else {
            throw .malformed("roster")
        }
        guard list.count <= Self.maxMembers, removedList.count <= Self.maxMembers else { throw .malformed("roster size") }
        var marks: [DeviceID: RemovalMark] = [:]
        for item in removedList {
            guard let mark = item.dictionaryValue, let id = mark["deviceId"]?.bytesValue, let remover = mark["removedBy"]?.bytesValue,
                  let signature = mark["signature"]?.bytesValue else {
                throw .malformed("roster removed entry")
            }
            marks[try DeviceID(bytes: id)] = try RemovalMark(remover: DeviceID(bytes: remover), signature: signature)
        }
        var members: [RosterMember] = []
        for item in list { members.append(try RosterMember(value: item)) }
        self.init(version: UInt64(version), members: members, removalMarks: marks)
    }
}
