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
}

/// Which publishers the user turned on: one file, $XDG_CONFIG_HOME/baton/publishers.conf, read by
/// every publisher before it publishes and written by `baton publishers`. All are off until the
/// user enables them (opt-in); a missing or unreadable file means all off.
public struct PublisherSettings: Equatable, Sendable {
    public var enabled: Set<Publisher> = []

    public init(enabled: Set<Publisher> = []) {
        self.enabled = enabled
    }

    public func isEnabled(_ publisher: Publisher) -> Bool { enabled.contains(publisher) }

    /// `name = on|off` lines; `#` comments, unknown names and malformed lines are skipped so that
    /// a newer Baton's file still works here.
    public init(parsing text: String) {
        for line in text.split(whereSeparator: \.isNewline) {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let parts = content.split(separator: "=", maxSplits: 1).map { String($0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
            guard parts.count == 2, let publisher = Publisher(rawValue: parts[0]) else { continue }
            switch parts[1] {
            case "on": enabled.insert(publisher)
            case "off": enabled.remove(publisher)
            default: continue
            }
        }
    }

    public var text: String {
        "# Baton publishers: change with `baton publishers enable|disable NAME` (docs/publishers.md).\n"
            + Publisher.allCases.map { "\($0.rawValue) = \(isEnabled($0) ? "on" : "off")\n" }.joined()
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

    public static func load(environment: [String: String]) -> PublisherSettings {
        guard let url = fileURL(environment: environment), let data = try? Data(contentsOf: url) else { return PublisherSettings() }
        return PublisherSettings(parsing: String(decoding: data, as: UTF8.self))
    }

    /// Writes the whole file atomically (a publisher reading it sees the old or the new one).
    public func save(environment: [String: String]) throws {
        guard let url = Self.fileURL(environment: environment) else { throw CocoaError(.fileNoSuchFile) }
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url, options: .atomic)
    }
}
