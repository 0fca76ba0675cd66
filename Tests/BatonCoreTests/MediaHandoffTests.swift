// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

private func song(position: Double = 30, at time: Double = 1000, rate: Double = 1, playing: Bool = true, length: Double? = 200,
                  url: String = "https://radio.example/song.ogg", player: String? = "mpv") -> MediaActivity {
    MediaActivity(url: url, title: "Song", position: position, positionTime: time, rate: rate, playing: playing, length: length, player: player)
}

@Suite struct MediaActivityTests {
    @Test func positionMovesAtTheRateWhilePlaying() {
        #expect(song().position(at: 1010) == 40)
        #expect(song(rate: 1.5).position(at: 1010) == 45)
        #expect(song(rate: 0).position(at: 1010) == 30)
        #expect(song(rate: 0.5).position(at: 1004) == 32)
    }

    @Test func positionStaysWhilePausedOrBeforeTheSample() {
        #expect(song(playing: false).position(at: 5000) == 30)
        #expect(song().position(at: 900) == 30)
        #expect(song().position(at: 1000) == 30)
    }

    @Test func positionStopsAtTheEndAndNeverGoesNegative() {
        #expect(song(length: 35).position(at: 1100) == 35)
        #expect(song(length: nil).position(at: 1100) == 130)
        #expect(song(position: 0, length: 10).position(at: 1000) == 0)
    }

    /// The receiver's target: the source's position at the pull plus the time the handoff took,
    /// bounded by what the receiver measured itself, whatever the two clocks say.
    @Test func seekTargetAddsTheHandoffTime() {
        // Clocks agree: saved at 1000 (position 30), received 2 s later, asked 2.5 s before.
        #expect(song().seekTarget(now: 1002, askedAt: 999.5) == 32)
        #expect(song(rate: 2).seekTarget(now: 1002, askedAt: 999.5) == 34)
        // The receiver's clock is 60 s ahead: no more than its own measured 2.5 s is added.
        #expect(song().seekTarget(now: 1062, askedAt: 1059.5) == 32.5)
        // The receiver's clock is behind the source's: nothing is added (never rewinds).
        #expect(song().seekTarget(now: 950, askedAt: 948) == 30)
        // Paused: exactly where it was.
        #expect(song(playing: false).seekTarget(now: 1002, askedAt: 999) == 30)
        // A receiver clock that stepped back between ask and now adds nothing.
        #expect(song().seekTarget(now: 1002, askedAt: 1003) == 30)
        // Never past the end.
        #expect(song(length: 31).seekTarget(now: 1002, askedAt: 999) == 31)
    }

