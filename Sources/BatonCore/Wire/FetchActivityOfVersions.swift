// SPDX-License-Identifier: LGPL-2.1-or-later
/// FetchActivityOfVersions (0x0C, §6.2, §9): FetchActivity plus the activity versions the
/// receiver's handlers accept. The advert has no room for the version (24 bytes), so the receiver
/// names what it accepts and the source, whose current activity's version is in none of the ranges,
/// refuses with `Error(versionUnsupported)` before it asks its app to save or sends anything.
public struct FetchActivityOfVersions: Hashable, Sendable {
    public static let maxRanges = 16
    /// Type hash and revision (8), range count (1), then (lowest, highest) u64 pairs.
    public static let maxByteCount = 8 + 1 + maxRanges * 16

    public var activity: ActivityReference
    public let versions: [ClosedRange<UInt64>]

    /// 1 to 16 inclusive ranges (a `ClosedRange` has lowest ≤ highest by construction).
    public init(activity: ActivityReference, versions: [ClosedRange<UInt64>]) throws(WireError) {
        guard (1...Self.maxRanges).contains(versions.count) else { throw .malformed("range count") }
        self.activity = activity
        self.versions = versions
    }

    /// Whether an activity of `version` (an activity value's `version`, §6.4) is asked for.
    public func accepts(_ version: Int64) -> Bool {
        version >= 0 && versions.contains { $0.contains(UInt64(version)) }
    }

    public var payload: [UInt8] {
        var out = activity.payload
        out.append(UInt8(versions.count))
        for range in versions {
            out.appendBigEndian(range.lowerBound)
            out.appendBigEndian(range.upperBound)
        }
        return out
    }

    public init(payload: [UInt8]) throws(WireError) {
        var reader = ByteReader(payload)
        let activity = try ActivityReference(reading: &reader)
        let count = Int(try reader.readByte())
        // The count is checked before any range is read (§6.2).
        guard (1...Self.maxRanges).contains(count) else { throw .malformed("range count") }
        var versions: [ClosedRange<UInt64>] = []
        for _ in 0..<count {
            let lowest = try reader.readUInt64()
            let highest = try reader.readUInt64()
            guard lowest <= highest else { throw .malformed("range") }
            versions.append(lowest...highest)
        }
        try reader.expectEnd()
        try self.init(activity: activity, versions: versions)
    }

    /// The ranges a receiver sends for its handlers' declarations: their union, without negative
    /// versions (an activity's version is ≥ 0, §6.4), sorted and merged. More than 16 ranges are
    /// widened by closing the narrowest gaps first: the source then lets a few unaccepted versions
    /// through, and the receiver's own check on the payload refuses them (§9 step 3). Empty when
    /// no version ≥ 0 is accepted at all (nothing needs to be fetched to refuse it).
    public static func ranges(covering declarations: [ActivityVersions]) -> [ClosedRange<UInt64>] {
        let wanted = declarations.flatMap(\.ranges).compactMap { range -> ClosedRange<UInt64>? in
            guard range.upperBound >= 0 else { return nil }
            return UInt64(max(0, range.lowerBound))...UInt64(range.upperBound)
        }.sorted { $0.lowerBound < $1.lowerBound }
        var merged: [ClosedRange<UInt64>] = []
        for range in wanted {
            // Overlapping or adjacent (no version between them): one range.
            if let last = merged.last, range.lowerBound <= last.upperBound || range.lowerBound - last.upperBound == 1 {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        while merged.count > maxRanges {
            var narrowest = 0
            for index in 1..<merged.count - 1 where gap(merged, after: index) < gap(merged, after: narrowest) { narrowest = index }
            merged[narrowest] = merged[narrowest].lowerBound...merged[narrowest + 1].upperBound
            merged.remove(at: narrowest + 1)
        }
        return merged
    }

    private static func gap(_ ranges: [ClosedRange<UInt64>], after index: Int) -> UInt64 {
        ranges[index + 1].lowerBound - ranges[index].upperBound
    }
}
