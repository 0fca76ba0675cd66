// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The publishers that need nothing from app authors (docs/publishers.md).
public enum Publisher: String, CaseIterable, Sendable {
    /// The browser extension's host: the page you are reading.
    case browser
    /// The session agent following recently-used.xbel: the document you just opened.
    case recent
    /// The session agent's universal clipboard (docs/clipboard.md): copies offered to your other
    /// machines, theirs pasted here (`baton clipboard enable`).
    case clipboard
    /// The session agent following MPRIS players: what you are listening to or watching (docs/media.md).
    case media
}

/// Which publishers the user turned on: one file, $XDG_CONFIG_HOME/baton/publishers.conf, read by
/// every publisher before it publishes and written by `baton publishers`. All are off until the
/// user enables them (opt-in); a missing or unreadable file means all off.
public struct PublisherSettings: Equatable, Sendable {
    /// The file's key for the media types the recent publisher offers.
    public static let recentTypesKey = "recent-types"
    /// The file's key for whether the media publisher pauses the player when its media was continued elsewhere.
    public static let mediaPauseKey = "media-pause-source"
    /// The file's key for the largest local media file the media publisher sends, in MiB (docs/media.md).
    public static let mediaFileLimitKey = "media-file-limit"
    /// 1 GiB: the default of `media-file-limit`.
    public static let defaultMediaFileLimitMiB = 1024
    /// The most `media-file-limit` may say: 4 GiB, batond's cap for one document (docs/dbus-api.md).
    public static let maximumMediaFileLimitMiB = 4096

    public var enabled: Set<Publisher> = []
    /// The media types the recent publisher offers; nil: `defaultRecentMediaTypes` (no line in the file).
    public var recentMediaTypes: [String]?
    /// Whether the media publisher pauses its player once the media was continued on another machine (default on).
    public var mediaPausesSource = true
    /// The largest local file the media publisher attaches, in MiB (0: local files publish nothing).
    public var mediaFileLimitMiB = PublisherSettings.defaultMediaFileLimitMiB

    public init(enabled: Set<Publisher> = [], recentMediaTypes: [String]? = nil, mediaPausesSource: Bool = true,
                mediaFileLimitMiB: Int = PublisherSettings.defaultMediaFileLimitMiB) {
        self.enabled = enabled
        self.recentMediaTypes = recentMediaTypes
        self.mediaPausesSource = mediaPausesSource
        self.mediaFileLimitMiB = mediaFileLimitMiB
    }

    /// `mediaFileLimitMiB` in bytes.
    public var mediaFileLimitBytes: UInt64 { UInt64(max(0, mediaFileLimitMiB)) << 20 }

    public func isEnabled(_ publisher: Publisher) -> Bool { enabled.contains(publisher) }

    /// What the recent publisher offers: the chosen types, else the built-in default.
    public var effectiveRecentMediaTypes: Set<String> { recentMediaTypes.map(Set.init) ?? Self.defaultRecentMediaTypes }

    /// `name = on|off` lines and one `recent-types = a/b;c/d` line; `#` comments, unknown names and
    /// malformed lines (a recent-types line with any token that is not a media type included) are
    /// skipped so that a newer Baton's file still works here and a typo never narrows the set unseen.
    public init(parsing text: String) {
        for line in text.split(whereSeparator: \.isNewline) {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let parts = content.split(separator: "=", maxSplits: 1).map { Self.trimmed($0) }
            guard parts.count == 2 else { continue }
            if parts[0] == Self.recentTypesKey {
                if let types = try? MediaTypeList.parse([parts[1]]) { recentMediaTypes = types }
                continue
            }
            if parts[0] == Self.mediaPauseKey {
                if parts[1] == "on" || parts[1] == "off" { mediaPausesSource = parts[1] == "on" }
                continue
            }
            if parts[0] == Self.mediaFileLimitKey {
                // Whole MiB, 0 to 4096; anything else keeps the default.
                if parts[1].count <= 4, parts[1].allSatisfy(\.isASCII), let value = Int(parts[1]),
                   (0...Self.maximumMediaFileLimitMiB).contains(value) {
                    mediaFileLimitMiB = value
                }
                continue
            }
            guard let publisher = Publisher(rawValue: parts[0]) else { continue }
            switch parts[1] {
            case "on": enabled.insert(publisher)
            case "off": enabled.remove(publisher)
            default: continue
            }
        }
    }

    public var text: String {
        let types = recentMediaTypes.map { "\(Self.recentTypesKey) = \($0.joined(separator: ";"))\n" }
            ?? "# \(Self.recentTypesKey) = TYPE;TYPE... (absent: the built-in default; `baton publishers recent-types`)\n"
        return "# Baton publishers: change with `baton publishers enable|disable NAME` (docs/publishers.md).\n"
            + Publisher.allCases.map { "\($0.rawValue) = \(isEnabled($0) ? "on" : "off")\n" }.joined() + types
            + (mediaPausesSource ? "" : "\(Self.mediaPauseKey) = off\n")
            + (mediaFileLimitMiB == Self.defaultMediaFileLimitMiB ? "" : "\(Self.mediaFileLimitKey) = \(mediaFileLimitMiB)\n")
    }

    /// $XDG_CONFIG_HOME/baton/publishers.conf, ~/.config when XDG_CONFIG_HOME is unset or relative.
    public static func fileURL(environment: [String: String]) -> URL? {
        let base: String
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            base = config
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = home + "/.config"
        } else {
            return nil
        }
        return URL(fileURLWithPath: base + "/baton/publishers.conf")
    }

    /// The most of publishers.conf that is read; a larger file counts as unreadable (all off).
    public static let maximumFileBytes = 65_536

    /// The file's settings; all off when it is missing or unreadable: no regular file (a FIFO or a
    /// device is neither waited on nor read) or over `maximumFileBytes`.
    public static func load(environment: [String: String]) -> PublisherSettings {
        guard let url = fileURL(environment: environment), let bytes = SmallFile.read(url.path, limit: maximumFileBytes) else {
            return PublisherSettings()
        }
        return PublisherSettings(parsing: String(decoding: bytes, as: UTF8.self))
    }

    /// Writes the whole file atomically (a publisher reading it sees the old or the new one).
    public func save(environment: [String: String]) throws {
        guard let url = Self.fileURL(environment: environment) else { throw CocoaError(.fileNoSuchFile) }
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url, options: .atomic)
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
