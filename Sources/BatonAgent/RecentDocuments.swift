// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One entry of the freedesktop recently-used list (~/.local/share/recently-used.xbel), as
/// Gtk.RecentManager and KDE write it.
public struct RecentDocument: Equatable, Sendable {
    public var url: URL
    public var mediaType: String
    /// The latest of the entry's visited, modified and added times.
    public var lastUsed: Date

    public init(url: URL, mediaType: String, lastUsed: Date) {
        self.url = url
        self.mediaType = mediaType
        self.lastUsed = lastUsed
    }

    /// The title the activity gets: the file's name, never its directory.
    public var displayName: String { url.lastPathComponent }
}

/// Reads recently-used.xbel. A damaged file gives the entries read before the damage: the list
/// is rewritten by other programs while we read it, and a half-written file must not stop the agent.
public enum RecentDocumentsList {
    public static func parse(_ data: Data) -> [RecentDocument] {
        var reader = XBELReader()
        var scanner = XMLTagScanner(Array(data))
        while let tag = scanner.next() { reader.take(tag) }
        return reader.documents
    }

    /// $XDG_DATA_HOME/recently-used.xbel, ~/.local/share when XDG_DATA_HOME is unset or relative.
    public static func fileURL(environment: [String: String]) -> URL? {
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") { return URL(fileURLWithPath: data + "/recently-used.xbel") }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return URL(fileURLWithPath: home + "/.local/share/recently-used.xbel")
    }

    /// The list's ISO 8601 times, with or without fractional seconds.
    public static func date(_ text: String?) -> Date? {
        guard let text else { return nil }
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }
}

/// What of the list's elements makes a document: a bookmark's href and times, its media type.
private struct XBELReader {
    var documents: [RecentDocument] = []
    private var current: (url: URL, lastUsed: Date)?
    private var mediaType: String?

    mutating func take(_ tag: XMLTag) {
        if tag.opens { start(tag.name, attributes: tag.attributes) }
        if tag.closes { end(tag.name) }
    }

    private mutating func start(_ name: String, attributes: [String: String]) {
        switch name {
        case "bookmark":
            mediaType = nil
            guard let href = attributes["href"], let url = URL(string: href), url.isFileURL else {
                current = nil
                return
            }
            let times = ["visited", "modified", "added"].compactMap { RecentDocumentsList.date(attributes[$0]) }
            current = (url, times.max() ?? .distantPast)
        case "mime:mime-type", "mime-type":
            if current != nil { mediaType = attributes["type"] }
        default:
            break
        }
    }

    private mutating func end(_ name: String) {
        guard name == "bookmark", let current else { return }
        documents.append(RecentDocument(url: current.url, mediaType: mediaType ?? "application/octet-stream", lastUsed: current.lastUsed))
        self.current = nil
    }
}
