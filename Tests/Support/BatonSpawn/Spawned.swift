// SPDX-License-Identifier: GPL-2.0-or-later
// Test support: a child process started with posix_spawn and reaped by its starter, for the suites
// that run real X11 and Wayland programs (BatonXvfb, BatonSway, BatonMutter).
import CTestSpawn
import Foundation

/// A child started with posix_spawn: descriptors 0-2 only (closefrom 3), no signal blocked and
/// default handlers. Not Foundation's Process: a copying xclip or wl-copy forks a server that
/// inherits every descriptor, among them the socket Process watches for its child's end, which it
/// would then never see (see BatonTestBus's Spawning.swift).
public struct Spawned: Sendable {
    public let pid: pid_t
    /// The read end of the child's standard output, when it was asked for.
    public let output: Int32?

    /// Starts `path` with `environment` (`NAME=value` entries), its input from the file `input`
    /// (else /dev/null), its output to a socket read through `output` when `captureOutput`, else
    /// /dev/null, its errors to /dev/null.
    public static func spawn(_ path: String, _ arguments: [String], environment: [String], input: String? = nil,
                             captureOutput: Bool = false) throws -> Spawned {
        guard FileManager.default.isExecutableFile(atPath: path) else { throw MissingProgram(path: path) }
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { throw SpawnFailed() }
        defer { posix_spawn_file_actions_destroy(&actions) }
        var ends: [Int32] = [-1, -1]
        if captureOutput {
            // A socket pair: close-on-exec from birth (pipe2 is not in Swift's Glibc), so no other
            // test's spawn can inherit it.
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
                throw SpawnFailed()
            }
        }
        posix_spawn_file_actions_addopen(&actions, 0, input ?? "/dev/null", O_RDONLY, 0)
        if captureOutput {
            posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        guard baton_spawn_closefrom(&actions, 3) == 0 else { throw SpawnFailed() }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // The test process's threads block most signals, and a spawned child inherits the mask: Xvfb
        // would not end on SIGTERM. The child starts with none blocked and default handlers.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        if captureOutput { close(ends[1]) }
        guard result == 0 else {
            if captureOutput { close(ends[0]) }
            throw SpawnFailed()
        }
        return Spawned(pid: pid, output: captureOutput ? ends[0] : nil)
    }

    /// Everything the child writes to its output, until it closes it (then the descriptor is closed).
    public func readOutput() -> [UInt8] {
        guard let output else { return [] }
        defer { close(output) }
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = read(output, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return data
    }

    /// The first line of the child's output (the rest stays unread).
    public func readLine() -> String {
        guard let output else { return "" }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(output, &byte, 1)
            if count < 0, errno == EINTR { continue }
            guard count == 1, byte != UInt8(ascii: "\n") else { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    /// Waits for the child's end: its exit status (-1 when a signal ended it).
    @discardableResult
    public func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : -1
    }

    public struct SpawnFailed: Error { public init() {} }
}

/// Runs blocking work (child processes, pipes) on its own thread, off Swift's cooperative pool.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A program the tests need is not installed: the message names the Debian package (CI has it).
public struct MissingProgram: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) { self.description = description }

    /// For `spawn`: the package of the programs the suites start, else the fix in words.
    public init(path: String) {
        let packages = ["sway": "sway", "setpriv": "util-linux", "wl-copy": "wl-clipboard", "wl-paste": "wl-clipboard", "xclip": "xclip",
                        "Xvfb": "xvfb", "dbus-daemon": "dbus-daemon", "python3": "python3"]
        let package = packages[(path as NSString).lastPathComponent].map { "the Debian package \($0)" } ?? "the Debian package that has it"
        description = "\(path) is missing: install \(package) (scripts/install-deps does)"
    }
}

/// Fails with the Debian package to install when a program a test needs is missing (CI has it).
public func requireProgram(_ path: String, package: String) throws {
    guard access(path, X_OK) == 0 else { throw MissingProgram(description: "\(path) is missing: apt-get install \(package)") }
}
