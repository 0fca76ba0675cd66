// SPDX-License-Identifier: LGPL-2.1-or-later
/// The media a web page plays, handed off with the page (docs/media.md, "Browser media"): the
/// browser extension reports the playing, or most recently played, `<video>`/`<audio>` element of
/// the tab, and the browser publisher adds it to the page's userInfo (`org.baton.web-browsing`).
///
/// Like `MediaActivity`, the position is a sample (`position` seconds at `positionTime`, the
/// source's wall clock), extrapolated at `rate` while `playing`; the extrapolation and the
/// receiver's bound on clock skew are `MediaActivity`'s own (`sample(url:)`).
public struct PageMedia: Equatable, Sendable {
    /// The userInfo keys, beside the page's `scrollX`/`scrollY`.
    public enum Key {
        public static let position = "mediaPosition"
        public static let positionTime = "mediaPositionTime"
        public static let rate = "mediaRate"
        public static let playing = "mediaPlaying"
        public static let length = "mediaLength"
        public static let all = [position, positionTime, rate, playing, length]
    }

    /// Bounds of every number, as for a media activity: seconds of media up to 10⁹ (31 years), a
    /// wall clock up to 10¹¹ s after 1970, a rate up to `MediaActivity.maximumRate`.
    public static let positions: ClosedRange<Double> = 0...1e9
    public static let clock: ClosedRange<Double> = 0...1e11
    public static let rates: ClosedRange<Double> = 0...MediaActivity.maximumRate

    /// Seconds from the start of the media at `positionTime`.
    public var position: Double
    /// The source's wall clock when `position` was read, seconds since 1970.
    public var positionTime: Double
    public var rate: Double
    /// The element was playing (not paused, not ended).
    public var playing: Bool
    /// The element's duration in seconds, when finite (a live stream has none).
    public var length: Double?

    public init(position: Double, positionTime: Double, rate: Double, playing: Bool, length: Double? = nil) {
        self.position = position
        self.positionTime = positionTime
        self.rate = rate
        self.playing = playing
        self.length = length
    }

    /// Checks what the extension reported (an element's `currentTime`, `playbackRate`, `paused`,
    /// `duration`), sampled at `sampledAt`: nil when a number is not finite or out of bounds, so the
    /// page is published without media rather than with a broken position. A duration that is not
    /// finite (a live stream) or out of bounds is left out; the position is cut to it.
    public static func checked(position: Double, rate: Double, playing: Bool, duration: Double?, sampledAt: Double) -> PageMedia? {
        guard position.isFinite, positions.contains(position), rate.isFinite, rates.contains(rate),
              sampledAt.isFinite, clock.contains(sampledAt) else { return nil }
        let length = duration.flatMap { $0.isFinite && positions.contains($0) ? $0 : nil }
        return PageMedia(position: length.map { min(position, $0) } ?? position, positionTime: sampledAt, rate: rate,
                         playing: playing, length: length)
    }

    /// The same sample as a media activity for `url`: its extrapolation and seek target are used.
    public func sample(url: String) -> MediaActivity {
        MediaActivity(url: url, title: "", position: position, positionTime: positionTime, rate: rate, playing: playing, length: length)
    }

    /// The position at `time` on the source's clock (never before 0 nor past the length).
    public func position(at time: Double) -> Double { sample(url: "").position(at: time) }

    /// The sample moved to `time` (the source's clock): what the source publishes when the page is
    /// about to leave (WillSave), so the other machine gets the position at the pull.
    public func resampled(at time: Double) -> PageMedia {
        guard time.isFinite, Self.clock.contains(time) else { return self }
        var moved = self
        moved.position = position(at: time)
        moved.positionTime = time
        return moved
    }

    /// The receiver's target: the position at the pull plus the handoff's time, bounded as
    /// `MediaActivity.seekTarget` bounds it (by this machine's own measure of the handoff).
    public func seekTarget(now: Double, askedAt: Double) -> Double { sample(url: "").seekTarget(now: now, askedAt: askedAt) }

    // MARK: userInfo

    public var userInfo: [String: PropertyValue] {
        var info: [String: PropertyValue] = [
            Key.position: .double(position), Key.positionTime: .double(positionTime), Key.rate: .double(rate), Key.playing: .boolean(playing),
        ]
        if let length { info[Key.length] = .double(length) }
        return info
    }

    /// Reads another machine's page userInfo: nil when it carries no media (no `mediaPosition`: a
    /// page without a media element, or a source without this feature); every value checked
    /// (types, finite numbers, bounds) when it does, and `DecodingError` when one is wrong.
    public init?(userInfo info: [String: PropertyValue]) throws(MediaActivity.DecodingError) {
        guard info[Key.position] != nil else { return nil }
        let position = try Self.number(info, Key.position, within: Self.positions)
        let positionTime = try Self.number(info, Key.positionTime, within: Self.clock)
        let rate = try Self.number(info, Key.rate, within: Self.rates)
        guard let flag = info[Key.playing] else { throw .missing(Key.playing) }
        guard case .boolean(let playing) = flag else { throw .invalid(Key.playing) }
        var length: Double?
        if info[Key.length] != nil { length = try Self.number(info, Key.length, within: Self.positions) }
        self.init(position: position, positionTime: positionTime, rate: rate, playing: playing, length: length)
    }

    private static func number(_ info: [String: PropertyValue], _ key: String, within range: ClosedRange<Double>) throws(MediaActivity.DecodingError) -> Double {
        let value: Double
        switch info[key] {
        case .double(let number)?: value = number
        case .integer(let number)?: value = Double(number)
        case nil: throw .missing(key)
        default: throw .invalid(key)
        }
        guard value.isFinite, range.contains(value) else { throw .invalid(key) }
        return value
    }
}