    /// Every combination of skew and handoff duration: the target is never before the sample and
    /// never more than the measured duration (at the rate) after it.
    @Test func seekTargetIsBoundedForAnySkew() {
        for skew in stride(from: -120.0, through: 120.0, by: 7.5) {
            for duration in stride(from: 0.0, through: 20.0, by: 0.5) {
                for rate in [0.0, 0.5, 1, 2] {
                    let target = song(rate: rate, length: nil).seekTarget(now: 1000 + skew + duration, askedAt: 1000 + skew)
                    #expect(target >= 30 && target <= 30 + duration * rate + 1e-9, "skew \(skew), duration \(duration)")
                    if skew == 0 { #expect(abs(target - (30 + duration * rate)) < 1e-9) }
                }
            }
        }
    }

    @Test func browserURLGetsAStartTime() {
        #expect(song().browserURL(at: 42.7) == "https://radio.example/song.ogg#t=42")
        #expect(song().browserURL(at: 0.4) == "https://radio.example/song.ogg")
        #expect(song(url: "https://v.example/a#chapter").browserURL(at: 42) == "https://v.example/a#chapter")
    }

    @Test func userInfoRoundTrips() throws {
        for activity in [song(), song(playing: false, length: nil, player: nil), song(rate: 1.25, url: "rtsp://cam.example:554/live")] {
            let decoded = try MediaActivity(title: activity.title, userInfo: activity.userInfo)
            #expect(decoded == activity)
        }
    }

    @Test func userInfoTakesIntegersForNumbersAndIgnoresUnknownKeys() throws {
        var info = song().userInfo
        info["position"] = .integer(12)
        info["later"] = .string("a newer format's key")
        #expect(try MediaActivity(title: "T", userInfo: info).position == 12)
    }

    @Test func missingValuesAreRefused() {
        for key in ["url", "position", "positionTime", "rate", "playing"] {
            var info = song().userInfo
            info[key] = nil
            #expect(throws: MediaActivity.DecodingError.missing(key)) { try MediaActivity(title: "T", userInfo: info) }
        }
    }

    @Test func hostileValuesAreRefused() {
        let cases: [(String, PropertyValue)] = [
            ("url", .string("file:///home/me/song.ogg")), ("url", .integer(1)), ("url", .string("javascript:alert(1)")),
            ("position", .double(.nan)), ("position", .double(-1)), ("position", .double(.infinity)), ("position", .string("1")),
            ("positionTime", .double(-5)), ("rate", .double(100)), ("rate", .double(-1)), ("rate", .double(.nan)),
            ("playing", .integer(1)), ("length", .double(-3)), ("length", .string("x")),
            ("player", .string("../../bin/sh")), ("player", .string("")), ("player", .integer(3)), ("player", .string(".hidden")),
        ]
        for (key, value) in cases {
            var info = song().userInfo
            info[key] = value
            #expect(throws: MediaActivity.DecodingError.invalid(key)) { try MediaActivity(title: "T", userInfo: info) }
        }
    }

    @Test func aLongTitleIsCut() throws {
        let decoded = try MediaActivity(title: String(repeating: "é", count: 1000), userInfo: song().userInfo)
        #expect(decoded.title.count == MediaActivity.maximumTitleLength)
    }
}

@Suite struct MediaURLPolicyTests {
    @Test(arguments: ["http://127.0.0.1:8000/a.ogg", "https://radio.example/live", "HTTPS://Radio.example/x", "rtsp://cam:554/s",
                      "rtmp://live.example/app/key", "mms://old.example/a", "https://[::1]/x", "https://host?x=1"])
    func networkStreamsTravel(_ url: String) {
        #expect(MediaURLPolicy.travels(url))
    }

    @Test(arguments: ["file:///home/me/a.ogg", "smb://nas/music/a.ogg", "sftp://host/a", "ftp://host/a", "cdda://1", "dvd://",
                      "https://user:secret@host/a", "https://user@host/a", "https:///a", "https://", "http://a b/c", "http://host/\n",
                      "song.ogg", "", "javascript:alert(1)", "data:audio/ogg;base64,AAAA", "1http://x/", "ht tp://x/"])
    func localAndPrivateURLsStay(_ url: String) {
        #expect(!MediaURLPolicy.travels(url))
    }

    @Test func aHugeURLStays() {
        #expect(!MediaURLPolicy.travels("https://h/" + String(repeating: "a", count: 5000)))
        #expect(MediaURLPolicy.travels("https://h/" + String(repeating: "a", count: 4000)))
    }

    @Test func browsersAreRecognised() {
        #expect(MediaPlayerName.isBrowser(busName: "org.mpris.MediaPlayer2.firefox.instance_1_42", desktopEntry: nil))
        #expect(MediaPlayerName.isBrowser(busName: "org.mpris.MediaPlayer2.chromium.instance1234", desktopEntry: "chromium"))
        #expect(MediaPlayerName.isBrowser(busName: "org.mpris.MediaPlayer2.plasma-browser-integration", desktopEntry: nil))
        #expect(MediaPlayerName.isBrowser(busName: "org.mpris.MediaPlayer2.x", desktopEntry: "firefox-esr"))
        #expect(!MediaPlayerName.isBrowser(busName: "org.mpris.MediaPlayer2.mpv", desktopEntry: "mpv"))
        #expect(!MediaPlayerName.isBrowser(busName: "org.mpris.MediaPlayer2.vlc", desktopEntry: "vlc"))
        #expect(MediaPlayerName.isPlayer(busName: "org.mpris.MediaPlayer2.mpv"))
        #expect(!MediaPlayerName.isPlayer(busName: "org.mpris.MediaPlayer2."))
        #expect(!MediaPlayerName.isPlayer(busName: "org.example.mpv"))
    }
}

@Suite struct MediaPublishingTests {
    private func state(_ status: MediaPlayerState.Status = .playing, position: Double = 30, at time: Double = 1000, rate: Double = 1,
                       url: String? = "https://radio.example/a.ogg", title: String? = "A") -> MediaPlayerState {
        MediaPlayerState(url: url, trackID: "/0", title: title, length: 200, status: status, rate: rate, position: position, sampledAt: time, desktopEntry: "mpv")
    }

