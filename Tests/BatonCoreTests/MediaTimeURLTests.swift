// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

/// The page URL + media time → URL mapping (docs/media.md, "Which sites open at the time"): each
/// documented site in its forms, every other page left alone, hostile input refused.
@Suite struct MediaTimeURLTests {
    private func timed(_ url: String, _ seconds: Double = 125.9) -> String? { MediaTimeURL.url(url, at: seconds) }

    @Test(arguments: [
        ("https://www.youtube.com/watch?v=abc", "https://www.youtube.com/watch?v=abc&t=125"),
        ("https://youtube.com/watch?v=abc", "https://youtube.com/watch?v=abc&t=125"),
        ("https://m.youtube.com/watch?v=abc&list=PL1", "https://m.youtube.com/watch?v=abc&list=PL1&t=125"),
        ("https://music.youtube.com/watch?v=abc", "https://music.youtube.com/watch?v=abc&t=125"),
        ("HTTPS://WWW.YouTube.COM/watch?v=abc", "HTTPS://WWW.YouTube.COM/watch?v=abc&t=125"),
        ("https://www.youtube.com:443/watch?v=abc", "https://www.youtube.com:443/watch?v=abc&t=125"),
        ("http://www.youtube.com./watch?v=abc", "http://www.youtube.com./watch?v=abc&t=125"),
        // A time the page had (seconds or 1m30s, once or twice) is replaced; other names ending in t stay.
        ("https://www.youtube.com/watch?v=abc&t=1m30s&list=PL1", "https://www.youtube.com/watch?v=abc&list=PL1&t=125"),
        ("https://www.youtube.com/watch?t=9&v=abc&t=10", "https://www.youtube.com/watch?v=abc&t=125"),
        ("https://www.youtube.com/watch?v=abc&at=5&tt=6", "https://www.youtube.com/watch?v=abc&at=5&tt=6&t=125"),
        ("https://www.youtube.com/watch?v=abc#comments", "https://www.youtube.com/watch?v=abc&t=125#comments"),
        ("https://youtu.be/abc", "https://youtu.be/abc?t=125"),
        ("https://youtu.be/abc?si=xyz&t=3", "https://youtu.be/abc?si=xyz&t=125"),
    ])
    func youTubeWatchPagesTakeT(_ page: String, _ expected: String) {
        #expect(MediaTimeURL.site(of: page) == .youTube)
        #expect(timed(page) == expected)
    }

    @Test(arguments: [
        ("https://www.youtube.com/embed/abc", "https://www.youtube.com/embed/abc?start=125"),
        ("https://www.youtube-nocookie.com/embed/abc?autoplay=1&start=4", "https://www.youtube-nocookie.com/embed/abc?autoplay=1&start=125"),
    ])
    func youTubeEmbeddedPlayersTakeStart(_ page: String, _ expected: String) {
        #expect(MediaTimeURL.site(of: page) == .youTubeEmbed)
        #expect(timed(page) == expected)
    }

    @Test(arguments: [
        ("https://vimeo.com/76979871", "https://vimeo.com/76979871#t=125s"),
        ("https://vimeo.com/channels/staffpicks/76979871#t=10s", "https://vimeo.com/channels/staffpicks/76979871#t=125s"),
        ("https://www.vimeo.com/76979871/8272103f6e?share=copy", "https://www.vimeo.com/76979871/8272103f6e?share=copy#t=125s"),
        ("https://player.vimeo.com/video/76979871?h=8272103f6e", "https://player.vimeo.com/video/76979871?h=8272103f6e#t=125s"),
    ])
    func vimeoTakesATimeFragment(_ page: String, _ expected: String) {
        #expect(MediaTimeURL.site(of: page) == .vimeo)
        #expect(timed(page) == expected)
    }

    @Test func twitchsPlayerTakesHoursMinutesSeconds() {
        let page = "https://player.twitch.tv/?video=v1234&parent=example.org&time=0h0m5s"
        #expect(MediaTimeURL.site(of: page) == .twitchPlayer)
        #expect(timed(page, 3723.4) == "https://player.twitch.tv/?video=v1234&parent=example.org&time=1h2m3s")
        #expect(timed(page, 0) == "https://player.twitch.tv/?video=v1234&parent=example.org&time=0h0m0s")
        #expect(timed(page, 86_400 * 2 + 59) == "https://player.twitch.tv/?video=v1234&parent=example.org&time=48h0m59s")
    }

    @Test func dailymotionsPlayerTakesStartTime() {
        #expect(timed("https://geo.dailymotion.com/player/xplayer.html?video=x84sh87") == "https://geo.dailymotion.com/player/xplayer.html?video=x84sh87&startTime=125")
        #expect(timed("https://geo.dailymotion.com/player.html?video=x84sh87&startTime=3") == "https://geo.dailymotion.com/player.html?video=x84sh87&startTime=125")
    }

    @Test(arguments: ["paella", "paella7", "paella8"])
    func opencastsPaellaTakesTimeOnAnyHost(_ player: String) {
        let page = "https://tube.example.edu/\(player)/ui/watch.html?id=ID-1&time=3m"
        #expect(MediaTimeURL.site(of: page) == .opencastPaella)
        #expect(timed(page) == "https://tube.example.edu/\(player)/ui/watch.html?id=ID-1&time=125s")
    }

