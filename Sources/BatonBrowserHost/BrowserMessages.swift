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

    public init(title: String, url: URL, scrollX: Double?, scrollY: Double?) {
        self.title = title
        self.url = url
        self.scrollX = scrollX
        self.scrollY = scrollY
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

    /// The message's members: `kind` a string; `title`, `url` strings and `scrollX`, `scrollY`
    /// numbers, each absent or null when not known. Any other shape is not a message (`notJSON`).
    private struct Wire {
        var kind: String
        var title: String?
        var url: String?
        var scrollX: Double?
        var scrollY: Double?

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
            self.kind = kind
            title = try string("title")
            url = try string("url")
            scrollX = try number("scrollX")
            scrollY = try number("scrollY")
        }
    }

    public static func decode(_ bytes: [UInt8]) throws(BrowserMessageError) -> BrowserMessage {
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
            return .current(BrowserPage(title: title.isEmpty ? text : title, url: url,
                                        scrollX: validScroll(wire.scrollX), scrollY: validScroll(wire.scrollY)))
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
    public var url: String
    public var scrollX: Double?
    public var scrollY: Double?

    public init(url: String, scrollX: Double?, scrollY: Double?) {
        self.url = url
        self.scrollX = scrollX
        self.scrollY = scrollY
    }

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? Array(encoder.encode(self))) ?? []
    }
}