    @Test func onlyTravellingPlayingOrPausedMediaIsPublished() {
        #expect(state().activity != nil)
        #expect(state(.paused).activity?.playing == false)
        #expect(state(.stopped).activity == nil)
        #expect(state(url: nil).activity == nil)
        // A local file: the local-file variant, its name only (the path is the source's own url, never in userInfo).
        let local = state(url: "file:///home/me/a.ogg").activity
        #expect(local?.file == MediaActivity.LocalFile(name: "a.ogg") && local?.userInfo["url"] == nil && local?.userInfo["fileName"] == .string("a.ogg"))
        #expect(state(url: "file://nas/home/me/a.ogg").activity == nil)
        #expect(state(url: "file:///home/me/.hidden.ogg").activity == nil)
        #expect(state(url: "file:///home/me/").activity == nil)
    }

    @Test func brokenNumbersAreMended() throws {
        var broken = state(position: .nan, rate: .infinity)
        broken.length = -4
        broken.desktopEntry = "../evil"
        let activity = try #require(broken.activity)
        #expect(activity.position == 0 && activity.rate == 1 && activity.length == nil && activity.player == nil)
        #expect(state(position: 500).activity?.position == 200)
        #expect(state(rate: 99).activity?.rate == MediaActivity.maximumRate)
    }

    @Test func titleFallsBackToTheFileName() {
        #expect(state(title: nil).activity?.title == "a.ogg")
        #expect(state(title: "").activity?.title == "a.ogg")
        #expect(state(url: "https://radio.example/x/b.mp3?token=1#frag", title: nil).activity?.title == "b.mp3")
        #expect(state(url: "https://radio.example", title: nil).activity?.title == "radio.example")
    }

    /// The position moving as the rate says never republishes: sampled again and again over an
    /// hour of playback at several rates, nothing changes.
    @Test func playbackAloneNeverRepublishes() {
        for rate in [0.5, 1, 1.5, 2] {
            let published = state(rate: rate).activity
            for second in stride(from: 0.0, through: 3600, by: 0.25) {
                let later = state(position: 30 + second * rate, at: 1000 + second, rate: rate).activity
                #expect(MediaPublishing.change(from: published, to: later) == .none)
            }
        }
        let paused = state(.paused).activity
        #expect(MediaPublishing.change(from: paused, to: state(.paused, at: 9000).activity) == .none)
    }

    @Test func trackPlayPauseSeekAndRateRepublish() {
        let published = state().activity
        #expect(MediaPublishing.change(from: published, to: state(.paused, position: 35, at: 1005).activity) == .update)
        #expect(MediaPublishing.change(from: published, to: state(url: "https://radio.example/b.ogg").activity) == .update)
        #expect(MediaPublishing.change(from: published, to: state(title: "B").activity) == .update)
        #expect(MediaPublishing.change(from: published, to: state(rate: 1.5).activity) == .update)
        // A seek forward and back, 2 s either way of where it should be.
        #expect(MediaPublishing.change(from: published, to: state(position: 42, at: 1010).activity) == .update)
        #expect(MediaPublishing.change(from: published, to: state(position: 38, at: 1010).activity) == .update)
        // Noise under the tolerance.
        #expect(MediaPublishing.change(from: published, to: state(position: 41, at: 1010).activity) == .none)
    }

    /// mpv sends Metadata twice on load, the second time with mpris:length: not a republish.
    @Test func aLengthArrivingLaterDoesNotRepublishAlone() {
        var without = state()
        without.length = nil
        #expect(MediaPublishing.change(from: without.activity, to: state(position: 31, at: 1001).activity) == .none)
        #expect(MediaPublishing.change(from: without.activity, to: state(.paused, position: 31, at: 1001).activity) == .update)
    }

