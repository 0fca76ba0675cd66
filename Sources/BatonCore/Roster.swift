/// One ring member as the roster carries it (§7.3).
public struct RosterMember: Hashable, Sendable {
    public static let maxNameBytes = 64
    public var name: String
    public var identityKey: [UInt8]
    public var secret: AdvertisingSecret
    public var deviceID: DeviceID { DeviceID(identityKey: identityKey) }

    public init(name: String, identityKey: [UInt8], secret: AdvertisingSecret) throws(WireError) {
        guard identityKey.count == 32 else { throw .malformed("identity key length") }
        guard name.utf8.count <= Self.maxNameBytes else { throw .malformed("name length") }
        self.name = name
        self.identityKey = identityKey
        self.secret = secret
    }
}

/// The ring: who is in, who was removed (§7.3). Merging is commutative in its member set.
public struct Roster: Hashable, Sendable {
    public static let maxMembers = 10_000
    public var version: UInt64
    public private(set) var members: [DeviceID: RosterMember]
    public private(set) var removed: Set<DeviceID>

    public init(version: UInt64 = 0, members: [RosterMember] = [], removed: Set<DeviceID> = []) {
        self.version = version
        self.removed = removed
        var byID: [DeviceID: RosterMember] = [:]
        for member in members where !removed.contains(member.deviceID) { byID[member.deviceID] = member }
        self.members = byID
    }

    /// Adds or updates a member; ignored for a removed device. Returns whether anything changed.
    @discardableResult
    public mutating func upsert(_ member: RosterMember) -> Bool {
        let id = member.deviceID
        guard !removed.contains(id) else { return false }
        if let existing = members[id], existing.secret.generation >= member.secret.generation { return false }
        members[id] = member
        version += 1
        return true
    }

    /// Removes a member for good (tombstone). Returns whether anything changed.
    @discardableResult
    public mutating func remove(_ id: DeviceID) -> Bool {
        guard !removed.contains(id) else { return false }
        removed.insert(id)
        members[id] = nil
        version += 1
        return true
    }

    /// Merges a received roster (§7.3). Returns the device ids that became removed by it, so
    /// the caller knows to rotate its own secret (§7.4).
    @discardableResult
    public mutating func merge(_ other: Roster) -> (changed: Bool, newlyRemoved: Set<DeviceID>) {
        let newlyRemoved = other.removed.subtracting(removed)
        var changed = !newlyRemoved.isEmpty
        removed.formUnion(other.removed)
        for id in removed { if members.removeValue(forKey: id) != nil { changed = true } }
        for (id, member) in other.members where !removed.contains(id) {
            if let mine = members[id] {
                if member.secret.generation > mine.secret.generation { members[id] = member; changed = true }
            } else {
                members[id] = member
                changed = true
            }
        }
        // Members holding the same roster agree on its version, so a Hello stops triggering syncs (§7.3).
        let sameAsReceived = members == other.members && removed == other.removed
        version = changed && !sameAsReceived ? max(version, other.version) + 1 : max(version, other.version)
        return (changed, newlyRemoved)
    }

    public var propertyValue: PropertyValue {
        let list = members.values.sorted { $0.deviceID < $1.deviceID }.map { member -> PropertyValue in
            .dictionary([
                "deviceId": .bytes(member.deviceID.bytes),
                "name": .string(member.name),
                "identityKey": .bytes(member.identityKey),
                "secret": .bytes(member.secret.bytes),
                "generation": .integer(Int64(member.secret.generation)),
            ])
        }
        return .dictionary([
            "version": .integer(Int64(bitPattern: version)),
            "members": .array(list),
            "removed": .array(removed.sorted().map { .bytes($0.bytes) }),
        ])
    }

    public func encoded() throws(WireError) -> [UInt8] {
        try PropertyValueCodec.encode(propertyValue, limit: FrameType.ringSync.maxPayload)
    }

    public init(decoding bytes: [UInt8]) throws(WireError) {
        try self.init(value: PropertyValueCodec.decode(bytes, limit: FrameType.ringSync.maxPayload))
    }

    public init(value: PropertyValue) throws(WireError) {
        guard let entries = value.dictionaryValue, let version = entries["version"]?.integerValue,
              let list = entries["members"]?.arrayValue, let removedList = entries["removed"]?.arrayValue else {
            throw .malformed("roster")
        }
        guard list.count <= Self.maxMembers, removedList.count <= Self.maxMembers else { throw .malformed("roster size") }
        var removed: Set<DeviceID> = []
        for item in removedList {
            guard let bytes = item.bytesValue else { throw .malformed("roster removed entry") }
            removed.insert(try DeviceID(bytes: bytes))
        }
        var members: [RosterMember] = []
        for item in list {
            guard let m = item.dictionaryValue, let id = m["deviceId"]?.bytesValue, let name = m["name"]?.stringValue,
                  let key = m["identityKey"]?.bytesValue, let secret = m["secret"]?.bytesValue,
                  let generation = m["generation"]?.integerValue, generation >= 0, generation <= Int64(UInt32.max) else {
                throw .malformed("roster member")
            }
            let member = try RosterMember(name: name, identityKey: key,
                                          secret: AdvertisingSecret(bytes: secret, generation: UInt32(generation)))
            // The id is derived from the key; a mismatch means a forged or broken entry.
            guard member.deviceID.bytes == id else { throw .malformed("roster member id") }
            members.append(member)
        }
        self.init(version: UInt64(bitPattern: version), members: members, removed: removed)
    }
}
