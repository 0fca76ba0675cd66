/// One advertiser heard on the air, as diagnostics show it. Holds no payload bytes: ring adverts
/// are only named by the member's short id, so nothing here is key material or sealed content.
public struct AdvertiserRecord: Hashable, Sendable {
    public var address: String
    public var addressType: String
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
/// grow it. Pure: reports and times come in, text goes out.
public struct AdvertiserTable: Sendable {
    /// Identifies ring members' adverts (usually `AdvertMatcher.recognise`); gets the 24 bytes
    /// under the Baton company ID.
    public typealias RingLookup = ([UInt8]) -> DeviceID?

    public static let defaultCapacity = 512

    public let batonCompanyID: UInt16
    private var records: LRUCache<String, AdvertiserRecord>
    public private(set) var evictions = 0

    public init(capacity: Int = AdvertiserTable.defaultCapacity, batonCompanyID: UInt16 = Protocol.defaultCompanyID) {
        self.batonCompanyID = batonCompanyID
        records = LRUCache(capacity: capacity)
    }

    public var capacity: Int { records.capacity }
    public var count: Int { records.count }
    /// Reserved storage slots; stays at the capacity however many advertisers were heard.
    public var storageCapacity: Int { records.storageCapacity }

    public func record(for address: String) -> AdvertiserRecord? { records.peek(address) }

    /// Records one report heard at `nowMilliseconds`, classified once by `AdvertMatcher.hear`;
    /// returns the updated record. Only an accepted advert shows as a ring member.
    @discardableResult
    public mutating func record(_ report: AdvertisementReport, heard: HeardAdvert, nowMilliseconds: Int64) -> AdvertiserRecord {
        record(report, kind: heard.advertiserKind(batonCompanyID: batonCompanyID), nowMilliseconds: nowMilliseconds)
    }

    /// Records one report, classifying it here with `ringLookup` for ring members. Superseded by
    /// `record(_:heard:nowMilliseconds:)`, which does not open the advert a second time; kept
    /// until the service uses that.
    @discardableResult
    public mutating func record(_ report: AdvertisementReport, nowMilliseconds: Int64,
                                ringLookup: RingLookup = { _ in nil }) -> AdvertiserRecord {
        let companyID = Self.primaryCompanyID(of: report, batonCompanyID: batonCompanyID)
        let data = companyID.flatMap { report.manufacturerData[$0] }
        let kind: AdvertiserKind
        if companyID == batonCompanyID, let data, let member = ringLookup(data) {
            kind = .ringMember(member)
        } else {
            kind = AdvertiserKind.classify(companyID: companyID, batonCompanyID: batonCompanyID,
                                           manufacturerData: data, serviceUUIDs: report.serviceUUIDs)
        }
        return record(report, kind: kind, nowMilliseconds: nowMilliseconds)
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
    public mutating func forget(address: String) {
        records.removeValue(forKey: address)
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
                return lhs.address < rhs.address
            }
        }
    }

    /// The Baton company ID when present, else the lowest company ID in the report.
    static func primaryCompanyID(of report: AdvertisementReport, batonCompanyID: UInt16) -> UInt16? {
        if report.manufacturerData[batonCompanyID] != nil { return batonCompanyID }
        return report.manufacturerData.keys.min()
    }
}

// MARK: - Rendering

extension AdvertiserTable {
    /// A fixed-width table for people, strongest first.
    public func renderText(nowMilliseconds: Int64) -> String {
        let header = ["ADDRESS", "TYPE", "RSSI", "MIN", "MAX", "AVG", "TX", "COMPANY", "KIND", "SEEN", "REPORTS"]
        var rows = [header]
        for record in sortedRecords {
            rows.append([
                record.address,
                record.addressType,
                Self.dBm(record.rssi.last),
                Self.dBm(record.rssi.minimum),
                Self.dBm(record.rssi.maximum),
                record.rssi.smoothed.map { Self.oneDecimal($0) } ?? "?",
                record.txPower.map(String.init) ?? "-",
                record.companyID.map(Self.hex4) ?? "-",
                record.kind.label,
                Self.age(milliseconds: nowMilliseconds - record.lastSeenMilliseconds),
                String(record.reports),
            ])
        }
        var widths = [Int](repeating: 0, count: header.count)
        for row in rows {
            for (column, cell) in row.enumerated() { widths[column] = max(widths[column], cell.count) }
        }
        let lines = rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }.joined(separator: "  ")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// One JSON object per line, strongest first. Unknown values are null; RSSI 127 never
    /// appears as a value (it is counted in `rssiUnknownSamples`).
    public func renderJSONLines(nowMilliseconds: Int64) -> String {
        var out = ""
        for record in sortedRecords {
            var fields: [(String, String)] = [
                ("address", JSONWriter.quoted(record.address)),
                ("addressType", JSONWriter.quoted(record.addressType)),
                ("rssi", JSONWriter.integer(record.rssi.last)),
                ("rssiMin", JSONWriter.integer(record.rssi.minimum)),
                ("rssiMax", JSONWriter.integer(record.rssi.maximum)),
                ("rssiSmoothed", record.rssi.smoothed.map { Self.oneDecimal($0) } ?? "null"),
                ("rssiKnownSamples", String(record.rssi.knownSamples)),
                ("rssiUnknownSamples", String(record.rssi.unknownSamples)),
                ("txPower", JSONWriter.integer(record.txPower)),
                ("companyId", record.companyID.map { JSONWriter.quoted(Self.hex4($0)) } ?? "null"),
                ("kind", JSONWriter.quoted(record.kind.jsonName)),
            ]
            if case .ringMember(let member) = record.kind { fields.append(("member", JSONWriter.quoted(member.shortForm))) }
            if let name = record.name { fields.append(("name", JSONWriter.quoted(name))) }
            fields += [
                ("reports", String(record.reports)),
                ("firstSeenMs", String(record.firstSeenMilliseconds)),
                ("lastSeenMs", String(record.lastSeenMilliseconds)),
                ("ageMs", String(max(0, nowMilliseconds - record.lastSeenMilliseconds))),
            ]
            out += JSONWriter.object(fields.map { (name: $0.0, json: $0.1) }) + "\n"
        }
        return out
    }

    static func dBm(_ value: Int?) -> String { value.map(String.init) ?? "?" }

    static func hex4(_ value: UInt16) -> String {
        let hex = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 4 - hex.count) + hex
    }

    static func oneDecimal(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        let sign = tenths < 0 ? "-" : ""
        return sign + String(abs(tenths) / 10) + "." + String(abs(tenths) % 10)
    }

    static func age(milliseconds: Int64) -> String {
        let seconds = max(0, milliseconds) / 1000
        if seconds < 60 { return "\(seconds)s" }
        if seconds < 3600 { return "\(seconds / 60)m" }
        return "\(seconds / 3600)h"
    }
}

extension AdvertiserKind {
    /// A stable machine-readable name (JSON).
    public var jsonName: String {
        switch self {
        case .ringMember: "ringMember"
        case .foreignBaton: "foreignBaton"
        case .batonPairing: "batonPairing"
        case .appleContinuity: "appleContinuity"
        case .microsoftCDP: "microsoftCDP"
        case .googleFastPair: "googleFastPair"
        case .other: "other"
        }
    }
}