    @Test func stoppingInvalidatesAndStartingPublishes() {
        #expect(MediaPublishing.change(from: state().activity, to: state(.stopped).activity) == .invalidate)
        #expect(MediaPublishing.change(from: state().activity, to: nil) == .invalidate)
        #expect(MediaPublishing.change(from: nil, to: state().activity) == .update)
        #expect(MediaPublishing.change(from: nil, to: nil) == .none)
    }
}

@Suite struct MediaPlayerBookTests {
    private func state(_ status: MediaPlayerState.Status, url: String? = "https://r.example/a.ogg") -> MediaPlayerState {
        MediaPlayerState(url: url, status: status, desktopEntry: "mpv")
    }

    @Test func theLatestToStartPlayingIsChosen() {
        var book = MediaPlayerBook()
        #expect(book.update("org.mpris.MediaPlayer2.a", state(.playing)) == "org.mpris.MediaPlayer2.a")
        #expect(book.update("org.mpris.MediaPlayer2.b", state(.playing)) == "org.mpris.MediaPlayer2.b")
        // a sends an update while still playing: b stays chosen.
        #expect(book.update("org.mpris.MediaPlayer2.a", state(.playing)) == "org.mpris.MediaPlayer2.b")
        // b pauses while a plays: a.
        #expect(book.update("org.mpris.MediaPlayer2.b", state(.paused)) == "org.mpris.MediaPlayer2.a")
        // b plays again: b.
        #expect(book.update("org.mpris.MediaPlayer2.b", state(.playing)) == "org.mpris.MediaPlayer2.b")
        #expect(book.remove("org.mpris.MediaPlayer2.b") == "org.mpris.MediaPlayer2.a")
    }

    @Test func aPausedChoiceStaysUntilStoppedOrGone() {
        var book = MediaPlayerBook()
        book.update("p", state(.playing))
        #expect(book.update("p", state(.paused)) == "p")
        #expect(book.activity?.playing == false)
        // Another player that is paused does not take over.
        #expect(book.update("q", state(.paused)) == "p")
        #expect(book.update("p", state(.stopped)) == nil)
        #expect(book.activity == nil)
        book.update("p", state(.playing))
        #expect(book.remove("p") == nil)
    }

    @Test func aPausedPlayerNeverChosenIsNotPublished() {
        var book = MediaPlayerBook()
        #expect(book.update("q", state(.paused)) == nil)
    }

    @Test func playersWithNothingThatTravelsAreSkipped() {
        var book = MediaPlayerBook()
        book.update("a", state(.playing))
        #expect(book.update("b", state(.playing, url: "smb://nas/music/x.ogg")) == "a")
        #expect(book.update("a", state(.playing, url: nil)) == nil)
        // A local file travels (as a document): its player is chosen like any other.
        #expect(book.update("c", state(.playing, url: "file:///home/me/x.ogg")) == "c")
    }
}

@Suite struct MediaOpeningTests {
    let mpv = MediaOpening.Player(busName: "org.mpris.MediaPlayer2.mpv", desktopEntry: "mpv", uriSchemes: ["http", "https", "rtsp"])
    let vlc = MediaOpening.Player(busName: "org.mpris.MediaPlayer2.vlc", desktopEntry: "vlc", uriSchemes: ["HTTP", "https", "file"])
    let firefox = MediaOpening.Player(busName: "org.mpris.MediaPlayer2.firefox.instance_1_9", desktopEntry: "firefox", uriSchemes: ["http", "https"])
    let fileOnly = MediaOpening.Player(busName: "org.mpris.MediaPlayer2.local", desktopEntry: "local", uriSchemes: ["file"])

    @Test func theSamePlayerRunningComesFirstThenInstalledThenOthersThenTheDefault() {
        let all = MediaOpening.candidates(for: song(), running: [vlc, mpv, firefox, fileOnly], sourcePlayerInstalled: true, hasDefaultHandler: true)
        #expect(all == [.running(busName: mpv.busName), .launch(desktopID: "mpv.desktop"), .running(busName: vlc.busName), .desktopDefault])
    }

