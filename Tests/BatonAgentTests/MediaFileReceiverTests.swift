// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import BatonClient
import BatonCore
import BatonDBus
import BatonSystem
import BatonTestBus
import Foundation
import Testing

/// A local media file on both sides (docs/media.md, "What travels"): what the publisher agrees to
/// send (a regular file, not a symlink, a FIFO or a device, within the limit) and what the receiver
/// does with the document (saved safely, opened by a media player only).
@Suite("BatonAgentTests: local media files", .serialized)
struct MediaFileReceiverTests {
    static func scratch() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-file-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    static func bytes(_ file: consuming FileDescriptor) throws -> [UInt8] {
        try file.readAll()
    }

    @Test func aRegularFileWithinTheLimitIsOpenedAndNothingElseIs() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let song = directory.appendingPathComponent("song.ogg")
        try Data([1, 2, 3, 4, 5]).write(to: song)
        #expect(try Self.bytes(MediaLocalFile.open(path: song.path, limit: 5)) == [1, 2, 3, 4, 5])
        #expect(try Self.bytes(MediaLocalFile.open(url: URL(fileURLWithPath: song.path).absoluteString, limit: 1 << 30)) == [1, 2, 3, 4, 5])
        #expect(throws: MediaLocalFile.Refusal.tooLarge(size: 5, limit: 4)) { _ = try MediaLocalFile.open(path: song.path, limit: 4) }
        // A symlink to it (the player's URL naming the link): refused, the link is never followed.
        let link = directory.appendingPathComponent("link.ogg")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: song)
        #expect(throws: MediaLocalFile.Refusal.cannotOpen(errno: ELOOP)) { _ = try MediaLocalFile.open(path: link.path, limit: 1 << 30) }
        #expect(MediaLocalFile.Refusal.cannotOpen(errno: ELOOP).description.contains("symbolic link"))
        // A FIFO with no writer: refused at once (the open does not wait), as are a device and a directory.
        let fifo = directory.appendingPathComponent("fifo.ogg")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        #expect(throws: MediaLocalFile.Refusal.notRegularFile) { _ = try MediaLocalFile.open(path: fifo.path, limit: 1 << 30) }
        #expect(throws: MediaLocalFile.Refusal.notRegularFile) { _ = try MediaLocalFile.open(path: "/dev/zero", limit: 1 << 30) }
        #expect(throws: MediaLocalFile.Refusal.notRegularFile) { _ = try MediaLocalFile.open(path: directory.path, limit: 1 << 30) }
        #expect(throws: MediaLocalFile.Refusal.cannotOpen(errno: ENOENT)) { _ = try MediaLocalFile.open(path: directory.path + "/none", limit: 1) }
        #expect(throws: MediaLocalFile.Refusal.notLocal) { _ = try MediaLocalFile.open(url: "file://nas/song.ogg", limit: 1 << 30) }
        #expect(MediaLocalFile.Refusal.tooLarge(size: 3 << 30, limit: 1 << 30).description.contains("3072 MiB, over the 1024 MiB limit"))
    }

    @Test func theMediaTypeComesFromTheName() {
        #expect(MediaLocalFile.mediaType(forName: "talk.wav").hasPrefix("audio/"))
        #expect(MediaLocalFile.mediaType(forName: "film.mkv") == "video/x-matroska")
        #expect(!MediaLocalFile.mediaType(forName: "notes").isEmpty)
    }

    static func fileInfo(_ name: String) -> [String: PropertyValue] {
        ["fileName": .string(name), "position": .double(30), "positionTime": .double(Date().timeIntervalSince1970), "rate": .double(1),
         "playing": .boolean(true), "player": .string("mpv")]
    }

    static func document(_ bytes: [UInt8], in directory: URL, type: String = "audio/x-wav") throws -> ContinuedDocument {
        let source = directory.appendingPathComponent("store-\(UUID().uuidString)")
        try Data(bytes).write(to: source)
        let file = try FileDescriptor.open(source.path, O_RDONLY | O_CLOEXEC)
        return ContinuedDocument(id: "d", mediaType: type, size: UInt64(bytes.count), digest: "", descriptor: file.release())
    }

    /// The receiver saves the document in its received directory under the file's name (never
    /// replacing a file: "talk (2).wav"), 0600, with the same bytes, and opens `file://` the copy
    /// with the desktop's default player for its type (here no player runs and the source's is not
    /// installed). A type that is no audio or video is opened by nothing; the copy stays, logged.
    @Test func aReceivedFileIsSavedAndOpenedByTheDefaultPlayerOnly() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let session = try DBusConnection(bus: .address(bus.address))
        defer { session.close() }
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let received = directory.appendingPathComponent("received")
        try FileManager.default.createDirectory(at: received, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: received.appendingPathComponent("talk.wav"))
        let desktop = RecordingMediaDesktop(defaultPlayer: "org.example.Player.desktop")
        let log = RecordingLog()
        let receiver = MediaReceiver(session: session, desktop: desktop, logger: log, received: received, loadTimeout: .seconds(3))

        let bytes: [UInt8] = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let opening = try await receiver.receive(title: "Talk", userInfo: Self.fileInfo("talk.wav"), document: Self.document(bytes, in: directory))
        #expect(opening == .desktopDefault)
        let copy = received.appendingPathComponent("talk (2).wav")
        #expect(try Data(contentsOf: copy) == Data(bytes))
        #expect(try Data(contentsOf: received.appendingPathComponent("talk.wav")) == Data("mine".utf8))
        let mode = try FileManager.default.attributesOfItem(atPath: copy.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(desktop.started.withLock { $0 } == ["org.example.Player.desktop \(copy.absoluteString)"])
        #expect(desktop.asked.withLock { $0 }.contains("default for audio/x-wav"))

        // Not audio or video: the default application for it is not even asked; refused, the copy kept.
        await #expect(throws: MediaReceiver.Refusal.self) {
            try await receiver.receive(title: "X", userInfo: Self.fileInfo("run.desktop"), document: Self.document([1], in: directory, type: "application/x-desktop"))
        }
        #expect(!desktop.asked.withLock { $0 }.contains("default for application/x-desktop"))
        #expect(FileManager.default.fileExists(atPath: received.appendingPathComponent("run.desktop").path))
        #expect(desktop.started.withLock { $0 }.count == 1)
        #expect(log.lines.withLock { $0 }.contains { $0.contains("no media player here plays the file") })

        // A local file's activity without its document: refused.
        await #expect(throws: MediaReceiver.Refusal.self) { try await receiver.receive(title: "T", userInfo: Self.fileInfo("a.wav")) }
    }

    /// A stream's activity that comes with a document anyway, and one that cannot be read: the
    /// descriptor is closed unread either way (the peer end sees the close).
    @Test func aDocumentNobodyWantsIsClosed() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let session = try DBusConnection(bus: .address(bus.address))
        defer { session.close() }
        let receiver = MediaReceiver(session: session, desktop: RecordingMediaDesktop(), logger: RecordingLog(), received: nil, loadTimeout: .seconds(3))
        let stream: [String: PropertyValue] = ["url": .string("https://radio.example/a.ogg"), "position": .double(1), "positionTime": .double(1),
                                               "rate": .double(1), "playing": .boolean(true)]
        for info in [stream, ["fileName": .string("../x")], Self.fileInfo("a.wav")] {
            var ends: [Int32] = [0, 0]
            #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
            let document = ContinuedDocument(id: "d", mediaType: "audio/ogg", size: 1, digest: "", descriptor: ends[0])
            await #expect(throws: MediaReceiver.Refusal.self) { try await receiver.receive(title: "T", userInfo: info, document: document) }
            var byte: UInt8 = 0
            #expect(send(ends[1], &byte, 1, Int32(MSG_NOSIGNAL)) == -1 && errno == EPIPE, "\(info)")
            close(ends[1])
        }
    }

    /// Attack (a hostile local process owning an MPRIS name, a sandboxed one included): the player
    /// says it plays /proc/self/environ (fstat says 0 bytes; reading gives the agent's environment),
    /// another /proc file, an empty file. Found: each was opened and attached (size 0 is within any
    /// limit; batond copies to the end). Fixed: empty files and files of the kernel's file systems
    /// are refused before anything is attached.
    @Test func kernelFilesAndEmptyFilesAreNeverSent() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        for path in ["/proc/self/environ", "/proc/self/status", "/proc/version"] {
            #expect(throws: MediaLocalFile.Refusal.kernelOrEmpty, "\(path)") { _ = try MediaLocalFile.open(path: path, limit: 1 << 30) }
        }
        #expect(throws: MediaLocalFile.Refusal.kernelOrEmpty) { _ = try MediaLocalFile.open(url: "file:///proc/self/environ", limit: 1 << 30) }
        if FileManager.default.fileExists(atPath: "/sys/kernel/uevent_seqnum") {
            #expect(throws: MediaLocalFile.Refusal.kernelOrEmpty) { _ = try MediaLocalFile.open(path: "/sys/kernel/uevent_seqnum", limit: 1 << 30) }
        }
        let empty = directory.appendingPathComponent("empty.ogg")
        try Data().write(to: empty)
        #expect(throws: MediaLocalFile.Refusal.kernelOrEmpty) { _ = try MediaLocalFile.open(path: empty.path, limit: 1 << 30) }
        #expect(MediaLocalFile.Refusal.kernelOrEmpty.description.contains("/proc"))
    }

    /// Attack (TOCTOU): once the file is checked, it is replaced at its path by a symlink to another
    /// file (and then by another regular file). Held: what is attached is the descriptor checked,
    /// which still reads the file that was checked.
    @Test func theDescriptorCheckedIsTheOneAttached() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let song = directory.appendingPathComponent("song.ogg")
        try Data([7, 7, 7]).write(to: song)
        let secret = directory.appendingPathComponent("secret")
        try Data(Array("not for the ring".utf8)).write(to: secret)
        let file = try MediaLocalFile.open(path: song.path, limit: 1 << 30)
        try FileManager.default.removeItem(at: song)
        try FileManager.default.createSymbolicLink(at: song, withDestinationURL: secret)
        #expect(try Self.bytes(file) == [7, 7, 7])
        // The next open names the link: refused.
        #expect(throws: MediaLocalFile.Refusal.cannotOpen(errno: ELOOP)) { _ = try MediaLocalFile.open(path: song.path, limit: 1 << 30) }
    }

    /// Attack: a name of 255 bytes (two-byte letters), sent twice, and a long ASCII name. Found: the
    /// second save named "... (2).wav", 259 bytes, over NAME_MAX: refused "cannot be saved"; a long
    /// ASCII name lost its extension (cut at 200 characters). Fixed: a saved name is at most 200
    /// bytes, cut at a character, its extension kept.
    @Test func longNamesAreSavedAgainAndKeepTheirExtension() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let session = try DBusConnection(bus: .address(bus.address))
        defer { session.close() }
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let received = directory.appendingPathComponent("received")
        let desktop = RecordingMediaDesktop(defaultPlayer: "org.example.Player.desktop")
        let receiver = MediaReceiver(session: session, desktop: desktop, logger: RecordingLog(), received: received, loadTimeout: .seconds(3))
        let long = String(repeating: "é", count: 125) + ".wav"
        #expect(long.utf8.count == 254)
        for _ in 0..<2 {
            _ = try await receiver.receive(title: "Long", userInfo: Self.fileInfo(long), document: Self.document([1, 2], in: directory))
        }
        let ascii = String(repeating: "a", count: 240) + ".flac"
        _ = try await receiver.receive(title: "Long", userInfo: Self.fileInfo(ascii), document: Self.document([3], in: directory))
        let names = try FileManager.default.contentsOfDirectory(atPath: received.path)
        #expect(names.count == 3, "\(names)")
        #expect(names.allSatisfy { $0.utf8.count <= 210 && ($0.hasSuffix(".wav") || $0.hasSuffix(".flac")) }, "\(names)")
        #expect(names.contains { $0.hasSuffix(" (2).wav") })
        #expect(RecentDocumentReceiver.safeName(String(repeating: "e\u{301}", count: 150)).utf8.count <= 200)
        // One character of 800 bytes (combining marks) cannot be kept: the name left is the extension's.
        #expect(RecentDocumentReceiver.safeName("a" + String(repeating: "\u{301}", count: 400) + ".wav") == "document.wav")
    }

    /// Attack: a document named like a desktop entry, a shell script and an HTML page, sent with an
    /// audio type, on a receiver whose desktop has no default player for it and where no player runs
    /// (so only the desktop's own default for the file would be left). Held: nothing is started or
    /// opened (never the desktop's default for a file, which for a .desktop file may run it).
    @Test func noDefaultPlayerMeansNothingOpensTheFile() async throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let session = try DBusConnection(bus: .address(bus.address))
        defer { session.close() }
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let desktop = RecordingMediaDesktop()
        let receiver = MediaReceiver(session: session, desktop: desktop, logger: RecordingLog(),
                                     received: directory.appendingPathComponent("received"), loadTimeout: .seconds(3))
        let payloads: [(String, String)] = [("run.desktop", "[Desktop Entry]\nType=Application\nExec=sh -c 'touch /tmp/pwned'\n"),
                                            ("run.sh", "#!/bin/sh\ntouch /tmp/pwned\n"), ("page.html", "<script>alert(1)</script>")]
        for (name, text) in payloads {
            await #expect(throws: MediaReceiver.Refusal.self, "\(name)") {
                try await receiver.receive(title: "X", userInfo: Self.fileInfo(name), document: Self.document(Array(text.utf8), in: directory, type: "audio/x-wav"))
            }
        }
        #expect(desktop.started.withLock { $0 }.isEmpty)
    }
}
