// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import Foundation
import Testing

/// Counts what a watch reports, read from the test (one reader: an AsyncStream ends when its reader is cancelled).
private final class ChangeCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    private var reader: Task<Void, Never>?

    init(_ watch: RecentDocumentsWatch) {
        let changes = watch.changes
        reader = Task { for await _ in changes { self.lock.withLock { self.count += 1 } } }
    }

    var value: Int { lock.withLock { count } }

    /// Waits until more than `seen` changes were reported, up to `timeout`; the count then.
    func after(_ seen: Int, timeout: Duration = .seconds(10)) async -> Int {
        let deadline = ContinuousClock.now + timeout
        while value <= seen, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        return value
    }

    func stop() { reader?.cancel() }
}

/// How many of this process's inotify instances watch `directory` (by inode, from /proc/self/fdinfo):
/// other suites running at the same time may open instances of their own, never on this directory.
private func inotifyInstances(watching directory: URL) -> Int {
    var status = stat()
    guard stat(directory.path, &status) == 0 else { return 0 }
    let inode = " ino:" + String(status.st_ino, radix: 16) + " "
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return descriptors.filter { descriptor in
        guard (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + descriptor)) == "anon_inode:inotify",
              let info = try? String(contentsOfFile: "/proc/self/fdinfo/" + descriptor, encoding: .utf8) else { return false }
        return info.contains(inode)
    }.count
}

@Suite("BatonAgentTests: the recently-used list is watched, not polled", .serialized)
struct RecentDocumentsWatchTests {
    private let directory = FileManager.default.temporaryDirectory.appendingPathComponent("recent-watch-\(UUID().uuidString)")
    private var list: URL { directory.appendingPathComponent("share/recently-used.xbel") }

    @Test("GLib's rewrite (a temporary file renamed over the list) and an in-place write are seen; other files are not")
    func renameOverAndInPlaceWrites() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        // The directory does not exist yet: the watch makes it.
        let watch = try RecentDocumentsWatch(files: [list])
        #expect(FileManager.default.fileExists(atPath: list.deletingLastPathComponent().path))

        let counter = ChangeCounter(watch)
        defer { counter.stop() }
        // Nothing happens: nothing is reported (the old publisher checked once a second).
        try await Task.sleep(for: .milliseconds(1500))
        #expect(counter.value == 0)

        // What g_file_set_contents does: write a temporary sibling, then rename it over the list.
        let temporary = list.deletingLastPathComponent().appendingPathComponent("recently-used.xbel.4FJ2X1")
        try Data("<xbel/>".utf8).write(to: temporary)
        #expect(rename(temporary.path, list.path) == 0)
        // One change may come as two reports on a loaded machine (events split over two reads); the
        // publisher re-reads the list either way, so each step checks that the count moved, or not.
        let afterFirst = await counter.after(0)
        #expect(afterFirst >= 1)

        // A second rename-over: the watch is on the directory, so the replaced file does not end it.
        try await Task.sleep(for: .milliseconds(300))
        let beforeSecond = counter.value
        try Data("<xbel version=\"1.0\"/>".utf8).write(to: temporary)
        #expect(rename(temporary.path, list.path) == 0)
        #expect(await counter.after(beforeSecond) > beforeSecond)

        // Another program's file in the same directory is not the list.
        try await Task.sleep(for: .milliseconds(300))
        let beforeOther = counter.value
        try Data("x".utf8).write(to: list.deletingLastPathComponent().appendingPathComponent("mimeapps.list"))
        try await Task.sleep(for: .milliseconds(800))
        #expect(counter.value == beforeOther)

        // Written in place (KDE, or an editor): IN_CLOSE_WRITE.
        let handle = try FileHandle(forWritingTo: list)
        try handle.write(contentsOf: Data(" ".utf8))
        try handle.close()
        #expect(await counter.after(beforeOther) > beforeOther)
    }

    @Test("the watch ends its thread and its stream when released")
    func releasingEndsTheStream() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var watch: RecentDocumentsWatch? = try RecentDocumentsWatch(files: [list])
        let watched = list.deletingLastPathComponent()
        #expect(inotifyInstances(watching: watched) == 1)
        let changes = try #require(watch?.changes)
        watch = nil
        var iterator = changes.makeAsyncIterator()
        #expect(await iterator.next() == nil)
        // The thread closed its inotify instance (a per-user resource, 128 by default) before it ended the stream.
        #expect(inotifyInstances(watching: watched) == 0)
    }

    @Test func aDirectoryThatCannotBeMadeIsATypedError() {
        #expect(throws: RecentDocumentsWatch.Failure.self) {
            _ = try RecentDocumentsWatch(files: [URL(fileURLWithPath: "/proc/self/no-such-dir/recently-used.xbel")])
        }
    }
}
