// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
@testable import BatonCore

/// FetchActivityOfVersions (0x0C, §6.2): the frame's bytes, its rejections, and the ranges a
/// receiver sends for its handlers' declarations.
@Suite struct FetchActivityOfVersionsTests {
    let activity = ActivityReference(typeHash: TypeHash(value: 0xA802_0B9F), revision: 1)

    func frame(_ payload: [UInt8]) throws(WireError) -> FetchActivityOfVersions {
        let frame = try Frame.decode(try Frame(type: .fetchActivityOfVersions, requestID: 20, payload: payload).encoded())
        return try FetchActivityOfVersions(payload: frame.payload)
    }

    func be64(_ value: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian(value)
        return out
    }

    @Test func encodesTypeHashRevisionCountAndRangesAndDecodesBack() throws {
        let asked = try FetchActivityOfVersions(activity: activity, versions: [1...1, 3...5])
        #expect(asked.payload == [0xA8, 0x02, 0x0B, 0x9F, 0, 0, 0, 1, 2] + be64(1) + be64(1) + be64(3) + be64(5))
        #expect(try frame(asked.payload) == asked)
        let widest = try FetchActivityOfVersions(activity: ActivityReference(typeHash: activity.typeHash, revision: ActivityReference.anyRevision),
                                                 versions: Array(repeating: 0...UInt64.max, count: 16))
        #expect(widest.payload.count == FrameType.fetchActivityOfVersions.maxPayload)
        #expect(try frame(widest.payload) == widest)
    }

    @Test func acceptsExactlyTheVersionsInItsRanges() throws {
        let asked = try FetchActivityOfVersions(activity: activity, versions: [1...1, 3...5])
        #expect([1, 3, 4, 5].allSatisfy(asked.accepts))
        #expect(![0, 2, 6, 7, -1, Int64.min].contains(where: asked.accepts))
    }

    @Test func refusesBadCountsReversedRangesAndWrongLengths() throws {
        let head = activity.payload
        #expect(throws: WireError.malformed("range count")) { try frame(head + [0]) }
        #expect(throws: WireError.malformed("range count")) { try frame(head + [17]) }
        #expect(throws: WireError.malformed("range count")) { try FetchActivityOfVersions(activity: activity, versions: []) }
        #expect(throws: WireError.malformed("range count")) { try FetchActivityOfVersions(activity: activity, versions: Array(repeating: 1...2, count: 17)) }
        #expect(throws: WireError.malformed("range")) { try frame(head + [1] + be64(5) + be64(3)) }
        #expect(throws: WireError.truncated) { try frame(head + [1] + be64(1)) }
        #expect(throws: WireError.truncated) { try frame(head + [2] + be64(1) + be64(1)) }
        #expect(throws: WireError.trailingBytes) { try frame(head + [1] + be64(1) + be64(1) + [0]) }
        #expect(throws: WireError.malformed("revision")) { try frame([0xA8, 0x02, 0x0B, 0x9F, 1, 0, 0, 0, 1] + be64(1) + be64(1)) }
        // 17 ranges do not fit the type's limit: refused from the header, before the payload is read.
        #expect(throws: WireError.payloadTooLarge(limit: 265, actual: 9 + 17 * 16)) {
            try Frame.parseHeader([1, 0x0C, 0, 0, 0, 0, 0, 20, 0, 0, 1, 0x19][...])
        }
    }

    @Test func rangesForDeclarationsAreMergedSortedAndWithoutNegativeVersions() throws {
        let declared = [try ActivityVersions(pairs: [(7, 9), (1, 2), (-5, -1)]), try ActivityVersions(pairs: [(3, 3), (8, 12), (-2, 0)])]
        #expect(FetchActivityOfVersions.ranges(covering: declared) == [0...3, 7...12])
        #expect(FetchActivityOfVersions.ranges(covering: [try ActivityVersions(pairs: [(-9, -1)])]).isEmpty)
        #expect(FetchActivityOfVersions.ranges(covering: [try ActivityVersions(pairs: [(Int64.max, Int64.max), (0, 0)])])
                == [0...0, UInt64(Int64.max)...UInt64(Int64.max)])
    }

    @Test func moreThanSixteenRangesAreWidenedAtTheNarrowestGapsIntoASuperset() throws {
        // 32 single versions 0, 10, 20, ... with one narrow gap: 300 and 302.
        var singles = (0..<31).map { Int64($0) * 10 }.map { ($0, $0) }
        singles.append((302, 302))
        let declared = try ActivityVersions(pairs: singles)
        let ranges = FetchActivityOfVersions.ranges(covering: [declared])
        #expect(ranges.count == FetchActivityOfVersions.maxRanges)
        #expect(ranges.contains(300...302), "the narrowest gap closes first")
        for (version, _) in singles { #expect(ranges.contains { $0.contains(UInt64(version)) }, "version \(version) is still asked for") }
        #expect(ranges == ranges.sorted { $0.lowerBound < $1.lowerBound })
    }
}
