// SPDX-License-Identifier: GPL-2.0-or-later
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

    /// Pulls in progress in this process: inbox directory → digest (hex) → each pull's reservation
    /// (its number → bytes). Each pull's own entry: a second pull of a digest that reserves and then
    /// finds the partial file taken must not, when it lets go, uncount the first (whose partial file
    /// would then be held at its current size and be evictable while it is written).
    private static let reservations = Mutex<(next: UInt64, all: [String: [String: [UInt64: UInt64]]])>((0, [:]))

    /// Makes room for a snapshot of `size` bytes and reserves it until the returned reservation is
    /// released (when the pull ends, whole or not).
    public func reserve(digest: [UInt8], size: UInt64, now: Int = Int(time(nil))) throws(SnapshotError) -> InboxReservation {
        let name = digest.hexString
        let number = try Self.reservations.withLock { (state: inout (next: UInt64, all: [String: [String: [UInt64: UInt64]]])) throws(SnapshotError) -> UInt64 in
            // Pulls of one digest write one file: it counts once, at the largest size reserved for it
            // (a second pull of a digest, which will wait for the first, asks for no more room).
            var reserved = (state.all[directory] ?? [:]).mapValues { $0.values.max() ?? 0 }
            let wanted = max(size, reserved.removeValue(forKey: name) ?? 0)
            var files = inboxFiles().filter { reserved[$0.digest] == nil && $0.digest != name }
            // A partial file locked by a pull (another process's, or one whose reservation is not
            // known here) is being written: it counts, but is neither expired nor evicted.
            let locked = Set(files.filter { $0.isPartial && pullRunning(hexDigest: $0.digest) }.map(\.name))
            let expired = { (file: InboxFile) in file.isPartial && now - file.modified > Self.partialLifetime && !locked.contains(file.name) }
            for file in files where expired(file) { unlink(directory + "/" + file.name) }
            files.removeAll(where: expired)
            var held = files.reduce(UInt64(0)) { $0 + $1.size } + reserved.values.reduce(0, +)
            let evictable = files.filter { !locked.contains($0.name) && ($0.isPartial || now - $0.modified > Self.deliveredGrace) }
                .sorted { $0.modified < $1.modified }
            // The victims are chosen first: a pull that cannot fit anyway removes nothing.
            var victims: [InboxFile] = []
            var next = evictable.makeIterator()
            while held.addingReportingOverflow(wanted).partialValue > capacity || held.addingReportingOverflow(wanted).overflow {
                guard let oldest = next.next() else { throw .payloadTooLarge(limit: capacity, actual: held &+ wanted) }
                victims.append(oldest)
                held -= oldest.size
            }
            for victim in victims { unlink(directory + "/" + victim.name) }
            state.next += 1
            state.all[directory, default: [:]][name, default: [:]][state.next] = size
            return state.next
        }
        return InboxReservation(directory: directory, digest: name, number: number)
    }

    fileprivate static func release(directory: String, digest: String, number: UInt64) {
        reservations.withLock { state in
            state.all[directory]?[digest]?[number] = nil
            if state.all[directory]?[digest]?.isEmpty == true { state.all[directory]?[digest] = nil }
            if state.all[directory]?.isEmpty == true { state.all[directory] = nil }
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
    private let number: UInt64
    private let released = Mutex(false)

    init(directory: String, digest: String, number: UInt64) {
        self.directory = directory
        self.digest = digest
        self.number = number
    }

    public func release() {
        guard released.withLock({ done in defer { done = true }; return !done }) else { return }
        DocumentInbox.release(directory: directory, digest: digest, number: number)
    }

    deinit { release() }
}
