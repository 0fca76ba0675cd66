#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The inbox's room policy: a user's received documents are copies a handler was given, so the
/// inbox keeps what was received lately and drops what is old, instead of growing without end.
///
/// - A pull reserves its snapshot's whole size before it writes a byte; reservations of pulls in
///   progress count as held (concurrent pulls cannot pass the cap together).
/// - Partial files untouched for `partialLifetime` expire (a resume after that starts over).
/// - While the held bytes and the new snapshot exceed `capacity`, the oldest files (by modification
///   time) go: partials of no running pull, and documents received more than `deliveredGrace` ago
///   (a handler given the path may still be reading a newer one). When that cannot make room, the
///   pull is refused (`payloadTooLarge`) before anything is written, and nothing is removed.
/// Revision checks (§6.6) compare digests kept with the edit sessions, never these files: a
/// snapshot dropped here is only fetched again when it is wanted again.
extension DocumentInbox {
    public static let defaultCapacity: UInt64 = 8 << 30
    public static let partialLifetime: Int = 24 * 3600
    public static let deliveredGrace: Int = 3600

    /// Pulls in progress in this process: inbox directory → digest (hex) → bytes reserved.
    private static let reservations = Mutex<[String: [String: UInt64]]>([:])

    /// Makes room for a snapshot of `size` bytes and reserves it until the returned reservation is
    /// released (when the pull ends, whole or not).
    public func reserve(digest: [UInt8], size: UInt64, now: Int = Int(time(nil))) throws(SnapshotError) -> InboxReservation {
        let name = digest.hexString
        try Self.reservations.withLock { (all: inout [String: [String: UInt64]]) throws(SnapshotError) in
            let reserved = all[directory] ?? [:]
            var files = inboxFiles().filter { reserved[$0.digest] == nil && $0.digest != name }
            for file in files where file.isPartial && now - file.modified > Self.partialLifetime {
                unlink(directory + "/" + file.name)
            }
            files.removeAll { $0.isPartial && now - $0.modified > Self.partialLifetime }
            var held = files.reduce(UInt64(0)) { $0 + $1.size } + reserved.values.reduce(0, +)
            let evictable = files.filter { $0.isPartial || now - $0.modified > Self.deliveredGrace }.sorted { $0.modified < $1.modified }
            // The victims are chosen first: a pull that cannot fit anyway removes nothing.
            var victims: [InboxFile] = []
            var next = evictable.makeIterator()
            while held.addingReportingOverflow(size).partialValue > capacity || held.addingReportingOverflow(size).overflow {
                guard let oldest = next.next() else { throw .payloadTooLarge(limit: capacity, actual: held &+ size) }
                victims.append(oldest)
                held -= oldest.size
            }
            for victim in victims { unlink(directory + "/" + victim.name) }
            all[directory, default: [:]][name] = size
        }
        return InboxReservation(directory: directory, digest: name)
    }

    fileprivate static func release(directory: String, digest: String) {
        reservations.withLock { all in
            all[directory]?[digest] = nil
            if all[directory]?.isEmpty == true { all[directory] = nil }
        }
    }

    private struct InboxFile {
        var name: String
        var digest: String
        var isPartial: Bool
        var size: UInt64
        var modified: Int
    }

    /// The inbox's regular files named `<hex>.document` or `<hex>.partial` (links and others are no one's bytes).
    private func inboxFiles() -> [InboxFile] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var files: [InboxFile] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            let isPartial = name.hasSuffix(".partial")
            guard isPartial || name.hasSuffix(".document") else { continue }
            var status = stat()
            guard lstat(directory + "/" + name, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
            files.append(InboxFile(name: name, digest: String(name.prefix { $0 != "." }), isPartial: isPartial,
                                   size: UInt64(status.st_size), modified: status.st_mtim.tv_sec))
        }
        return files
    }
}

/// Room reserved in an inbox for one pull; `release()` when the pull ends (idempotent).
public final class InboxReservation: Sendable {
    private let directory: String
    private let digest: String
    private let released = Mutex(false)

    init(directory: String, digest: String) {
        self.directory = directory
        self.digest = digest
    }

    public func release() {
        guard released.withLock({ done in defer { done = true }; return !done }) else { return }
        DocumentInbox.release(directory: directory, digest: digest)
    }

    deinit { release() }
}
