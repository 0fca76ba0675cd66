// SPDX-License-Identifier: LGPL-2.1-or-later
/// The media activity (docs/media.md): what a media player plays, where it is and whether it plays,
/// published by the session agent from MPRIS and continued by the other machine's agent.
///
/// The position is a sample, not a clock: `position` seconds at `positionTime` (the source's wall
/// clock, seconds since 1970), moving at `rate` while `playing`. Anyone extrapolates it; nobody
/// republishes it every second.
public struct MediaActivity: Equatable, Sendable {
    public static let activityType = "org.baton.media"
    /// The format's version (the CreateActivity option Version).
    public static let version: Int64 = 1
    /// Longest URL and title accepted (a URL longer than this is not one a person plays).
    public static let maximumURLLength = 4096
    public static let maximumTitleLength = 256
    /// The fastest rate believed (MPRIS players allow up to a few times; more is a broken value).
    public static let maximumRate = 16.0

    /// What the player plays. A stream: its URL, which travels. A local file (`file` set): on the
    /// source, the player's `file:` URL, which never leaves the machine (it is in no userInfo);
    /// decoded on the receiver, empty until the receiver saved the copy and set it to that.
    public var url: String
    /// Set when the media is a local file, which travels as the activity's document (docs/media.md).
    public var file: LocalFile?
    public var title: String
    /// Seconds from the start of the track at `positionTime`.
    public var position: Double
    /// The source's wall clock when `position` was read, seconds since 1970.
    public var positionTime: Double
    public var rate: Double
    public var playing: Bool
    /// The track's length in seconds, when the player said.
    public var length: Double?
    /// The source player's desktop entry id without ".desktop" (MPRIS DesktopEntry), e.g. "mpv".
    public var player: String?

    public init(url: String, title: String, position: Double, positionTime: Double, rate: Double, playing: Bool,
                length: Double? = nil, player: String? = nil, file: LocalFile? = nil) {
        self.url = url
        self.file = file
        self.title = title
        self.position = position
        self.positionTime = positionTime
        self.rate = rate
        self.playing = playing
        self.length = length
        self.player = player
    }

    /// The position at `time` on the same clock as `positionTime`: it moves at `rate` while
    /// playing, never before 0 nor past the length; a time before the sample gives the sample.
    public func position(at time: Double) -> Double {
        guard playing, time > positionTime else { return position }
        return clamped(position + (time - positionTime) * rate)
    }

    func clamped(_ seconds: Double) -> Double {
        var value = max(0, seconds)
        if let length { value = min(value, length) }
        return value
    }

    /// The receiver's seek target: the source's position at the pull plus the time the handoff took.
    /// `now` is the receiver's wall clock and `askedAt` its wall clock when its handler was first
    /// asked (WillContinue comes before the fetch, so the source's save happened after it). The
    /// elapsed time since the sample is `now - positionTime`, but two machines' clocks differ:
    /// it is bounded by what this machine measured itself (`now - askedAt`, never less than the
    /// truth) and by 0, so a skewed clock costs at most the handoff's own duration.
    public func seekTarget(now: Double, askedAt: Double) -> Double {
        guard playing else { return position }
        let measured = max(0, now - askedAt)
        let elapsed = min(max(0, now - positionTime), measured)
        return clamped(position + elapsed * rate)
    }

    /// The URL with a media-fragment start time (`#t=SECONDS`) for a browser, which plays a bare
    /// media URL from there (W3C Media Fragments); a URL that has a fragment already is left alone.
    public func browserURL(at seconds: Double) -> String {
        guard !url.contains("#") else { return url }
        let whole = Int(max(0, seconds).rounded(.down))
        return whole == 0 ? url : url + "#t=\(whole)"
    }

    // MARK: userInfo

    public enum DecodingError: Error, Equatable, Sendable {
        case missing(String)
        case invalid(String)
    }

