// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonTestBus
import Foundation
import Testing

/// Red team, the session's small files (docs/publishers.md publishers.conf; docs/clipboard.md the
/// agent's status file, `$XDG_RUNTIME_DIR/baton/clipboard-agent`): what a program of the session, or a
/// mistake, can put there. Untrusted input: never waited on, bounded before it is read, and a pid in
/// it is believed only for the program that wrote it.
@Suite("BatonClientTests: red team, publishers.conf and the clipboard agent's status file", .serialized)
struct SessionFileAttackTests {
    struct Home {
        let root: URL
        var environment: [String: String] {
            ["XDG_CONFIG_HOME": root.appendingPathComponent("config").path, "XDG_RUNTIME_DIR": root.appendingPathComponent("run").path]
        }
        var settings: URL { root.appendingPathComponent("config/baton/publishers.conf") }
        var status: URL { root.appendingPathComponent("run/baton/clipboard-agent") }

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("session-files-\(UUID().uuidString)")
            // run/baton is the agent's to make (0700).
            for directory in ["config/baton", "run"] {
                try FileManager.default.createDirectory(at: root.appendingPathComponent(directory), withIntermediateDirectories: true)
            }
            chmod(root.path, 0o755)
        }

        func replace(_ url: URL, with make: (String) throws -> Void) rethrows {
            unlink(url.path)
            try make(url.path)
        }
    }

    /// `work` on a thread of its own, with a guard: a read that blocks (a FIFO with no writer)
    /// fails the test instead of hanging it; the FIFO is then opened for writing to let it go.
    func returnsPromptly<T: Sendable>(_ what: String, unblocking fifo: String? = nil, _ work: @escaping @Sendable () -> T) async -> T? {
        let result = await withTaskGroup(of: T?.self) { group -> T? in
            group.addTask {
                await withCheckedContinuation { continuation in Thread { continuation.resume(returning: work()) }.start() }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(120))
                return nil
            }
            let first = await group.next() ?? nil
            if first == nil, let fifo {
                let writer = open(fifo, O_WRONLY | O_NONBLOCK)
                if writer >= 0 { close(writer) }
            }
            group.cancelAll()
            return first
        }
        if result == nil { Issue.record("\(what) did not return within 120 s") }
        return result
    }

    /// A process of `user` (nil: this account) whose name is baton-agent: sleep, started through a
    /// link of that name (the name the kernel keeps is the link's).
    func standInAgent(_ home: Home, as user: String? = nil) throws -> Process {
        let link = home.root.appendingPathComponent("bin/baton-agent")
        if !FileManager.default.fileExists(atPath: link.path) {
            try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
            chmod(link.deletingLastPathComponent().path, 0o755)
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "/bin/sleep")
        }
        let process = Process()
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(user)", "--regid=nogroup", "--clear-groups", link.path, "600"]
        } else {
            process.executableURL = link
            process.arguments = ["600"]
        }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try launch(process)
        return process
    }

    /// SIGKILL: a child of the test process may inherit SIGTERM blocked.
    func stop(_ process: Process) {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Attack: publishers.conf as a FIFO nobody writes to, a link to /dev/zero, a directory, a 1 MiB
    /// file whose last line turns the clipboard on, and garbage (NUL bytes, bytes that are not
    /// UTF-8, 4,000 lines of `=`) around one valid line. Found: the file was read whole with no limit
    /// (the FIFO held every publisher's read, the agent's included, forever; /dev/zero filled memory).
    /// Fixed: only a regular file of at most 64 KiB is read; anything else means all off. Held: the
    /// garbage crashes nothing and only its valid line counts.
    @Test func publishersConfThatIsNoSmallRegularFileMeansAllOff() async throws {
        let home = try Home()
        defer { try? FileManager.default.removeItem(at: home.root) }
        let environment = home.environment
        try home.replace(home.settings) { #expect(mkfifo($0, 0o600) == 0) }
        let fromFIFO = await returnsPromptly("reading a FIFO as publishers.conf", unblocking: home.settings.path) {
            PublisherSettings.load(environment: environment)
        }
        #expect(fromFIFO == PublisherSettings())
        try home.replace(home.settings) { try FileManager.default.createSymbolicLink(atPath: $0, withDestinationPath: "/dev/zero") }
        #expect(await returnsPromptly("reading /dev/zero as publishers.conf") { PublisherSettings.load(environment: environment) } == PublisherSettings())
        try home.replace(home.settings) { try FileManager.default.createDirectory(atPath: $0, withIntermediateDirectories: false) }
        #expect(PublisherSettings.load(environment: environment) == PublisherSettings())
        try? FileManager.default.removeItem(at: home.settings)

        let padding = String(repeating: "# padding\n", count: 104_858)
        try Data((padding + "clipboard = on\n").utf8).write(to: home.settings)
        #expect(!PublisherSettings.load(environment: environment).isEnabled(.clipboard), "a 1 MiB file was read")

        var garbage: [UInt8] = [0, 0xFF, 0xFE, 0x80, 0x0A, 0x3D, 0x0A, 0xC3, 0x28, 0x0A]
        garbage += Array(String(repeating: "=\n== = =\nclipboard =\n= on\n", count: 1_000).utf8)
        garbage += Array("media = on\nrecent-types = \u{0}/x\n".utf8) + [0xF0, 0x9F, 0x0A]
        try Data(garbage).write(to: home.settings)
        let settings = PublisherSettings.load(environment: environment)
        #expect(settings.enabled == [.media] && settings.recentMediaTypes == nil)
    }

    /// Attack: the agent's status file as a FIFO, a link to /dev/zero, 32 KiB, garbage, a file owned
    /// by another account, and files whose pid is gone, is init, is this test process, is another
    /// account's process named baton-agent; a link planted at the agent's temporary name. Found: the
    /// file was read whole (a FIFO hung `baton clipboard status` and doctor), and any process of that
    /// number made it believed (init, another account's: kill(2)'s EPERM counted as running). Fixed:
    /// a regular file of this account of at most 16 KiB, whose pid is a running baton-agent of this
    /// account. Held: the planted link is not written through, the file is 0600 in a 0700 directory.
    @Test func theStatusFileIsBelievedOnlyFromThisAccountsRunningAgent() async throws {
        try #require(getuid() == 0, "runs as root (CI does) so that nobody is another account")
        let home = try Home()
        defer { try? FileManager.default.removeItem(at: home.root) }
        let environment = home.environment
        let agent = try standInAgent(home)
        defer { stop(agent) }
        let status = ClipboardAgentStatus(pid: agent.processIdentifier, sessionClipboard: "X11 display :7", registered: true, offer: "text: 5 bytes")
        #expect(status.save(environment: environment))
        #expect(ClipboardAgentStatus.load(environment: environment) == status, "this account's running agent was not believed")
        var info = stat()
        #expect(stat(home.status.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(home.status.deletingLastPathComponent().path, &info) == 0 && info.st_mode & 0o077 == 0)

        try home.replace(home.status) { #expect(mkfifo($0, 0o600) == 0) }
        #expect(await returnsPromptly("reading a FIFO as the status file", unblocking: home.status.path) {
            ClipboardAgentStatus.load(environment: environment)
        } == .some(nil))
        try home.replace(home.status) { try FileManager.default.createSymbolicLink(atPath: $0, withDestinationPath: "/dev/zero") }
        #expect(await returnsPromptly("reading /dev/zero as the status file") { ClipboardAgentStatus.load(environment: environment) } == .some(nil))
        unlink(home.status.path)
        try Data((status.text + String(repeating: "# more\n", count: 4_700)).utf8).write(to: home.status)
        #expect(ClipboardAgentStatus.load(environment: environment) == nil, "a 32 KiB status file was read")
        for garbage in [[UInt8](repeating: 0, count: 100), Array("pid = -1\n".utf8), Array("pid = 99999999999\n".utf8),
                        Array("pid=\npid = x\n".utf8), [0xFF, 0xFE, 0x3D, 0x0A]] {
            try Data(garbage).write(to: home.status)
            #expect(ClipboardAgentStatus.load(environment: environment) == nil)
        }

        // Another account's file, although its pid is this account's running agent.
        #expect(status.save(environment: environment))
        #expect(chown(home.status.path, 65_534, 65_534) == 0)
        #expect(ClipboardAgentStatus.load(environment: environment) == nil, "another account's status file was believed")
        unlink(home.status.path)

        let nobodysAgent = try standInAgent(home, as: "nobody")
        defer { stop(nobodysAgent) }
        var otherPID = Int32(0)
        // setpriv execs the link in place: the same process, once it runs as nobody under its new name.
        for _ in 0..<1_200 {
            if let comm = try? String(contentsOfFile: "/proc/\(nobodysAgent.processIdentifier)/comm", encoding: .utf8), comm == "baton-agent\n" {
                otherPID = nobodysAgent.processIdentifier
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(otherPID > 0, "nobody's stand-in agent did not start")
        for pid in [Int32.max - 1, 1, getpid(), otherPID] {
            var other = status
            other.pid = pid
            #expect(other.save(environment: environment))
            #expect(ClipboardAgentStatus.load(environment: environment) == nil, "the status file was believed for pid \(pid)")
        }

        // A link planted at the agent's temporary name is not written through.
        let victim = home.root.appendingPathComponent("victim")
        try Data("untouched".utf8).write(to: victim)
        let temporary = home.status.deletingLastPathComponent().appendingPathComponent(".clipboard-agent.\(getpid())")
        try FileManager.default.createSymbolicLink(atPath: temporary.path, withDestinationPath: victim.path)
        _ = status.save(environment: environment)
        #expect(try String(contentsOf: victim, encoding: .utf8) == "untouched")
    }
}
