// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

/// The media of a web page (docs/media.md, "Browser media"): what the extension reports, checked;
/// the sample in the page's userInfo, read back with every hostile value refused; the WillSave
/// resample and the receiver's target, which are MediaActivity's own.
@Suite struct PageMediaTests {
    private let clip = PageMedia(position: 42, positionTime: 1000, rate: 1, playing: true, length: 600)

    @Test func whatTheExtensionReportsIsChecked() throws {
        let media = try #require(PageMedia.checked(position: 42.5, rate: 1.25, playing: true, duration: 600, sampledAt: 1000))
        #expect(media == PageMedia(position: 42.5, positionTime: 1000, rate: 1.25, playing: true, length: 600))
        // A live stream's duration is Infinity (or NaN before metadata): no length, the position stays.
        for duration in [Double.infinity, .nan, -1, 2e9] {
            #expect(PageMedia.checked(position: 42, rate: 1, playing: false, duration: duration, sampledAt: 1000)?.length == nil)
        }
        // A position past the duration (a rounding between the two reads) is cut to it.
        #expect(PageMedia.checked(position: 600.2, rate: 1, playing: false, duration: 600, sampledAt: 1000)?.position == 600)
        for position in [Double.nan, .infinity, -0.5, 1e9 + 1] {
            #expect(PageMedia.checked(position: position, rate: 1, playing: true, duration: nil, sampledAt: 1000) == nil)
        }
        for rate in [Double.nan, .infinity, -1, 16.5] {
            #expect(PageMedia.checked(position: 1, rate: rate, playing: true, duration: nil, sampledAt: 1000) == nil)
        }
        for clock in [Double.nan, -1, 1e12] {
            #expect(PageMedia.checked(position: 1, rate: 1, playing: true, duration: nil, sampledAt: clock) == nil)
        }
        #expect(PageMedia.checked(position: 0, rate: 0, playing: false, duration: 0, sampledAt: 0) != nil)
    }

    @Test func userInfoRoundTripsBesideTheScrollPosition() throws {
        var info = clip.userInfo
        #expect(info == ["mediaPosition": .double(42), "mediaPositionTime": .double(1000), "mediaRate": .double(1),
                         "mediaPlaying": .boolean(true), "mediaLength": .double(600)])
        info["scrollY"] = .double(812)
        info["someLaterKey"] = .string("ignored")
        #expect(try PageMedia(userInfo: info) == clip)
        var live = clip
        live.length = nil
        #expect(try PageMedia(userInfo: live.userInfo) == live)
        #expect(try PageMedia(userInfo: ["mediaPosition": .integer(42), "mediaPositionTime": .integer(1000), "mediaRate": .integer(1),
                                         "mediaPlaying": .boolean(false)])
                == PageMedia(position: 42, positionTime: 1000, rate: 1, playing: false))
    }

    @Test func aPageWithoutMediaHasNone() throws {
        #expect(try PageMedia(userInfo: [:]) == nil)
        #expect(try PageMedia(userInfo: ["scrollX": .double(0), "scrollY": .double(10)]) == nil)
    }

    @Test func missingAndHostileValuesAreRefused() {
        for key in ["mediaPositionTime", "mediaRate", "mediaPlaying"] {
            var info = clip.userInfo
            info[key] = nil
            #expect(throws: MediaActivity.DecodingError.missing(key)) { _ = try PageMedia(userInfo: info) }
        }
        let hostile: [(String, PropertyValue)] = [
            ("mediaPosition", .double(.nan)), ("mediaPosition", .double(.infinity)), ("mediaPosition", .double(-1)),
            ("mediaPosition", .double(1e9 + 1)), ("mediaPosition", .string("42")), ("mediaPosition", .boolean(true)),
            ("mediaPositionTime", .double(-1)), ("mediaPositionTime", .double(1e12)), ("mediaPositionTime", .double(.nan)),
            ("mediaRate", .double(17)), ("mediaRate", .double(-1)), ("mediaRate", .double(.infinity)),
            ("mediaPlaying", .integer(1)), ("mediaPlaying", .string("true")),
            ("mediaLength", .double(-5)), ("mediaLength", .double(.infinity)), ("mediaLength", .string("600")),
            ("mediaPosition", .array([.double(1)])), ("mediaPosition", .dictionary(["a": .double(1)])),
        ]
        for (key, value) in hostile {
            var info = clip.userInfo
            info[key] = value
            #expect(throws: MediaActivity.DecodingError.invalid(key), "\(key) = \(value)") { _ = try PageMedia(userInfo: info) }
        }
    }

    @Test func willSaveMovesTheSampleToThePull() {
        #expect(clip.resampled(at: 1010) == PageMedia(position: 52, positionTime: 1010, rate: 1, playing: true, length: 600))
        #expect(clip.resampled(at: 5000).position == 600)
        var paused = clip
        paused.playing = false
        #expect(paused.resampled(at: 1010) == PageMedia(position: 42, positionTime: 1010, rate: 1, playing: false, length: 600))
        var fast = clip
        fast.rate = 2
        #expect(fast.resampled(at: 1010).position == 62)
        // A time before the sample gives the sample's position; a broken clock changes nothing.
        #expect(clip.resampled(at: 900).position == 42)
        #expect(clip.resampled(at: .nan) == clip)
        #expect(clip.resampled(at: -1) == clip)
    }

    /// The receiver's target is MediaActivity.seekTarget of the same sample, over a grid of skews,
    /// handoff durations and rates: bounded by the handoff whatever the other machine's clock says.
    @Test func theSeekTargetIsTheMediaActivitysOwn() {
        for rate in [0, 0.5, 1, 2] as [Double] {
            for playing in [true, false] {
                let media = PageMedia(position: 100, positionTime: 10_000, rate: rate, playing: playing, length: 3600)
                for skew in stride(from: -120.0, through: 120, by: 7.5) {
                    for handoff in [0, 0.3, 1, 4] as [Double] {
                        let askedAt = 10_000 + skew - 0.2
                        let now = askedAt + handoff
                        let target = media.seekTarget(now: now, askedAt: askedAt)
                        #expect(target == media.sample(url: "https://youtu.be/a").seekTarget(now: now, askedAt: askedAt))
                        #expect(target >= 100)
                        #expect(target <= 100 + (playing ? handoff * rate : 0) + 1e-9)
                    }
                }
            }
        }
    }
}