    @Test(arguments: [
        ("http://127.0.0.1:8000/clip.webm", "http://127.0.0.1:8000/clip.webm#t=125"),
        ("https://media.example/a/b/Talk.MP4?token=1", "https://media.example/a/b/Talk.MP4?token=1#t=125"),
        ("https://media.example/song.ogg#t=10", "https://media.example/song.ogg#t=125"),
        ("https://media.example/song.opus#t=10,20", "https://media.example/song.opus#t=125"),
        ("https://media.example/a.wav", "https://media.example/a.wav#t=125"),
    ])
    func bareMediaFilesTakeAMediaFragment(_ page: String, _ expected: String) {
        #expect(MediaTimeURL.site(of: page) == .mediaFile)
        #expect(timed(page) == expected)
    }

    @Test func aMediaFileAtTheStartHasNoFragmentAndOneWithAnotherFragmentIsLeftAlone() {
        #expect(timed("https://media.example/a.mp3#t=40", 0.5) == "https://media.example/a.mp3")
        #expect(timed("https://media.example/a.mp3#xywh=0,0,10,10") == nil)
    }

    /// Every other page opens as it is: the time is lost there (nil).
    @Test(arguments: [
        "https://example.org/", "http://127.0.0.1:8000/video.html", "https://www.youtube.com/", "https://www.youtube.com/watch",
        "https://www.youtube.com/watch?v=", "https://www.youtube.com/shorts/abc", "https://www.youtube.com/results?search_query=x",
        "https://youtu.be/", "https://youtu.be/a/b", "https://www.youtube.com/embed/", "https://www.youtube.com/embed/a/b",
        "https://youtube.com.evil.example/watch?v=abc", "https://evil.example/youtube.com/watch?v=abc", "https://notyoutube.com/watch?v=abc",
        "https://evil.example/watch?v=abc", "https://vimeo.com/about", "https://player.vimeo.com/video/x", "https://vimeo.evil/123",
        "https://player.twitch.tv/?channel=somebody", "https://www.twitch.tv/videos/1234", "https://www.dailymotion.com/video/x84sh87",
        "https://geo.dailymotion.com/player/x.html", "https://tube.example.edu/paella7/ui/watch.html", "https://example.org/watch.html?id=1",
        "https://media.example/.mp4", "https://media.example/mp4", "https://media.example/a.mp4/", "https://media.example/a.mp4.html",
    ])
    func otherPagesTakeNoTime(_ page: String) {
        #expect(MediaTimeURL.site(of: page) == nil)
        #expect(timed(page) == nil)
    }

    /// What another machine sends is checked: only web addresses of a sane length, only finite times in bounds.
    @Test func hostileInputBuildsNothing() {
        for page in ["file:///home/me/a.mp4", "javascript:alert(1)//youtu.be/a", "data:video/mp4,a.mp4", "ftp://host/a.mp4",
                     "https://www.youtube.com/watch?v=a b", "https://youtu.be/a\n", "https:///a.mp4", ""] {
            #expect(timed(page) == nil, "\(page)")
            #expect(MediaTimeURL.site(of: page) == nil, "\(page)")
        }
        let long = "https://youtu.be/" + String(repeating: "a", count: MediaTimeURL.maximumURLLength)
        #expect(timed(long) == nil)
        for seconds in [Double.nan, .infinity, -.infinity, -1, -0.001, 1e9 + 1, .greatestFiniteMagnitude] {
            #expect(MediaTimeURL.url("https://youtu.be/abc", at: seconds) == nil, "\(seconds)")
        }
        #expect(MediaTimeURL.url("https://youtu.be/abc", at: 1e9) == "https://youtu.be/abc?t=1000000000")
    }

    /// Over every site's forms and a range of times: the result is a web address of the same site,
    /// it carries the whole seconds, and mapping it again replaces the time instead of adding one.
    @Test func everyResultIsTheSameSiteAndMappingAgainReplacesTheTime() throws {
        let pages = ["https://www.youtube.com/watch?v=abc&t=1", "https://youtu.be/abc", "https://www.youtube.com/embed/abc",
                     "https://vimeo.com/1", "https://player.vimeo.com/video/1", "https://player.twitch.tv/?video=v1",
                     "https://geo.dailymotion.com/player.html?video=x", "https://h.example/paella/ui/watch.html?id=1",
                     "https://h.example/a.mkv.webm"]
        for page in pages {
            let site = try #require(MediaTimeURL.site(of: page), "\(page)")
            for seconds in [0, 0.999, 1, 59.5, 60, 3599, 3600, 86_399, 1_000_000] as [Double] {
                let once = try #require(MediaTimeURL.url(page, at: 7), "\(page)")
                let url = try #require(MediaTimeURL.url(once, at: seconds), "\(once)")
                #expect(url == MediaTimeURL.url(page, at: seconds), "\(page) at \(seconds)")
                #expect(isWebAddress(url))
                #expect(MediaTimeURL.site(of: url) == site)
                let whole = Int(seconds)
                let (name, value): (String, String) = switch site {
                case .youTube: ("t=", "\(whole)")
                case .youTubeEmbed: ("start=", "\(whole)")
                case .vimeo: ("#t=", "\(whole)s")
                case .twitchPlayer: ("time=", "\(whole / 3600)h\(whole % 3600 / 60)m\(whole % 60)s")
                case .dailymotionPlayer: ("startTime=", "\(whole)")
                case .opencastPaella: ("time=", "\(whole)s")
                case .mediaFile: ("#t=", "\(whole)")
                }
                if site == .mediaFile && whole == 0 {
                    #expect(!url.contains("#"))
                } else {
                    #expect(url.hasSuffix(name + value), "\(url)")
                    #expect(occurrences(of: name, in: url) == 1, "\(url)")
                }
            }
        }
    }
}

private func occurrences(of needle: String, in text: String) -> Int {
    var count = 0
    var rest = Substring(text)
    while let range = rest.firstRange(of: needle) {
        count += 1
        rest = rest[range.upperBound...]
    }
    return count
}