    /// A local file's media activity carries `fileName` instead of `url`: its path stays here.
    public var userInfo: [String: PropertyValue] {
        var info: [String: PropertyValue] = [
            "position": .double(position), "positionTime": .double(positionTime), "rate": .double(rate), "playing": .boolean(playing),
        ]
        if let file { info["fileName"] = .string(file.name) } else { info["url"] = .string(url) }
        if let length { info["length"] = .double(length) }
        if let player { info["player"] = .string(player) }
        return info
    }

    /// Reads another machine's userInfo: every value checked (types, finite numbers, bounds, a URL
    /// that may travel) before it is used; unknown keys are ignored (a newer format's additions).
    /// Either `url` (a stream) or `fileName` (a local file, whose bytes come as the document),
    /// never both; a local file's `url` is empty until the receiver saved the copy.
    public init(title: String, userInfo info: [String: PropertyValue]) throws(DecodingError) {
        let url: String
        var file: LocalFile?
        switch (info["url"], info["fileName"]) {
        case (nil, nil): throw .missing("url")
        case (_?, _?): throw .invalid("fileName")
        case (let link?, nil):
            guard case .string(let value) = link, MediaURLPolicy.travels(value) else { throw .invalid("url") }
            url = value
        case (nil, let named?):
            guard case .string(let name) = named, LocalFile.isFileName(name) else { throw .invalid("fileName") }
            url = ""
            file = LocalFile(name: name)
        }
        let position = try Self.number(info, "position", within: 0...1e9)
        let positionTime = try Self.number(info, "positionTime", within: 0...1e11)
        let rate = try Self.number(info, "rate", within: 0...Self.maximumRate)
        guard let flag = info["playing"] else { throw .missing("playing") }
        guard case .boolean(let playing) = flag else { throw .invalid("playing") }
        var length: Double?
        if info["length"] != nil { length = try Self.number(info, "length", within: 0...1e9) }
        var player: String?
        if let value = info["player"] {
            guard case .string(let name) = value, MediaPlayerName.isDesktopEntry(name) else { throw .invalid("player") }
            player = name
        }
        self.init(url: url, title: String(title.prefix(Self.maximumTitleLength)), position: position, positionTime: positionTime,
                  rate: rate, playing: playing, length: length, player: player, file: file)
    }

    /// A local file the source plays (docs/media.md, "What travels"): its bytes go as the
    /// activity's document, its name in userInfo (`fileName`), never its path.
    public struct LocalFile: Equatable, Sendable {
        public var name: String

        public init(name: String) {
            self.name = name
        }

        /// A file name that may travel and be read back: 1–255 bytes of UTF-8, one path component
        /// (no `/`), not hidden (no leading `.`, so never `.` or `..`), no control character
        /// (C0, DEL, C1), no line or paragraph separator (U+2028, U+2029) and no bidirectional
        /// mark, override or isolate (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069): a
        /// name shown in a log or a player must read as what it is.
        public static func isFileName(_ name: String) -> Bool {
            guard (1...255).contains(name.utf8.count), name.first != "." else { return false }
            return name.unicodeScalars.allSatisfy { scalar in
                let value = scalar.value
                return value >= 0x20 && value != 0x2F && !(0x7F...0x9F).contains(value) && !(0x202A...0x202E).contains(value)
                    && !(0x2066...0x2069).contains(value) && ![0x061C, 0x200E, 0x200F, 0x2028, 0x2029].contains(value)
            }
        }

