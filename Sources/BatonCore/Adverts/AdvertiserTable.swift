// SPDX-License-Identifier: LGPL-2.1-or-later
/// One advertiser heard on the air, as diagnostics show it. Holds no payload bytes: ring adverts
/// are only named by the member's short id, so nothing here is key material or sealed content.
public struct AdvertiserRecord: Hashable, Sendable {
    public var address: BluetoothAddress
    /// Nil while the stack has not said (shown as "unknown").
    public var addressType: LEAddressType?
    public var rssi: RSSIStatistics
    /// Latest TX power the advertiser announced, in dBm.
    public var txPower: Int?
    /// Company ID of the first manufacturer data entry (the Baton one when present).
    public var companyID: UInt16?
    public var kind: AdvertiserKind
    public var name: String?
    public var reports: Int
    /// Milliseconds since the Unix epoch.
    public var firstSeenMilliseconds: Int64
    public var lastSeenMilliseconds: Int64
}

/// A bounded table of advertisers heard, keyed by address (`baton diag rssi`). Past `capacity`
/// the least recently heard advertiser is dropped, so a crowd of throw-away addresses cannot
/// grow it. Pure: reports and times come in, records go out (the service renders them).
public struct AdvertiserTable: Sendable {
    public static let defaultCapacity = 512

    public let batonCompanyID: UInt16
    private var records: LRUCache<BluetoothAddress, AdvertiserRecord>
    public private(set) var evictions = 0

    public init(capacity: Int = AdvertiserTable.defaultCapacity, batonCompanyID: UInt16 = Protocol.defaultCompanyID) {
        self.batonCompanyID = batonCompanyID
        records = LRUCache(capacity: capacity)
    }

    public var capacity: Int { records.capacity }
    public var count: Int { records.count }
    /// Reserved storage slots; stays at the capacity however many advertisers were heard.
    public var storageCapacity: Int { records.storageCapacity }

    public func record(for address: BluetoothAddress) -> AdvertiserRecord? { records.peek(address) }

    /// Records one report heard at `nowMilliseconds`, classified once by `AdvertMatcher.hear`;
    /// returns the updated record. Only an accepted advert shows as a ring member.
    @discardableResult
    public mutating func record(_ report: AdvertisementReport, heard: HeardAdvert, nowMilliseconds: Int64) -> AdvertiserRecord {
        record(report, kind: heard.advertiserKind(batonCompanyID: batonCompanyID), nowMilliseconds: nowMilliseconds)
    }

    private mutating func record(_ report: AdvertisementReport, kind: AdvertiserKind, nowMilliseconds: Int64) -> AdvertiserRecord {
        let companyID = Self.primaryCompanyID(of: report, batonCompanyID: batonCompanyID)
        var entry = records.get(report.address) ?? AdvertiserRecord(
            address: report.address, addressType: report.addressType, rssi: RSSIStatistics(), txPower: nil,
            companyID: nil, kind: kind, name: nil, reports: 0,
            firstSeenMilliseconds: nowMilliseconds, lastSeenMilliseconds: nowMilliseconds)
        entry.addressType = report.addressType
        if let rssi = report.rssi { entry.rssi.record(rssi) }
        if let txPower = report.txPower { entry.txPower = txPower }
        // A report carrying no manufacturer data (an RSSI-only update) keeps what was learnt.
        if companyID != nil || !report.serviceUUIDs.isEmpty || entry.reports == 0 {
            entry.companyID = companyID
            entry.kind = kind
        }
        if let name = report.name { entry.name = name }
        entry.reports += 1
        entry.lastSeenMilliseconds = max(entry.lastSeenMilliseconds, nowMilliseconds)
        if records.set(report.address, entry) != nil { evictions += 1 }
        return entry
    }

    /// The stack forgot the advertiser (BlueZ removed its device object).
    public mutating func forget(address: BluetoothAddress) {
        records.removeValue(forKey: address)
    }

    /// Drops the rows shown as ring members that are no longer members (removed, or this machine
    /// took a new identity and left its ring): a diagnostic must not name a member that is gone.
    public mutating func forgetRingMembers(except members: Set<DeviceID>) {
        for (address, record) in records.entriesNewestFirst {
            if case .ringMember(let id) = record.kind, !members.contains(id) { records.removeValue(forKey: address) }
        }
    }

    /// Strongest (smoothed RSSI) first; unknown RSSI after known; then most recently heard.
    public var sortedRecords: [AdvertiserRecord] {
        records.entriesNewestFirst.map(\.value).sorted { lhs, rhs in
            switch (lhs.rssi.smoothed, rhs.rssi.smoothed) {
            case let (left?, right?) where left != right: return left > right
            case (.some, nil): return true
            case (nil, .some): return false
            default:
                if lhs.lastSeenMilliseconds != rhs.lastSeenMilliseconds {
                    return lhs.lastSeenMilliseconds > rhs.lastSeenMilliseconds
                }
                return lhs.address.bytes.lexicographicallyPrecedes(rhs.address.bytes)
            }
        }
    }

    /// The Baton company ID when present, else the lowest company ID in the report.
    static func primaryCompanyID(of report: AdvertisementReport, batonCompanyID: UInt16) -> UInt16? {
        if report.manufacturerData[batonCompanyID] != nil { return batonCompanyID }
        return report.manufacturerData.keys.min()
    }
}
