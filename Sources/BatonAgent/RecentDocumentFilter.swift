// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Which recently used files may be offered as the current activity. Only local documents of the
/// chosen media types, and nothing from places the user would not expect to leave the machine:
/// hidden (dot) files and directories, removable media, temporary and runtime directories.
public struct RecentDocumentFilter: Sendable {
    /// The built-in set, used while publishers.conf names none (`recent-types`, docs/publishers.md).
    public static let defaultMediaTypes: Set<String> = PublisherSettings.defaultRecentMediaTypes

    /// Removable media, mounts and volatile or system places; a path inside any is never offered.
    public static let defaultExcludedRoots = ["/media", "/run", "/mnt", "/tmp", "/var/tmp", "/dev", "/proc", "/sys"]

    public var mediaTypes: Set<String>
    public var excludedRoots: [String]

    public init(mediaTypes: Set<String> = RecentDocumentFilter.defaultMediaTypes,
                excludedRoots: [String] = RecentDocumentFilter.defaultExcludedRoots) {
        self.mediaTypes = mediaTypes
        self.excludedRoots = excludedRoots
    }

    public func accepts(_ document: RecentDocument) -> Bool {
        guard document.url.isFileURL, mediaTypes.contains(document.mediaType.lowercased()) else { return false }
        let path = document.url.standardizedFileURL.path
        guard path.hasPrefix("/") else { return false }
        if excludedRoots.contains(where: { path == $0 || path.hasPrefix($0 + "/") }) { return false }
        let components = path.split(separator: "/")
        // Hidden files and anything under a dot-directory (~/.cache, ~/.local/share/Trash, ~/.ssh ...).
        return !components.contains { $0.hasPrefix(".") }
    }

    /// The document to offer now: the most recently used accepted one, if it is newer than
    /// `after` (the last one offered), so rewriting the list for other reasons offers nothing.
    public func newest(in documents: [RecentDocument], after: Date?) -> RecentDocument? {
        guard let newest = documents.filter(accepts).max(by: { $0.lastUsed < $1.lastUsed }) else { return nil }
        if let after, newest.lastUsed <= after { return nil }
        return newest
    }
}
