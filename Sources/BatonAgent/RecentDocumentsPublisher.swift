import BatonAPI
import BatonClient
import BatonPublishers
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Offers the local document the user just opened as the current activity, with the file
/// attached as a snapshot (docs/publishers.md). Only while publishers.conf says `recent = on`.
public actor RecentDocumentsPublisher {
    public static let activityType = "org.baton.recent-document"
    private let daemon: BatonConnection
    private let environment: [String: String]
    private let filter: RecentDocumentFilter
    private let logger: any AgentLog
    /// Documents used before this are never offered (the agent starting offers nothing).
    private var lastOffered: Date?
    private var lastSeenChange: (Date, Int)?
    private var activity: UserActivity?

    public init(daemon: BatonConnection, environment: [String: String], filter: RecentDocumentFilter = RecentDocumentFilter(),
                logger: any AgentLog, since start: Date = Date()) {
        self.daemon = daemon
        self.environment = environment
        self.filter = filter
        self.logger = logger
        self.lastOffered = start
    }

    /// Checks the list once a second until cancelled. A stat per second is cheaper than keeping a
    /// watch that GTK's atomic rewrite (rename over the file) would break.
    public func run(interval: Duration = .seconds(1)) async {
        while !Task.isCancelled {
            await checkOnce()
            try? await Task.sleep(for: interval)
        }
    }

    /// Reads the list if it changed and offers the newest acceptable document, if any is new.
    public func checkOnce() async {
        guard PublisherSettings.load(environment: environment).isEnabled(.recent) else {
            await activity?.invalidate()
            activity = nil
            return
        }
        guard let list = RecentDocumentsList.fileURL(environment: environment),
              let attributes = try? FileManager.default.attributesOfItem(atPath: list.path),
              let modified = attributes[.modificationDate] as? Date else { return }
        let size = (attributes[.size] as? Int) ?? 0
        if let (seenDate, seenSize) = lastSeenChange, seenDate == modified, seenSize == size { return }
        lastSeenChange = (modified, size)
        guard let data = try? Data(contentsOf: list),
              let document = filter.newest(in: RecentDocumentsList.parse(data), after: lastOffered) else { return }
        lastOffered = document.lastUsed
        await offer(document)
    }

    private func offer(_ document: RecentDocument) async {
        // No symlinks (the filter judged this path, not a link's target) and regular files only.
        let descriptor = open(document.url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else {
            logger.log("recent document \(document.displayName) cannot be opened (errno \(errno))")
            return
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return }

        await activity?.invalidate()
        let activity = daemon.makeActivity(type: Self.activityType)
        // The display name only: the path stays on this machine.
        activity.title = document.displayName
        self.activity = activity
        do {
            let path = try await activity.publish()
            _ = try await daemon.dbus.call(destination: daemon.busName, path: path, interface: BatonInterface.activity,
                                           method: "AttachDocument",
                                           arguments: [.unixFD(descriptor), .string(document.mediaType), .string(UUID().uuidString)])
            try await activity.becomeCurrent()
        } catch {
            logger.log("offering the recent document \(document.displayName) failed: \(error)")
        }
    }
}
