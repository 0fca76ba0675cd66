// SPDX-License-Identifier: LGPL-2.1-or-later
/// One kept notice: its text, how often it came, and when it came last.
public struct CountedNotice: Sendable, Hashable {
    public var text: String
    public var count: UInt32
    /// The latest occurrence, on the caller's clock (e.g. Unix seconds).
    public var time: Int64

    public init(text: String, count: UInt32, time: Int64) {
        self.text = text
        self.count = count
        self.time = time
    }

    /// `text`, or `text (×N)` once it came more than once.
    public var line: String { count > 1 ? "\(text) (×\(count))" : text }
}

/// The last `capacity` distinct notices, oldest first. A text already kept is counted, not
/// repeated: its count and time are bumped and it moves to the newest place. So a line the radio
/// repeats on every publish cannot push "radio ready" or "pairing advert on the air" out.
public struct NoticeBook: Sendable, Hashable {
    public static let capacity = 32
    public private(set) var notices: [CountedNotice] = []

    public init() {}

    public mutating func note(_ text: String, at time: Int64) {
        if let index = notices.lastIndex(where: { $0.text == text }) {
            var notice = notices.remove(at: index)
            notice.count = notice.count == UInt32.max ? UInt32.max : notice.count + 1
            notice.time = time
            notices.append(notice)
            return
        }
        notices.append(CountedNotice(text: text, count: 1, time: time))
        if notices.count > Self.capacity { notices.removeFirst(notices.count - Self.capacity) }
    }

    /// What `Ring1.GetRadioNotices` returns: one line per distinct notice, oldest first.
    public var lines: [String] { notices.map(\.line) }
}
