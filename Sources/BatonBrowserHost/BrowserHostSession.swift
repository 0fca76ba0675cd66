// SPDX-License-Identifier: GPL-2.0-or-later
import BatonClient
import BatonCore
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Keeps one activity in step with what the extension reports; the host's only state.
public actor BrowserHostSession {
    public typealias Log = @Sendable (String) -> Void
    private let connection: BatonConnection
    private let log: Log
    /// Asked before every page: the user may turn the publisher off while the browser runs.
    private let isEnabled: @Sendable () -> Bool
    private var activity: UserActivity?
    /// Held here: an activity keeps its delegate weakly.
    private let source: PageSource
    /// This machine's wall clock, seconds since 1970: stamps media samples.
    private let clock: @Sendable () -> Double

    /// `pauseMedia` is called when a page whose media played was continued on another device (the
    /// program asks the extension to pause it, unless publishers.conf says `media-pause-source = off`).
    public init(connection: BatonConnection, isEnabled: @escaping @Sendable () -> Bool, log: @escaping Log,
                clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
                pauseMedia: @escaping @Sendable () -> Void = {}) {
        self.connection = connection
        self.isEnabled = isEnabled
        self.log = log
        self.clock = clock
        source = PageSource(log: log, clock: clock, pauseMedia: pauseMedia)
    }

    public func handle(_ bytes: [UInt8]) async {
        let message: BrowserMessage
        do { message = try BrowserMessage.decode(bytes, now: clock()) } catch {
            log("ignored a message from the extension: \(error)")
            return
        }
        await handle(message)
    }

    public func handle(_ message: BrowserMessage) async {
        do {
            switch message {
            case .current(let page):
                guard isEnabled() else {
                    // Turned off: whatever was published goes, and nothing new is.
                    await activity?.invalidate()
                    activity = nil
                    return
                }
                let activity = self.activity ?? connection.makeActivity(type: webBrowsingActivityType)
                activity.delegate = source
                self.activity = activity
                source.show(page, in: activity)
                try await activity.becomeCurrent()
            case .resign:
                try await activity?.resignCurrent()
            }
        } catch {
            log("daemon refused the page: \(error)")
        }
    }

    /// The browser closed (stdin EOF): the activity ends with it.
    public func browserClosed() async {
        await activity?.invalidate()
        activity = nil
    }

    /// What to ask the extension to open for an activity continued from another device. `now` is
    /// this machine's clock and `askedAt` its clock when the handoff began (WillContinue): the media
    /// starts at the source's position at the pull plus the handoff's time (`PageMedia.seekTarget`),
    /// in the URL where the site takes a time, else in the request for the extension to seek.
    /// Media values that do not check out are logged and left out: the page still opens.
    public static func openRequest(for continued: ContinuedActivity, now: Double, askedAt: Double,
                                   log: Log = { _ in }) -> BrowserOpenRequest? {
        guard let page = continued.webpageURL?.absoluteString, isWebAddress(page) else { return nil }
        func scroll(_ key: String) -> Double? {
            switch continued.userInfo[key] {
            case .double(let value)?: return BrowserMessage.validScroll(value)
            case .integer(let value)?: return BrowserMessage.validScroll(Double(value))
            default: return nil
            }
        }
        var request = BrowserOpenRequest(url: page, scrollX: scroll("scrollX"), scrollY: scroll("scrollY"))
        let media: PageMedia?
        do { media = try PageMedia(userInfo: continued.userInfo) } catch {
            log("the page's media position cannot be read (\(error)); opening the page without it")
            return request
        }
        guard let media else { return request }
        let target = media.seekTarget(now: now, askedAt: askedAt)
        if let timed = MediaTimeURL.url(page, at: target) {
            request.url = timed
        } else {
            request.mediaTime = target
            request.mediaPlaying = media.playing
            request.mediaRate = media.rate
        }
        return request
    }
}

/// The activity's source side: keeps the page last shown so that WillSave (asked just before the
/// page leaves for another machine) moves its media sample to that moment, and says in the
/// browser's log when the page was continued on another device (WasContinued): the page stays
/// open here, as on Apple's devices, and its media is paused (`pauseMedia`).
final class PageSource: UserActivityDelegate {
    private let log: BrowserHostSession.Log
    private let clock: @Sendable () -> Double
    private let pauseMedia: @Sendable () -> Void
    private let page = Mutex<BrowserPage?>(nil)

    init(log: @escaping BrowserHostSession.Log, clock: @escaping @Sendable () -> Double, pauseMedia: @escaping @Sendable () -> Void) {
        self.log = log
        self.clock = clock
        self.pauseMedia = pauseMedia
    }

    /// Fills `activity` with `page`: title, URL (with the media's time where the site takes one,
    /// so a machine without the extension opens it there too) and userInfo. A page with media
    /// asks for WillSave, so the position leaves fresh.
    func show(_ page: BrowserPage, in activity: UserActivity) {
        self.page.withLock { $0 = page }
        Self.fill(activity, with: page)
    }

    static func fill(_ activity: UserActivity, with page: BrowserPage) {
        activity.title = page.title
        activity.webpageURL = page.media.flatMap { media in
            MediaTimeURL.url(page.url.absoluteString, at: media.position).flatMap(URL.init(string:))
        } ?? page.url
        activity.userInfo = page.userInfo
        activity.needsSave = page.media != nil
    }

    func userActivityWillSave(_ activity: UserActivity) async {
        guard var page = page.withLock({ $0 }), let media = page.media else { return }
        page.media = media.resampled(at: clock())
        Self.fill(activity, with: page)
    }

    func userActivityWasContinued(_ activity: UserActivity, on device: String) async {
        log("the page was continued on \(device)")
        if page.withLock({ $0?.media?.playing == true }) { pauseMedia() }
    }
}
