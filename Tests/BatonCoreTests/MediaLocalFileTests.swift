// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

/// The local-file variant of the media activity (docs/media.md, "What travels"): a player playing a
/// local file publishes its name (`fileName`), never its path; the bytes go as the document.
@Suite("BatonCoreTests: the media activity of a local file")
struct MediaLocalFileTests {
    static func local(_ name: String = "talk.wav") -> MediaActivity {
        MediaActivity(url: "file:///home/me/Music/secret%20dir/\(name)", title: "Talk", position: 42, positionTime: 1_700_000_000, rate: 1,
                      playing: true, length: 600, player: "mpv", file: MediaActivity.LocalFile(name: name))
    }

    @Test func theFileTravelsByNameWithoutItsPath() throws {
        let info = Self.local().userInfo
        #expect(info["url"] == nil)
        #expect(info["fileName"] == .string("talk.wav"))
        #expect(!info.values.contains { if case .string(let text) = $0 { text.contains("/") } else { false } })
        let decoded = try MediaActivity(title: "Talk", userInfo: info)
        #expect(decoded.file == MediaActivity.LocalFile(name: "talk.wav"))
        // The receiver sets the URL of its saved copy; until then it names nothing.
        #expect(decoded.url.isEmpty)
        #expect(decoded.position == 42 && decoded.positionTime == 1_700_000_000 && decoded.playing && decoded.length == 600 && decoded.player == "mpv")
        #expect(decoded.seekTarget(now: 1_700_000_003, askedAt: 1_700_000_000) == 45)
        // A stream's userInfo has no fileName.
        let stream = MediaActivity(url: "https://radio.example/a.ogg", title: "A", position: 1, positionTime: 1, rate: 1, playing: true)
        #expect(stream.userInfo["fileName"] == nil && stream.userInfo["url"] == .string("https://radio.example/a.ogg"))
    }

    /// What a receiver from before this variant does with it: its decoder needs `url`, which the
    /// variant never has, so it refuses the activity (the Continue fails, the source keeps playing)
    /// rather than open anything.
    @Test func anOlderReceiverRefusesItForWantOfAURL() {
        var info = Self.local().userInfo
        info["fileName"] = nil
        #expect(throws: MediaActivity.DecodingError.missing("url")) { try MediaActivity(title: "T", userInfo: info) }
    }

    @Test func aStreamAndAFileAtOnceAreRefused() {
        var info = Self.local().userInfo
        info["url"] = .string("https://radio.example/a.ogg")
        #expect(throws: MediaActivity.DecodingError.invalid("fileName")) { try MediaActivity(title: "T", userInfo: info) }
    }

    /// Attack: names that are paths, hidden, empty, overlong, of another type, or that hide what
    /// they are (control characters, bidirectional overrides). Held: each refuses the activity.
    @Test(arguments: [
        PropertyValue.string(""), .string("."), .string(".."), .string(".bashrc"), .string("../../.ssh/authorized_keys"), .string("a/b.ogg"),
        .string("/etc/passwd"), .string("a\u{0}b.ogg"), .string("a\nb.ogg"), .string("a\rb"), .string("\u{1B}[2Jx.ogg"), .string("a\u{7F}.ogg"),
        .string("a\u{85}.ogg"), .string("\u{202E}ggo.exe"), .string("a\u{2066}.ogg"), .string(String(repeating: "a", count: 256)),
        .string(String(repeating: "é", count: 128)), .integer(1), .bytes(Array("a.ogg".utf8)), .array([.string("a.ogg")]), .boolean(true),
        // Red team (bidirectional marks and line separators, which the overrides' check let through):
        // "song\u{200F}.ogg" shows its extension where the mark puts it; U+2028 breaks a log line.
        .string("song\u{200F}.ogg"), .string("a\u{200E}.ogg"), .string("a\u{061C}.ogg"), .string("a\u{2028}fake log line.ogg"),
        .string("a\u{2029}.ogg"),
    ])
    func aHostileFileNameIsRefused(_ name: PropertyValue) {
        var info = Self.local().userInfo
        info["fileName"] = name
        #expect(throws: MediaActivity.DecodingError.invalid("fileName")) { try MediaActivity(title: "T", userInfo: info) }
    }

