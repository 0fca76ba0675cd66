// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore

/// `Ring1.DumpRadio`: the advertiser table for people (a fixed-width table) and for scripts (JSON
/// Lines in the documented key style, docs/dbus-api.md "Machine-readable outputs"). Rendering is
/// the service's business; the core table only keeps the values.
public enum AdvertiserTableRendering {
    /// A fixed-width table, strongest first.
    public static func text(_ table: AdvertiserTable, nowMilliseconds: Int64) -> String {
        let header = ["ADDRESS", "TYPE", "RSSI", "MIN", "MAX", "AVG", "TX", "COMPANY", "KIND", "SEEN", "REPORTS"]
        var rows = [header]
        for record in table.sortedRecords {
            rows.append([
                record.address.description,
                typeName(record.addressType),
                dBm(record.rssi.last),
                dBm(record.rssi.minimum),
                dBm(record.rssi.maximum),
                record.rssi.smoothed.map(oneDecimal) ?? "?",
                record.txPower.map(String.init) ?? "-",
                record.companyID.map(hex4) ?? "-",
                label(record.kind),
                age(milliseconds: nowMilliseconds - record.lastSeenMilliseconds),
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
    /// appears as a value (it is counted in `RSSIUnknownSamples`). No advert bytes, no keys.
    public static func jsonLines(_ table: AdvertiserTable, nowMilliseconds: Int64) -> String {
        var out = ""
        for record in table.sortedRecords {
            var fields: [(name: String, json: String)] = [
                ("Address", JSONWriter.quoted(record.address.description)),
                ("AddressType", JSONWriter.quoted(typeName(record.addressType))),
                ("RSSI", JSONWriter.integer(record.rssi.last)),
                ("RSSIMin", JSONWriter.integer(record.rssi.minimum)),
                ("RSSIMax", JSONWriter.integer(record.rssi.maximum)),
                ("RSSISmoothed", record.rssi.smoothed.map(oneDecimal) ?? "null"),
                ("RSSIKnownSamples", String(record.rssi.knownSamples)),
                ("RSSIUnknownSamples", String(record.rssi.unknownSamples)),
                ("TxPower", JSONWriter.integer(record.txPower)),
                ("CompanyId", record.companyID.map { JSONWriter.quoted(hex4($0)) } ?? "null"),
                ("Kind", JSONWriter.quoted(jsonName(record.kind))),
            ]
            if case .ringMember(let member) = record.kind { fields.append(("Member", JSONWriter.quoted(member.shortForm))) }
            if let name = record.name { fields.append(("Name", JSONWriter.quoted(name))) }
            fields += [
                ("Reports", String(record.reports)),
                ("FirstSeenMs", String(record.firstSeenMilliseconds)),
                ("LastSeenMs", String(record.lastSeenMilliseconds)),
                ("AgeMs", String(max(0, nowMilliseconds - record.lastSeenMilliseconds))),
            ]
            out += JSONWriter.object(fields) + "\n"
        }
        return out
    }

    /// How people read a kind (the text table's KIND column).
    public static func label(_ kind: AdvertiserKind) -> String {
        switch kind {
        case .ringMember(let id): "baton ring member \(id.shortForm)"
        case .foreignBaton: "baton (other ring)"
        case .batonPairing(let name): "baton pairing (\(name))"
        case .appleContinuity: "Apple Continuity"
        case .microsoftCDP: "Microsoft CDP"
        case .googleFastPair: "Google Fast Pair"
        case .other(let company?): "company " + hex4(company)
        case .other(nil): "unknown"
        }
    }

    /// The kind's stable machine-readable name (docs/protocol.md §4.5).
    public static func jsonName(_ kind: AdvertiserKind) -> String {
        switch kind {
        case .ringMember: "ringMember"
        case .foreignBaton: "foreignBaton"
        case .batonPairing: "batonPairing"
        case .appleContinuity: "appleContinuity"
        case .microsoftCDP: "microsoftCDP"
        case .googleFastPair: "googleFastPair"
        case .other: "other"
        }
    }

    /// BlueZ's spelling of the address type; "unknown" while the stack has not said.
    static func typeName(_ type: LEAddressType?) -> String { type?.name ?? "unknown" }

    static func dBm(_ value: Int?) -> String { value.map(String.init) ?? "?" }

    /// "0x004c": four lower-case hex digits.
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
