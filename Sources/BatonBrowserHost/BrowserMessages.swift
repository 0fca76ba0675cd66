// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCommandLine
import BatonCore
import BatonJSON
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The activity type of a web page handed off by the browser publisher (docs/publishers.md).
public let webBrowsingActivityType = "org.baton.web-browsing"

/// A page the extension reports as the user's current activity, already checked.
public struct BrowserPage: Equatable, Sendable {
    /// Titles are shown in a notification: longer ones are cut rather than refused.
    public static let maximumTitleLength = 256
    public static let maximumURLLength = 8192

    public var title: String
    public var url: URL
    /// Pixels from the top-left of the document; nil when the page did not allow reading it.
    public var scrollX: Double?
    public var scrollY: Double?
    /// The tab's playing (or most recently played) media element, sampled when the message came;
    /// nil without one, or when its numbers were not sane (docs/media.md, "Browser media").
    public var media: PageMedia?

    public init(title: String, url: URL, scrollX: Double?, scrollY: Double?, media: PageMedia? = nil) {
        self.title = title
        self.url = url
        self.scrollX = scrollX
        self.scrollY = scrollY
        self.media = media
    }

    /// What goes into the activity's userInfo: the scroll position and the media sample.
    public var userInfo: [String: PropertyValue] {
        var info = media?.userInfo ?? [:]
        if let scrollX { info["scrollX"] = .double(scrollX) }
        if let scrollY { info["scrollY"] = .double(scrollY) }
        return info
    }
}

/// Why a message from the extension was ignored (the host keeps running).
public enum BrowserMessageError: Error, Equatable, Sendable {
    case notJSON
    case unknownKind(String)
    case notAWebPage
    case urlTooLong
}

/// What the extension says (browser → host).
public enum BrowserMessage: Equatable, Sendable {
    /// The active tab of the focused, non-private window shows `page`.
    case current(BrowserPage)
    /// No non-private window has focus any more.
    case resign

    /// The message's members: `kind` a string; `title`, `url` strings, `scrollX`, `scrollY`,
    /// `mediaTime`, `mediaRate`, `mediaDuration` numbers and `mediaPlaying` a boolean, each absent
    /// or null when not known. Any other shape is not a message (`notJSON`).
    private struct Wire {
        var kind: String
        var title: String?
        var url: String?
        var scrollX: Double?
        var scrollY: Double?
        var mediaTime: Double?
        var mediaRate: Double?
        var mediaDuration: Double?
        var mediaPlaying: Bool?

        /// Read with the project's JSON parser (BatonJSON, the tools' options): UTF-8 only,
        /// nothing after the document, no leading zeros or raw control characters.
        init(_ bytes: [UInt8]) throws(BrowserMessageError) {
            guard let document = try? JSONValue.parse(bytes),
                  case .object = document, case .string(let kind)? = document["kind"] else { throw .notJSON }
            func string(_ key: String) throws(BrowserMessageError) -> String? {
                switch document[key] {
                case nil, .null?: return nil
                case .string(let value)?: return value
                default: throw .notJSON
                }
            }
            func number(_ key: String) throws(BrowserMessageError) -> Double? {
                switch document[key] {
                case nil, .null?: return nil
                case .integer(let value)?: return Double(value)
                case .double(let value)?: return value
                default: throw .notJSON
                }
            }
            func flag(_ key: String) throws(BrowserMessageError) -> Bool? {
                switch document[key] {
                case nil, .null?: return nil
                case .boolean(let value)?: return value
                default: throw .notJSON
                }
            }
            self.kind = kind
            title = try string("title")
            url = try string("url")
            scrollX = try number("scrollX")
            scrollY = try number("scrollY")
            mediaTime = try number("mediaTime")
            mediaRate = try number("mediaRate")
            mediaDuration = try number("mediaDuration")
            mediaPlaying = try flag("mediaPlaying")
        }

        /// The media sample, taken at `now` (this machine's clock: the extension reports at once).
        /// A rate left out is 1 and a playing state left out is paused.
        func media(at now: Double) -> PageMedia? {
            guard let mediaTime else { return nil }
            return PageMedia.checked(position: mediaTime, rate: mediaRate ?? 1, playing: mediaPlaying ?? false, duration: mediaDuration, sampledAt: now)
        }
    }

    /// Reads one message; `now` (seconds since 1970) stamps the media position it reports.
    public static func decode(_ bytes: [UInt8], now: Double = Date().timeIntervalSince1970) throws(BrowserMessageError) -> BrowserMessage {
        let wire = try Wire(bytes)
        switch wire.kind {
        case "resign":
            return .resign
        case "current":
            guard let text = wire.url else { throw .notAWebPage }
            guard text.utf8.count <= BrowserPage.maximumURLLength else { throw .urlTooLong }
            // Private schemes (file:, chrome:, about:, data:, extension pages) never leave the machine.
            guard isWebAddress(text), let url = URL(string: text) else { throw .notAWebPage }
            let title = String((wire.title ?? "").prefix(BrowserPage.maximumTitleLength))
            return .current(BrowserPage(title: title.isEmpty ? text : title, url: url, scrollX: validScroll(wire.scrollX),
                                        scrollY: validScroll(wire.scrollY), media: wire.media(at: now)))
        default:
            throw .unknownKind(String(wire.kind.prefix(64)))
        }
    }

    static func validScroll(_ value: Double?) -> Double? {
        guard let value, value.isFinite, value >= 0 else { return nil }
        return value
    }
}

/// What the host says (host → browser): open a page continued from another device.
public struct BrowserOpenRequest: Equatable, Sendable, Encodable {
    public var kind = "open"
    /// The page, with the media's start time where its site takes one (`MediaTimeURL`).
    public var url: String
    public var scrollX: Double?
    public var scrollY: Double?
    /// Where the page's media element is to be put once it loads, when the URL could not carry the
    /// time: the seek target in seconds, whether the source played and at what rate (the extension
    /// adds the page's load time while playing). Absent when there is no media or the URL has the time.
    public var mediaTime: Double?
    public var mediaPlaying: Bool?
    public var mediaRate: Double?

    public init(url: String, scrollX: Double?, scrollY: Double?, mediaTime: Double? = nil, mediaPlaying: Bool? = nil, mediaRate: Double? = nil) {
        self.url = url
        self.scrollX = scrollX
        self.scrollY = scrollY
        self.mediaTime = mediaTime
        self.mediaPlaying = mediaPlaying
        self.mediaRate = mediaRate
    }

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? Array(encoder.encode(self))) ?? []
    }
}

/// What the host says (host → browser) when the page it published was continued on another
/// device: pause the media of the tab last reported.
public struct BrowserPauseRequest: Equatable, Sendable, Encodable {
    public var kind = "pause"

    public init() {}

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? Array(encoder.encode(self))) ?? []
    }
}
