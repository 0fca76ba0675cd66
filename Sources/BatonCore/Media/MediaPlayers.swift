// SPDX-License-Identifier: LGPL-2.1-or-later
/// One MPRIS player's state as read from its properties (docs/media.md), sampled at `sampledAt`
/// (the local wall clock, seconds since 1970).
public struct MediaPlayerState: Equatable, Sendable {
    public enum Status: String, Sendable { case playing = "Playing", paused = "Paused", stopped = "Stopped" }

    public var url: String?
    public var trackID: String?
    public var title: String?
    /// Seconds.
    public var length: Double?
    public var status: Status
    public var rate: Double
    /// Seconds at `sampledAt`.
    public var position: Double
    public var sampledAt: Double
    /// MPRIS DesktopEntry (e.g. "mpv").
    public var desktopEntry: String?

    public init(url: String? = nil, trackID: String? = nil, title: String? = nil, length: Double? = nil, status: Status = .stopped,
                rate: Double = 1, position: Double = 0, sampledAt: Double = 0, desktopEntry: String? = nil) {
        self.url = url
        self.trackID = trackID
        self.title = title
        self.length = length
        self.status = status
        self.rate = rate
        self.position = position
        self.sampledAt = sampledAt
        self.desktopEntry = desktopEntry
    }

    /// What this player publishes: nil when stopped, without a URL, or with a URL that cannot
    /// travel (a share, credentials in it). A local file (`file:`) makes the local-file variant:
    /// its name travels, its bytes go as the document (the publisher checks the file itself).
    /// Numbers a player got wrong (NaN, a negative position, an absurd rate) are mended, never passed on.
    public var activity: MediaActivity? {
        guard status != .stopped, let url else { return nil }
        var file: MediaActivity.LocalFile?
        if !MediaURLPolicy.travels(url) {
            guard let path = MediaURLPolicy.localFilePath(url), !path.hasSuffix("/"), let name = path.split(separator: "/").last.map(String.init),
                  MediaActivity.LocalFile.isFileName(name) else { return nil }
            file = MediaActivity.LocalFile(name: name)
        }
        let rate = rate.isFinite ? min(max(rate, 0), MediaActivity.maximumRate) : 1
        let length = length.flatMap { $0.isFinite && $0 > 0 && $0 <= 1e9 ? $0 : nil }
        var position = position.isFinite ? min(max(position, 0), 1e9) : 0
        if let length { position = min(position, length) }
        let player = desktopEntry.flatMap { MediaPlayerName.isDesktopEntry($0) ? $0 : nil }
        return MediaActivity(url: url, title: file.map { Self.title(title, file: $0) } ?? Self.title(title, url: url), position: position, positionTime: sampledAt, rate: rate,
                             playing: status == .playing, length: length, player: player, file: file)
    }

    /// The player's title, else the URL's last path component, else the URL; cut to the limit.
    static func title(_ title: String?, file: MediaActivity.LocalFile) -> String {
        String((title.flatMap { $0.isEmpty ? nil : $0 } ?? file.name).prefix(MediaActivity.maximumTitleLength))
    }

    static func title(_ title: String?, url: String) -> String {
        if let title, !title.isEmpty { return String(title.prefix(MediaActivity.maximumTitleLength)) }
        let path = url.split(separator: "#").first.map { $0.split(separator: "?").first ?? $0 } ?? Substring(url)
        let last = path.split(separator: "/").last.map(String.init) ?? url
        let name = last.contains(":") ? url : last
        return String(name.prefix(MediaActivity.maximumTitleLength))
    }
}

/// When the published media activity changes (docs/media.md): never for the position moving as
/// the rate says (anyone extrapolates it), only for another track or title, play/pause, a rate
/// change, or a jump (a seek: MPRIS Seeked, or a position read that disagrees with the sample);
/// a length arriving later rides along with the next of those.
public enum MediaPublishing {
    /// A position this far from the extrapolated one is a seek, not clock noise (players report
    /// Position with up to a few hundred milliseconds of lag).
    public static let seekTolerance = 1.5

    public enum Change: Equatable, Sendable {
        case none
        /// Publish `next` (create, or update the published activity).
        case update
        /// Withdraw what was published.
        case invalidate
    }

