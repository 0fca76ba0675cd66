// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCommandLine
import BatonSystem
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Wakes when one of the given files is written or replaced, and never otherwise (a desktop agent
/// must not wake periodically). Each file's directory is watched with inotify for the file's name:
/// a watch on the file itself would be lost when GTK replaces it (GLib writes a temporary file and
/// renames it over the list), so a rename shows up as IN_MOVED_TO and an in-place write as
/// IN_CLOSE_WRITE. One thread blocks in poll(2) with no timeout until events or the end.
public final class RecentDocumentsWatch: Sendable {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case cannotWatch(path: String, errno: Int32)
        public var description: String {
            switch self {
            case .cannotWatch(let path, let code): "cannot watch \(path): \(String(cString: strerror(code)))"
            }
        }
    }

    /// One element per batch of events that touched a watched file; changes coalesce while unread.
    public let changes: AsyncStream<Void>
    /// The write end of the pipe the thread also polls: closing it (deinit) ends the thread.
    private let stopWriter: FileDescriptor

    /// Creates the files' directories when missing (mode 0700, as GLib would), so a fresh account's
    /// first recent list is seen too.
    public init(files: [URL]) throws(Failure) {
        let created = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard created >= 0 else { throw .cannotWatch(path: "inotify", errno: errno) }
        let inotify = FileDescriptor(taking: created)
        var directories = WatchedDirectories(files: files)
        if let failure = directories.addAll(to: inotify.rawValue) { throw failure }
        let pipe: FileDescriptor.Pipe
        do throws(Errno) { pipe = try FileDescriptor.pipe() } catch { throw .cannotWatch(path: "pipe", errno: error.code) }
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        changes = stream
        stopWriter = pipe.writer
        // The thread owns these two from here on.
        let inotifyNumber = inotify.release(), stopReaderNumber = pipe.reader.release()
        let watched = directories
        DetachedThread.start {
            Self.follow(inotify: FileDescriptor(taking: inotifyNumber), stopReader: FileDescriptor(taking: stopReaderNumber),
                        directories: watched, continuation: continuation)
        }
    }


    private static func follow(inotify: consuming FileDescriptor, stopReader: consuming FileDescriptor, directories: WatchedDirectories,
                               continuation: AsyncStream<Void>.Continuation) {
        watch(inotify: inotify, stopReader: stopReader, directories: directories, continuation: continuation)
        inotify.close()
        stopReader.close()
        continuation.finish()
    }

    private static func watch(inotify: borrowing FileDescriptor, stopReader: borrowing FileDescriptor, directories: WatchedDirectories,
                              continuation: AsyncStream<Void>.Continuation) {
        var directories = directories
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            var descriptors = [pollfd(fd: inotify.rawValue, events: Int16(POLLIN), revents: 0),
                               pollfd(fd: stopReader.rawValue, events: Int16(POLLIN), revents: 0)]
            let ready = retryingInterrupts { poll(&descriptors, 2, -1) }
            guard ready > 0, descriptors[1].revents == 0 else { return }
            var touched = false
            while true {
                // Nonblocking: EAGAIN once the queue is drained.
                let count = buffer.withUnsafeMutableBytes { raw in (try? inotify.read(into: raw)) ?? 0 }
                guard count > 0 else { break }
                touched = buffer.withUnsafeBytes { directories.handle(events: UnsafeRawBufferPointer(rebasing: $0[0..<count]), inotify: inotify.rawValue) } || touched
            }
            if touched { continuation.yield() }
        }
    }
}

/// The directories watched and, for each, the file names that matter.
private struct WatchedDirectories: Sendable {
    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR)
    private var names: [String: Set<String>] = [:]
    private var watches: [Int32: String] = [:]

    init(files: [URL]) {
        for file in files {
            names[file.deletingLastPathComponent().path, default: []].insert(file.lastPathComponent)
        }
    }

    mutating func addAll(to inotify: Int32) -> RecentDocumentsWatch.Failure? {
        for directory in names.keys.sorted() {
            if let failure = add(directory, to: inotify) { return failure }
        }
        return nil
    }

    private mutating func add(_ directory: String, to inotify: Int32) -> RecentDocumentsWatch.Failure? {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let watch = inotify_add_watch(inotify, directory, Self.mask)
        guard watch >= 0 else { return .cannotWatch(path: directory, errno: errno) }
        watches[watch] = directory
        return nil
    }

    /// Whether a watched file was written or replaced. A directory that went away (IN_IGNORED) is
    /// made and watched again, and counts as a change: its file is gone or new.
    mutating func handle(events: UnsafeRawBufferPointer, inotify: Int32) -> Bool {
        var touched = false
        var offset = 0
        let header = 16  // struct inotify_event: wd, mask, cookie, len (4 bytes each, native order), then the name
        while offset + header <= events.count {
            let watch = events.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = events.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(events.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameBytes = events[(offset + header)..<min(offset + header + length, events.count)]
            offset += header + length
            // The kernel's queue overflowed: events were dropped, one of them may have been ours.
            if mask & UInt32(IN_Q_OVERFLOW) != 0 { touched = true }
            guard let directory = watches[watch] else { continue }
            if mask & UInt32(IN_IGNORED) != 0 {
                watches[watch] = nil
                _ = add(directory, to: inotify)
                touched = true
                continue
            }
            let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
            if names[directory]?.contains(name) == true { touched = true }
        }
        return touched
    }
}