    @Test func theLongestNamesAndOrdinaryOnesAreRead() throws {
        for name in [String(repeating: "a", count: 255), String(repeating: "é", count: 127), "Ünïcödé – 01 (live).flac", "a", "song.tar.gz"] {
            var info = Self.local().userInfo
            info["fileName"] = .string(name)
            #expect(try MediaActivity(title: "T", userInfo: info).file?.name == name)
        }
    }

    @Test func theNumbersAreCheckedAsForAStream() {
        for (key, value) in [("position", PropertyValue.double(.nan)), ("rate", .double(17)), ("positionTime", .double(-1)), ("length", .double(.infinity))] {
            var info = Self.local().userInfo
            info[key] = value
            #expect(throws: MediaActivity.DecodingError.invalid(key)) { try MediaActivity(title: "T", userInfo: info) }
        }
    }

    @Test func localFilePaths() {
        #expect(MediaURLPolicy.localFilePath("file:///home/me/a%20b.ogg") == "/home/me/a b.ogg")
        #expect(MediaURLPolicy.localFilePath("file://localhost/srv/x.ogg") == "/srv/x.ogg")
        #expect(MediaURLPolicy.localFilePath("FILE:///x/%C3%A9.ogg") == "/x/é.ogg")
        #expect(MediaURLPolicy.localFilePath("file:///x/caf%c3%a9") == "/x/café")
        for url in ["file://nas/x.ogg", "file:/x.ogg", "file:x.ogg", "file://", "file:///a%00b", "file:///a%zz", "file:///a%4", "file:///a%",
                    "file:///a?b", "file:///a#t=3", "file:///%ff%fe", "https://host/a.ogg", "smb://nas/a.ogg", "/home/me/a.ogg",
                    "file:///" + String(repeating: "a", count: 4_090)] {
            #expect(MediaURLPolicy.localFilePath(url) == nil, "\(url)")
        }
    }

    @Test func mediaTypesThatADefaultPlayerMayOpen() {
        for type in ["audio/ogg", "video/x-matroska", "application/ogg", "AUDIO/MPEG", "audio/x-opus+ogg", "video/mp4"] {
            #expect(MediaActivity.LocalFile.isMediaType(type), "\(type)")
        }
        for type in ["application/x-desktop", "application/x-shellscript", "text/html", "application/octet-stream", "audio/", "audio",
                     "/ogg", "audio/ogg; codecs=opus", "audio/ogg/x", "audio/o\u{0}gg", "", "audio/" + String(repeating: "a", count: 250)] {
            #expect(!MediaActivity.LocalFile.isMediaType(type), "\(type)")
        }
    }

    @Test func anotherFileIsAnotherPublication() {
        var next = Self.local()
        next.file = MediaActivity.LocalFile(name: "other.wav")
        #expect(MediaPublishing.change(from: Self.local(), to: next) == .update)
        #expect(MediaPublishing.change(from: Self.local(), to: Self.local()) == .none)
    }

    /// The receiver's candidates for the saved copy (`file://`): the same running player (mpv-mpris
    /// lists no `file` scheme, yet plays files), its desktop entry, any other running player but a
    /// browser, then the desktop's default player for the file's type.
    @Test func theSavedCopyOpensInTheSameOrderAsAURL() {
        var received = Self.local()
        received.url = "file:///home/you/.local/share/baton/received/talk.wav"
        let mpv = MediaOpening.Player(busName: "org.mpris.MediaPlayer2.mpv", desktopEntry: "mpv", uriSchemes: ["http", "https", "smb"])
        let vlc = MediaOpening.Player(busName: "org.mpris.MediaPlayer2.vlc", desktopEntry: "vlc", uriSchemes: ["file", "http"])
        let firefox = MediaOpening.Player(busName: "org.mpris.MediaPlayer2.firefox.instance_1", desktopEntry: "firefox", uriSchemes: ["file"])
        #expect(MediaOpening.candidates(for: received, running: [vlc, firefox, mpv], sourcePlayerInstalled: true, hasDefaultHandler: true)
                == [.running(busName: "org.mpris.MediaPlayer2.mpv"), .launch(desktopID: "mpv.desktop"), .running(busName: "org.mpris.MediaPlayer2.vlc"),
                    .desktopDefault])
        #expect(MediaOpening.candidates(for: received, running: [firefox], sourcePlayerInstalled: false, hasDefaultHandler: false).isEmpty)
    }
}