    public static func change(from published: MediaActivity?, to next: MediaActivity?) -> Change {
        guard let next else { return published == nil ? .none : .invalidate }
        guard let published else { return .update }
        // Not the length alone: players send it a moment after the URL (mpv: Metadata twice on
        // load), and it only bounds the extrapolation; the next publication carries it.
        if published.url != next.url || published.file != next.file || published.title != next.title || published.playing != next.playing || published.rate != next.rate
            || published.player != next.player {
            return .update
        }
        let expected = published.position(at: next.positionTime)
        return abs(expected - next.position) > seekTolerance ? .update : .none
    }
}

/// The players on the session bus and which one is published: the one that started playing last
/// among those playing something that may travel; when none plays, the one chosen before while
/// it is paused (you paused it to walk to the other machine); else none.
public struct MediaPlayerBook: Sendable {
    public private(set) var players: [String: MediaPlayerState] = [:]
    /// Bus names in the order they last started playing (the latest last).
    private var playingOrder: [String] = []
    public private(set) var chosen: String?

    public init() {}

    /// A player's new state; returns the newly chosen player (maybe the same).
    @discardableResult
    public mutating func update(_ name: String, _ state: MediaPlayerState) -> String? {
        let wasPlaying = players[name]?.status == .playing
        players[name] = state
        if state.status == .playing, !wasPlaying || !playingOrder.contains(name) {
            playingOrder.removeAll { $0 == name }
            playingOrder.append(name)
        }
        return choose()
    }

    @discardableResult
    public mutating func remove(_ name: String) -> String? {
        players[name] = nil
        playingOrder.removeAll { $0 == name }
        return choose()
    }

    /// The chosen player's activity, if any.
    public var activity: MediaActivity? { chosen.flatMap { players[$0]?.activity } }

    private mutating func choose() -> String? {
        if let latest = playingOrder.last(where: { players[$0]?.status == .playing && players[$0]?.activity != nil }) {
            chosen = latest
        } else if let previous = chosen, let state = players[previous], state.status == .paused, state.activity != nil {
            chosen = previous
        } else {
            chosen = nil
        }
        return chosen
    }
}

/// Where the receiving machine opens a media activity, in the order to try (docs/media.md).
public enum MediaOpening: Equatable, Sendable {
    /// OpenUri on this running MPRIS player, then SetPosition.
    case running(busName: String)
    /// Start this installed desktop entry (with ".desktop") on the URL, then seek it over MPRIS.
    case launch(desktopID: String)
    /// The session's default handler for the URL's scheme (for http and https, the browser),
    /// given the URL with a `#t=` start time.
    case desktopDefault

    /// A running player on the receiving machine.
    public struct Player: Equatable, Sendable {
        public var busName: String
        public var desktopEntry: String?
        public var uriSchemes: [String]

        public init(busName: String, desktopEntry: String?, uriSchemes: [String]) {
            self.busName = busName
            self.desktopEntry = desktopEntry
            self.uriSchemes = uriSchemes
        }

        /// Its SupportedUriSchemes has `scheme`; every player plays `file:` (MPRIS: "almost every
        /// media player will include support for the file scheme"), though mpv-mpris 0.7.1 leaves it
        /// out of the list.
        func plays(_ scheme: String) -> Bool { scheme == "file" || uriSchemes.contains { $0.lowercased() == scheme } }
    }

    /// The same player (running, else installed), else another running player whose
    /// SupportedUriSchemes has the URL's scheme (never a browser: they refuse or ignore OpenUri),
    /// else the desktop's default for the scheme when there is one. Empty: nothing here plays it.
    /// `sourcePlayerInstalled`: the source's player is installed here as a media player
    /// (`MediaPlayerName.isMediaPlayer(categories:)`); a browser's name is never launched.
    public static func candidates(for activity: MediaActivity, running: [Player], sourcePlayerInstalled: Bool,
                                  hasDefaultHandler: Bool) -> [MediaOpening] {
        guard let scheme = MediaURLPolicy.scheme(of: activity.url) else { return [] }
        let usable = running.filter { $0.plays(scheme) && !MediaPlayerName.isBrowser(busName: $0.busName, desktopEntry: $0.desktopEntry) }
            .sorted { $0.busName < $1.busName }
        var result: [MediaOpening] = []
        if let player = activity.player {
            result += usable.filter { $0.desktopEntry == player }.map { .running(busName: $0.busName) }
            if sourcePlayerInstalled, !MediaPlayerName.isBrowser(busName: player, desktopEntry: player) {
                result.append(.launch(desktopID: player + ".desktop"))
            }
        }
        result += usable.filter { $0.desktopEntry != activity.player || activity.player == nil }.map { .running(busName: $0.busName) }
        if hasDefaultHandler { result.append(.desktopDefault) }
        return result
    }
}
