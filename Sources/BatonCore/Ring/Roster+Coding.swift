// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

extension Roster {
    public var propertyValue: PropertyValue {
        // Keyed by device id: sorting the keys sorts the members (§7.3's order).
        let list = entries.sorted { $0.key < $1.key }.map(\.value.propertyValue)
        let marks = removalMarks.sorted { $0.key < $1.key }.map { id, mark -> PropertyValue in
            if let record = mark.record { return .bytes(record) }
            return .dictionary(["deviceId": .bytes(id.bytes), "removedBy": .bytes(mark.remover.bytes), "signature": .bytes(mark.signature)])
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
        guard list.count <= Self.maxMembers, removedList.count <= Self.maxRemovals else { throw .malformed("roster size") }
        var marks: [DeviceID: RemovalMark] = [:]
        for item in removedList {
            let id: DeviceID, mark: RemovalMark
            if let record = item.bytesValue {
                (id, mark) = try RemovalMark.parse(record: record)
            } else {
                // The dictionary form kept in rings stored before tombstones carried keys.
                guard let entry = item.dictionaryValue, let removedID = entry["deviceId"]?.bytesValue,
                      let remover = entry["removedBy"]?.bytesValue, let signature = entry["signature"]?.bytesValue else {
                    throw .malformed("roster removed entry")
                }
                id = try DeviceID(bytes: removedID)
                mark = try RemovalMark(remover: DeviceID(bytes: remover), signature: signature)
            }
            guard marks[id] == nil else { throw .malformed("roster removed entry") }
            marks[id] = mark
        }
        var members: [RosterMember] = []
        for item in list { members.append(try RosterMember(value: item)) }
        self.init(version: UInt64(version), members: members, removalMarks: marks)
    }
}
