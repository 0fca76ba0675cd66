// SPDX-License-Identifier: LGPL-2.1-or-later
/// The activity versions a handler accepts (issue 13): inclusive ranges of `ActivityRecord.version`.
/// From the RegisterHandler option `Versions` (a(xx)) or the .desktop key
/// `X-Baton-ActivityVersions=1;3-5;`. No declaration accepts every version.
public struct ActivityVersions: Hashable, Sendable {
    public static let maxRanges = 32

    public let ranges: [ClosedRange<Int64>]

    public enum Refusal: Error, Hashable, Sendable {
        case empty
        case tooManyRanges
        case reversedRange
        case malformed
    }

    public init(ranges: [ClosedRange<Int64>]) throws(Refusal) {
        guard !ranges.isEmpty else { throw .empty }
        guard ranges.count <= Self.maxRanges else { throw .tooManyRanges }
        self.ranges = ranges
    }

    /// D-Bus a(xx): (first, last) pairs, first ≤ last.
    public init(pairs: [(Int64, Int64)]) throws(Refusal) {
        var ranges: [ClosedRange<Int64>] = []
        for (first, last) in pairs {
            guard first <= last else { throw .reversedRange }
            ranges.append(first...last)
        }
        try self.init(ranges: ranges)
    }

    /// A .desktop value: `;`-separated versions or `first-last` ranges (non-negative decimal).
    public init(desktopValue: String) throws(Refusal) {
        var ranges: [ClosedRange<Int64>] = []
        for item in desktopValue.split(separator: ";", omittingEmptySubsequences: true) {
            let text = item.trimmingSpaces
            let bounds = text.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 1 || bounds.count == 2,
                  let first = Self.number(bounds[0]), let last = bounds.count == 2 ? Self.number(bounds[1]) : first else { throw .malformed }
            guard first <= last else { throw .reversedRange }
            ranges.append(first...last)
        }
        try self.init(ranges: ranges)
    }

    public func accepts(_ version: Int64) -> Bool { ranges.contains { $0.contains(version) } }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0 >= "0" && $0 <= "9" }) else { return nil }
        return Int64(text)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
