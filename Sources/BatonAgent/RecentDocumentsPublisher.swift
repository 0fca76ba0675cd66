// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonPublishers
import BatonSystem
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Offers the local document the user just opened as the current activity, with the file
/// attached as a snapshot (docs/publishers.md). Only while publishers.conf says `recent = on`, and
/// only documents of its `recent-types` (else the filter's default set).
public actor RecentDocumentsPublisher {
    public static let activityType = "org.baton.recent-document"
    private let daemon: BatonConnection
    private let environment: [String: String]
    private let filter: RecentDocumentFilter
    private let logger: any AgentLog
    /// Documents used before this are never offered (the agent starting offers nothing).
    private var lastOffered: Date?
    private var activity: UserActivity?
    private var follower: Task<Void, Never>?
    /// How many times the list or publishers.conf changed since `start` (no change: no wakeup).
    public private(set) var changesHandled = 0

    public init(daemon: BatonConnection, environment: [String: String], filter: RecentDocumentFilter = RecentDocumentFilter(),
                logger: any AgentLog, since start: Date = Date()) {
        self.daemon = daemon
        self.environment = environment
        self.filter = filter
        self.logger = logger
        self.lastOffered = start
    }

    /// Follows the list and publishers.conf until `stop`; returns once the watch is in place. Nothing
    /// runs between changes: no timer, no polling (`RecentDocumentsWatch`).
    public func start() throws(RecentDocumentsWatch.Failure) {
        let files = [RecentDocumentsList.fileURL(environment: environment), PublisherSettings.fileURL(environment: environment)]
        let watch = try RecentDocumentsWatch(files: files.compactMap { $0 })
        follower?.cancel()
        // Holds the publisher until `stop`: the agent keeps no other reference to it.
        follower = Task {
            for await _ in watch.changes { await self.changed() }
            withExtendedLifetime(watch) {}
        }
    }

    public func stop() {
        follower?.cancel()
        follower = nil
    }

    private func changed() async {
        changesHandled += 1
        await checkOnce()
    }

    /// Reads the settings and the list and offers the newest acceptable document, if one is new.
    /// Turning the publisher off invalidates what it offered.
    public func checkOnce() async {
        let settings = PublisherSettings.load(environment: environment)
        guard settings.isEnabled(.recent) else {
            await activity?.invalidate()
            activity = nil
            return
        }
        var filter = self.filter
        if let chosen = settings.recentMediaTypes { filter.mediaTypes = Set(chosen) }
        guard let list = RecentDocumentsList.fileURL(environment: environment), let data = try? Data(contentsOf: list),
              let document = filter.newest(in: RecentDocumentsList.parse(data), after: lastOffered) else { return }
        lastOffered = document.lastUsed
        await offer(document)
    }

    private func offer(_ document: RecentDocument) async {
        // No symlinks (the filter judged this path, not a link's target) and regular files only.
        let file: FileDescriptor
        do throws(Errno) { file = try FileDescriptor.open(document.url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) } catch {
            logger.log("recent document \(document.displayName) cannot be opened (errno \(error.code))")
            return
        }
        var status = stat()
        guard fstat(file.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return }

        await activity?.invalidate()
        let activity = daemon.makeActivity(type: Self.activityType)
        // The display name only: the path stays on this machine.
        activity.title = document.displayName
        self.activity = activity
        do {
            try await activity.attachDocument(descriptor: file.rawValue, mediaType: document.mediaType, documentID: UUID().uuidString)
            try await activity.becomeCurrent()
        } catch {
            logger.log("offering the recent document \(document.displayName) failed: \(error)")
        }
    }
}
