// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

/// Issue 13: the versions a handler declares (RegisterHandler `Versions` a(xx), .desktop
/// `X-Baton-ActivityVersions`).
@Suite struct ActivityVersionsTests {
    @Test func desktopValuesListVersionsAndRanges() throws {
        let versions = try ActivityVersions(desktopValue: "1; 3-5;9;")
        #expect(versions.ranges == [1...1, 3...5, 9...9])
        #expect([1, 3, 4, 5, 9].allSatisfy { versions.accepts($0) })
        #expect(![0, 2, 6, 8, 10, -1].contains { versions.accepts($0) })
    }

    @Test func malformedDeclarationsAreRefused() {
        #expect(throws: ActivityVersions.Refusal.empty) { try ActivityVersions(desktopValue: ";;") }
        #expect(throws: ActivityVersions.Refusal.reversedRange) { try ActivityVersions(desktopValue: "5-3") }
        for bad in ["x", "1-", "-1", "1-2-3", "1.5", "99999999999999999999"] {
            #expect(throws: ActivityVersions.Refusal.malformed, "\(bad)") { try ActivityVersions(desktopValue: bad) }
        }
        #expect(throws: ActivityVersions.Refusal.reversedRange) { try ActivityVersions(pairs: [(4, 2)]) }
        #expect(throws: ActivityVersions.Refusal.tooManyRanges) {
            try ActivityVersions(pairs: (0..<Int64(ActivityVersions.maxRanges + 1)).map { ($0, $0) })
        }
    }

    @Test func pairsAreInclusiveRanges() throws {
        let versions = try ActivityVersions(pairs: [(2, 3), (Int64.max, Int64.max)])
        #expect(versions.accepts(2) && versions.accepts(3) && versions.accepts(.max) && !versions.accepts(1))
    }
}
