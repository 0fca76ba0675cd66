// SPDX-License-Identifier: GPL-2.0-or-later
// Test support: a private Xvfb and xclip as the other X client, for the suites that use a real
// X display (BatonX11Tests, and the clipboard's end-to-end test in BatonServiceTests).
import CTestSpawn
import Foundation

/// A child started with posix_spawn: descriptors 0-2 only (closefrom 3). Not Foundation's Process:
/// a copying xclip forks a server that inherits every descriptor, among them the socket Process
/// watches for its child's end, which it would then never see (see BatonTestBus's Spawning.swift).
public struct Child: Sendable {
    public let pid: pid_t
    /// The read end of the child's standard output, when it was asked for.
    public let output: Int32?

    public static func spawn(_ path: String, _ arguments: [String], display: String? = nil, input: String? = nil,
                      captureOutput: Bool) throws -> Child {
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
        let environment = ["PATH=/usr/bin:/bin"] + (display.map { ["DISPLAY=\($0)"] } ?? [])
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
        return Child(pid: pid, output: captureOutput ? ends[0] : nil)
    }

    /// Everything the child writes to its output, until it closes it (then the descriptor is closed).
    public func readOutput() -> Data {
        guard let output else { return Data() }
        defer { close(output) }
        var data = Data()
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

    /// Waits for the child's end; its exit status (-1 when a signal ended it).
    @discardableResult
    public func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : -1
    }

    public struct SpawnFailed: Error {}
}

/// A private Xvfb: it picks a free display itself (`-displayfd`) and listens on no TCP port.
/// `@unchecked Sendable`: `stopped` is guarded by `lock`.
public final class XvfbServer: @unchecked Sendable {
    public let display: String
    private let child: Child
    private let lock = NSLock()
    private var stopped = false

    private init(display: String, child: Child) {
        self.display = display
        self.child = child
    }

    public static func start() async throws -> XvfbServer {
        try requireProgram("/usr/bin/Xvfb", package: "xvfb")
        return try await onThread {
            let child = try Child.spawn("/usr/bin/Xvfb", ["-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "640x480x24"],
                                        captureOutput: true)
            // The display number and a newline once it accepts clients; end of file if it failed.
            let number = child.readLine()
            if let output = child.output { close(output) }
            guard !number.isEmpty, Int(number) != nil else {
                kill(child.pid, SIGKILL)
                child.wait()
                throw XvfbFailed()
            }
            return XvfbServer(display: ":\(number)", child: child)
        }
    }

    /// Ends the server, once (its pid is not signalled after it was reaped).
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        kill(child.pid, SIGTERM)
        child.wait()
    }

    public struct XvfbFailed: Error { public init() {} }
}

/// Runs blocking work (child processes, pipes) on its own thread, off Swift's cooperative pool.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

public struct XclipResult: Sendable {
    public var status: Int32
    public var output: Data
}

/// Runs xclip on `display`; its input from `input` (a file), its output collected when pasting.
public func xclip(_ arguments: [String], display: String, input: URL? = nil) async throws -> XclipResult {
    try requireProgram("/usr/bin/xclip", package: "xclip")
    return try await onThread {
        let pasting = arguments.contains("-o")
        let child = try Child.spawn("/usr/bin/xclip", arguments, display: display, input: input?.path, captureOutput: pasting)
        let data = child.readOutput()
        return XclipResult(status: child.wait(), output: data)
    }
}

/// Copies `bytes` to the clipboard with xclip (which then serves it from the background).
public func xclipCopy(_ bytes: [UInt8], display: String, selection: String = "clipboard", type: String? = nil) async throws {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("baton-x11-\(UUID().uuidString)")
    try Data(bytes).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    var arguments = ["-i", "-selection", selection]
    if let type { arguments += ["-t", type] }
    let result = try await xclip(arguments, display: display, input: file)
    guard result.status == 0 else { throw XclipFailed(status: result.status) }
}

/// xclip exited with a failure.
public struct XclipFailed: Error { public var status: Int32 }

/// Fails with the Debian package to install when a program a test needs is missing (CI has it).
public func requireProgram(_ path: String, package: String) throws {
    guard access(path, X_OK) == 0 else { throw MissingProgram(description: "\(path) is missing: apt-get install \(package)") }
}

public struct MissingProgram: Error, CustomStringConvertible { public var description: String }