        /// Media types a received local file may have to be opened by the desktop's default for its
        /// type: audio and video (`audio/...`, `video/...`, and `application/ogg`, how the shared
        /// MIME database names Ogg files); a type and subtype of token characters, at most 255 bytes.
        public static func isMediaType(_ type: String) -> Bool {
            guard type.utf8.count <= 255 else { return false }
            let parts = type.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[1].isEmpty,
                  parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "!#$&-^_.+".contains($0)) }) else { return false }
            let main = parts[0].lowercased()
            return main == "audio" || main == "video" || type.lowercased() == "application/ogg"
        }
    }

    private static func number(_ info: [String: PropertyValue], _ key: String, within range: ClosedRange<Double>) throws(DecodingError) -> Double {
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

/// Which URLs may leave the machine as media (docs/media.md).
public enum MediaURLPolicy {
    /// Network streams another machine can open itself. Not file: (a local file names nothing on the
    /// other machine), nor smb:/sftp: (shares need this machine's credentials), nor anything else.
    public static let schemes: Set<String> = ["http", "https", "rtsp", "rtsps", "rtmp", "rtmps", "mms", "mmsh"]

    /// A URL of those schemes with a host, no user name or password in it (they stay here), at
    /// most `MediaActivity.maximumURLLength` bytes, with no space or control character.
    public static func travels(_ url: String) -> Bool {
        guard url.utf8.count <= MediaActivity.maximumURLLength, let scheme = scheme(of: url), schemes.contains(scheme),
              url.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else { return false }
        let rest = url.dropFirst(scheme.count + 3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return !authority.isEmpty && !authority.contains("@")
    }

    /// The path of a local `file:` URL (`file:///path`, `file://localhost/path`), percent-decoded;
    /// nil for anything else: another host, no absolute path, a NUL or a malformed escape, over
    /// `MediaActivity.maximumURLLength` bytes, or a path that is no valid UTF-8.
    public static func localFilePath(_ url: String) -> String? {
        guard url.utf8.count <= MediaActivity.maximumURLLength, scheme(of: url) == "file",
              let path = ClipboardFileURIs.localPath(ofFileURI: Array(url.utf8)) else { return nil }
        // The file URI parser of the clipboard's copies of files (one owner of RFC 8089 here).
        return String(validating: path, as: UTF8.self)
    }

    /// The scheme in lower case when `url` starts with `scheme://`.
    public static func scheme(of url: String) -> String? {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return nil }
        let scheme = url[..<colon]
        guard let first = scheme.first, first.isASCII, first.isLetter,
              scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }) else { return nil }
        return scheme.lowercased()
    }
}

/// MPRIS bus names and desktop entries.
public enum MediaPlayerName {
    public static let prefix = "org.mpris.MediaPlayer2."

    /// Browsers publish their tabs' media over MPRIS too, but refuse (Firefox) or ignore
    /// (Chromium) OpenUri and report the page rather than the media: their media travels with the
    /// page (the browser publisher), never as a media activity.
    public static let browsers = ["firefox", "chromium", "chrome", "brave", "vivaldi", "opera", "edge", "epiphany",
                                  "plasma-browser-integration", "midori", "falkon", "qutebrowser"]

    public static func isPlayer(busName: String) -> Bool {
        busName.hasPrefix(prefix) && busName.count > prefix.count
    }

    /// Whether the bus name (org.mpris.MediaPlayer2.NAME[.instance]) or the desktop entry names a browser.
    public static func isBrowser(busName: String, desktopEntry: String?) -> Bool {
        let own = busName.hasPrefix(prefix) ? String(busName.dropFirst(prefix.count)).lowercased() : busName.lowercased()
        let first = own.split(separator: ".").first.map(String.init) ?? own
        let entry = desktopEntry?.lowercased() ?? ""
        return browsers.contains { first.contains($0) || entry.contains($0) }
    }

    /// Whether a desktop entry's Categories (`AudioVideo;Audio;Player;`) name a media player: one of
    /// the freedesktop main categories AudioVideo, Audio or Video, and the additional category
    /// Player ("an application to play audio/video"). The source's player name comes from another
    /// machine: only an entry that is a player here is started on its URL or a received file, never
    /// any other installed program (a terminal, an office suite, a browser) that a name could pick,
    /// nor another audio or video program (an editor, a recorder, a plugin host) whose project
    /// files may load code.
    public static func isMediaPlayer(categories: String?) -> Bool {
        guard let categories else { return false }
        let names = categories.split(separator: ";").map(String.init)
        return names.contains("Player") && names.contains { ["AudioVideo", "Audio", "Video"].contains($0) }
    }

    /// A desktop entry id as MPRIS gives it (no ".desktop"): 1–255 characters of letters, digits,
    /// `-`, `_` and `.`, not starting with a dot.
    public static func isDesktopEntry(_ name: String) -> Bool {
        guard (1...255).contains(name.utf8.count), name.first != "." else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
    }
}