    @Test func withoutTheSamePlayer() {
        #expect(MediaOpening.candidates(for: song(player: "rhythmbox"), running: [mpv, vlc], sourcePlayerInstalled: false, hasDefaultHandler: false)
            == [.running(busName: mpv.busName), .running(busName: vlc.busName)])
        #expect(MediaOpening.candidates(for: song(player: nil), running: [vlc], sourcePlayerInstalled: true, hasDefaultHandler: true)
            == [.running(busName: vlc.busName), .desktopDefault])
        #expect(MediaOpening.candidates(for: song(player: "mpv"), running: [], sourcePlayerInstalled: true, hasDefaultHandler: false)
            == [.launch(desktopID: "mpv.desktop")])
    }

    @Test func schemesMustFitAndBrowsersAreNeverAsked() {
        let stream = song(url: "rtsp://cam.example/live")
        #expect(MediaOpening.candidates(for: stream, running: [vlc, firefox, fileOnly], sourcePlayerInstalled: false, hasDefaultHandler: false).isEmpty)
        #expect(MediaOpening.candidates(for: stream, running: [vlc, mpv], sourcePlayerInstalled: false, hasDefaultHandler: false)
            == [.running(busName: mpv.busName)])
    }
}

@Suite struct MediaPlayerNamesTests {
    let vlc = "org.mpris.MediaPlayer2.vlc", instance = "org.mpris.MediaPlayer2.vlc.instance4242", mpv = "org.mpris.MediaPlayer2.mpv"

    @Test func twoNamesOfOneProcessAreOnePlayerKnownByTheLeastName() {
        var names = MediaPlayerNames()
        // VLC 3.0: the instance name on one connection, the short name on another, one process.
        #expect(names.add(instance, owner: .init(connection: ":1.0", process: 4242)) == (instance, nil))
        #expect(names.add(vlc, owner: .init(connection: ":1.1", process: 4242)) == (vlc, instance))
        #expect(names.add(mpv, owner: .init(connection: ":1.2", process: 7)) == (mpv, nil))
        #expect(names.player(of: instance) == vlc && names.player(of: vlc) == vlc && names.player(of: mpv) == mpv)
        // Signals from either connection are the same player's.
        #expect(names.player(sender: ":1.0") == vlc && names.player(sender: ":1.1") == vlc && names.player(sender: ":1.2") == mpv)
        #expect(names.player(sender: ":1.9") == nil && names.player(of: "org.mpris.MediaPlayer2.other") == nil)
        // Another name of a known player: no new player, nothing replaced.
        #expect(names.add("org.mpris.MediaPlayer2.vlc.x", owner: .init(connection: ":1.1", process: 4242)) == (vlc, nil))
    }

    @Test func oneConnectionWithTwoNamesIsOnePlayerWhenTheProcessIsUnknown() {
        var names = MediaPlayerNames()
        names.add(vlc, owner: .init(connection: ":1.5", process: nil))
        #expect(names.add(instance, owner: .init(connection: ":1.5", process: nil)) == (vlc, nil))
        // Two connections whose process the bus did not say are two players.
        #expect(names.add(mpv, owner: .init(connection: ":1.6", process: nil)) == (mpv, nil))
        #expect(names.player(sender: ":1.6") == mpv)
    }

    @Test func aPlayerLeavingNameByNameKeepsItsOtherNameUntilTheLast() {
        var names = MediaPlayerNames()
        names.add(vlc, owner: .init(connection: ":1.0", process: 4242))
        names.add(instance, owner: .init(connection: ":1.1", process: 4242))
        // The name it is known by goes: known by the other now.
        #expect(names.remove(vlc) == (vlc, instance))
        #expect(names.player(sender: ":1.1") == instance && names.player(sender: ":1.0") == nil)
        #expect(names.remove(instance) == (instance, nil))
        #expect(names.names.isEmpty)
        // Another name going leaves the player as it was; an unknown name is reported removed.
        names.add(vlc, owner: .init(connection: ":1.0", process: 4242))
        names.add(instance, owner: .init(connection: ":1.1", process: 4242))
        #expect(names.remove(instance) == (nil, nil))
        #expect(names.player(of: vlc) == vlc)
        #expect(names.remove("org.mpris.MediaPlayer2.gone") == ("org.mpris.MediaPlayer2.gone", nil))
    }

    @Test func processesAreNotConfused() {
        var names = MediaPlayerNames()
        names.add(vlc, owner: .init(connection: ":1.0", process: 1))
        #expect(names.add(instance, owner: .init(connection: ":1.1", process: 2)) == (instance, nil))
        #expect(names.player(of: instance) == instance && names.player(of: vlc) == vlc)
    }
}
