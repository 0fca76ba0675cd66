// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

/// Red team, the media activity as a hostile ring member sends it (docs/media.md, "The activity":
/// every value read with its type and bounds checked; "What travels"; "Continuing on the other
/// machine"). The userInfo below is what arrives in Continue; nothing of it may pick what runs here
/// beyond a media player on a network stream.
@Suite("BatonCoreTests: red team, a hostile media activity")
struct MediaAttackTests {
    static let good: [String: PropertyValue] = [
        "url": .string("https://radio.example/live.ogg"), "position": .double(30), "positionTime": .double(1_700_000_000),
        "rate": .double(1), "playing": .boolean(true), "length": .double(600), "player": .string("mpv"),
    ]

    func decode(_ changes: [String: PropertyValue?], title: String = "Song") throws(MediaActivity.DecodingError) -> MediaActivity {
        var info = Self.good
        for (key, value) in changes { info[key] = value }
        return try MediaActivity(title: title, userInfo: info)
    }

    /// Attack: URLs that would open something here other than a network stream, or that carry
    /// credentials: file:, javascript:, data:, in any case; user names and passwords in every
    /// spelling of the authority (a backslash, an encoded port, an IPv6 host); no host; control and
    /// space characters; 4,097 bytes. Held: each is refused, before any player is asked.
    @Test(arguments: [
        "file:///etc/passwd", "FILE:///home/me/.ssh/id_ed25519", "file://localhost/etc/shadow", "javascript:alert(1)", "JavaScript://x/%0aalert(1)",
        "data:audio/ogg;base64,AAAA", "DATA://x/y", "http://user:pass@radio.example/a", "https://user@radio.example/a",
        "http://radio.example\\@evil.example/a", "http://:@radio.example/", "http://[::1]@evil/", "HTTP://User:Pw@Host:80/x",
        "rtsp://admin:admin@cam.local/stream", "https://", "https:///path", "http://host /a", "http://host/a\u{0}b", "http://host/\u{7F}",
        "http://host/\u{1B}[2J", "smb://nas/a.ogg", "sftp://host/a", "ssh://host", "vlc://pause", "mpv://x", "appref-ms://x", "ms-settings://x",
        "https://radio.example/" + String(repeating: "a", count: 4_097 - "https://radio.example/".utf8.count),
    ])
    func aURLThatIsNoPlainNetworkStreamIsRefused(url: String) {
        #expect(throws: MediaActivity.DecodingError.invalid("url")) { try decode(["url": .string(url)]) }
    }

    /// Attack: numbers that are not numbers, out of range, absurd, or of another type: NaN, ±inf,
    /// negative, 1e300, Int64.max and min as integers, the wrong type. Held: each is refused; what
    /// is accepted keeps every later computation finite (the seek target and the browser's `#t=`).
    @Test func absurdNumbersAreRefused() {
        let absurd: [PropertyValue] = [.double(.nan), .double(.infinity), .double(-.infinity), .double(-1), .double(-.leastNonzeroMagnitude),
                                       .double(1e300), .integer(.max), .integer(.min), .integer(-1), .string("1"), .boolean(true),
                                       .bytes([0, 0, 0, 0, 0, 0, 0, 0]), .date(30), .array([.double(1)])]
        for key in ["position", "positionTime", "rate", "length"] {
            for value in absurd {
                #expect(throws: MediaActivity.DecodingError.invalid(key), "\(key) = \(value)") { try decode([key: value]) }
            }
        }
        #expect(throws: MediaActivity.DecodingError.invalid("rate")) { try decode(["rate": .double(16.000001)]) }
        #expect(throws: MediaActivity.DecodingError.invalid("playing")) { try decode(["playing": .integer(1)]) }
        // The largest values allowed, a sample from the far future or 1970, any skew: all finite.
        for (position, time) in [(1e9, 0.0), (1e9, 1e11), (0, 1e11), (5e8, 1_700_000_000)] {
            let media = try? decode(["position": .double(position), "positionTime": .double(time), "rate": .double(16), "length": nil])
            let activity = try! #require(media)
            // This machine's own clock (now, when WillContinue came) is no input of the member's.
            for (now, asked) in [(0.0, 0.0), (1e11, 0), (1e11, 1e11 - 5), (-1e12, 1e12), (2e11, 1_700_000_000)] {
                let target = activity.seekTarget(now: now, askedAt: asked)
                #expect(target.isFinite && target >= 0, "position \(position) at \(time), now \(now), asked \(asked): \(target)")
                #expect(activity.browserURL(at: target).hasPrefix(activity.url))
            }
        }
    }

    /// Attack: a player name that is a path, has a slash, a space, a shell character, a leading
    /// dot, a non-ASCII letter, 256 bytes, or is empty. Held: refused (it would name a desktop file).
    @Test(arguments: ["/usr/bin/xterm", "../../bin/sh", "a/b", "mpv/../xterm", "mpv;rm", "mpv --help", "$(id)", "`id`", ".mpv", "",
                      "mpvé", "mpv\u{0}", "mpv\n", String(repeating: "m", count: 256)])
    func aPlayerNameThatIsNoDesktopIdIsRefused(player: String) {
        #expect(throws: MediaActivity.DecodingError.invalid("player")) { try decode(["player": .string(player)]) }
    }

    /// Attack: a valid desktop id that names a browser, and one whose entry is no media player.
    /// Found: the receiver started whatever installed entry the name picked on the member's URL
    /// (`<player>.desktop`, any program: a terminal, an office suite, a browser). Fixed: an entry is
    /// started only when its Categories name a media player (AudioVideo, Audio or Video) and it is
    /// not a browser; the receiver asks its desktop which (MediaDesktop.isMediaPlayer).
    @Test func onlyAMediaPlayersEntryIsEverStarted() throws {
        for browser in ["firefox", "firefox-esr", "chromium", "google-chrome", "org.mozilla.firefox", "brave-browser"] {
            let media = try decode(["player": .string(browser)])
            #expect(MediaOpening.candidates(for: media, running: [], sourcePlayerInstalled: true, hasDefaultHandler: false).isEmpty, "\(browser)")
        }
        #expect(MediaPlayerName.isMediaPlayer(categories: "AudioVideo;Audio;Video;Player;TV;"))
        #expect(MediaPlayerName.isMediaPlayer(categories: "GNOME;GTK;AudioVideo;Audio;Player;"))
        #expect(MediaPlayerName.isMediaPlayer(categories: "Video;Player"))
        // Red team (local files): an audio or video program that is no player (an editor, a recorder,
        // a plugin host, a mixer) opens a project file a member sends, and some load code from one.
        // Found: AudioVideo alone made an entry a player. Fixed: the Player category is needed too.
        for categories in [nil, "", "System;TerminalEmulator;", "Office;WordProcessor;", "Network;WebBrowser;", "AudioVideoEditing;",
                           "Utility;X-Audio;", "audiovideo;", " AudioVideo ;", "Video", "AudioVideo;Audio;AudioVideoEditing;",
                           "AudioVideo;Recorder;", "AudioVideo;Audio;Midi;Sequencer;", "GTK;AudioVideo;Audio;Mixer;Settings;", "Player;",
                           "Utility;Player;"] {
            #expect(!MediaPlayerName.isMediaPlayer(categories: categories), "\(categories ?? "nil")")
        }
    }

    /// Attack: a title of 1,000 characters, of control characters, of one character with many
    /// combining marks. Held: cut to 256 characters (the wire already bounds a title to 256 bytes,
    /// protocol §5), kept as text and never used to pick anything.
    @Test func aHostileTitleIsOnlyText() throws {
        #expect(try decode([:], title: String(repeating: "x", count: 1_000)).title.count == MediaActivity.maximumTitleLength)
        let controls = String(repeating: "\u{1B}[31m\u{0}\n", count: 10)
        #expect(try decode([:], title: controls).title == controls)
        #expect(try decode([:], title: "").url == "https://radio.example/live.ogg")
    }
}
