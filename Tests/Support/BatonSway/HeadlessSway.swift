// SPDX-License-Identifier: GPL-2.0-or-later
// Test support: a private headless sway and wl-clipboard as the other Wayland client, for the
// suites that use a real compositor (BatonWaylandTests, the clipboard's end-to-end tests).
import BatonSpawn
import Foundation

/// A private headless sway: its own XDG_RUNTIME_DIR (0700), a minimal configuration, no input
/// devices, no Xwayland. sway refuses to run as root, so under root it runs as nobody (setpriv),
/// owning its runtime directory; root's clients reach the socket anyway.
/// `@unchecked Sendable`: `stopped` is guarded by `lock`.
public final class HeadlessSway: @unchecked Sendable {
    public let runtimeDirectory: String
    public let display: String
    private let child: Spawned
    private let lock = NSLock()
    private var stopped = false

    /// What a client of this compositor needs in its environment.
    public var environment: [String: String] { ["WAYLAND_DISPLAY": display, "XDG_RUNTIME_DIR": runtimeDirectory] }
    public var environmentList: [String] { ["PATH=/usr/bin:/bin", "WAYLAND_DISPLAY=\(display)", "XDG_RUNTIME_DIR=\(runtimeDirectory)"] }

    private init(runtimeDirectory: String, display: String, child: Spawned) {
        self.runtimeDirectory = runtimeDirectory
        self.display = display
        self.child = child
    }

    public static func start() async throws -> HeadlessSway {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-sway-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        let config = directory + "/config"
        try Data("xwayland disable\n".utf8).write(to: URL(fileURLWithPath: config))
        let environment = ["PATH=/usr/bin:/bin", "HOME=\(directory)", "XDG_RUNTIME_DIR=\(directory)", "WLR_BACKENDS=headless",
                           "WLR_LIBINPUT_NO_DEVICES=1", "WLR_RENDERER=pixman"]
        var program = "/usr/bin/sway"
        var arguments = ["-c", config]
        guard FileManager.default.isExecutableFile(atPath: program) else { throw MissingProgram(path: program) }
        if getuid() == 0 {
            guard chown(directory, 65534, 65534) == 0, chown(config, 65534, 65534) == 0 else { throw Spawned.SpawnFailed() }
            arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", program] + arguments
            program = "/usr/bin/setpriv"
        }
        let child = try Spawned.spawn(program, arguments, environment: environment)
        // The socket appears once sway accepts clients: a guard of 120 s (a loaded machine), no more.
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            // The file appears at bind(2), before listen(2): ready once a connection is accepted.
            if let socket = names.first(where: { $0.hasPrefix("wayland-") && !$0.hasSuffix(".lock") }),
               accepts(directory + "/" + socket) {
                return HeadlessSway(runtimeDirectory: directory, display: socket, child: child)
            }
            var status: Int32 = 0
            if waitpid(child.pid, &status, WNOHANG) == child.pid { throw SwayFailed() }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(child.pid, SIGKILL)
        child.wait()
        throw SwayFailed()
    }

    private static func accepts(_ path: String) -> Bool {
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { room in
            for (index, byte) in path.utf8.enumerated() where index < room.count - 1 { room[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    /// Ends the compositor (once) and removes its directory.
    public func stop(signal: Int32 = SIGTERM) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        kill(child.pid, signal)
        child.wait()
        try? FileManager.default.removeItem(atPath: runtimeDirectory)
    }

    public struct SwayFailed: Error, CustomStringConvertible {
        public var description: String { "headless sway did not start" }
    }
}

extension HeadlessSway {
    /// Copies `bytes` with wl-copy (which forks and serves from the background until replaced).
    public func wlCopy(_ bytes: [UInt8], arguments: [String] = []) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("baton-wl-\(UUID().uuidString)")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let environment = environmentList
        let status = try await onThread {
            try Spawned.spawn("/usr/bin/wl-copy", arguments, environment: environment, input: file.path).wait()
        }
        guard status == 0 else { throw WlCopyFailed(status: status) }
    }

    /// wl-copy in the foreground: it serves until it is killed (then its copy goes with it).
    public func wlCopyForeground(_ text: String) throws -> Spawned {
        try Spawned.spawn("/usr/bin/wl-copy", ["--foreground", text], environment: environmentList)
    }

    /// wl-paste's output and status (`--no-newline`: the bytes as they are).
    public func wlPaste(_ arguments: [String] = []) async throws -> (status: Int32, output: [UInt8]) {
        let environment = environmentList
        return try await onThread {
            let child = try Spawned.spawn("/usr/bin/wl-paste", ["--no-newline"] + arguments, environment: environment,
                                          captureOutput: true)
            let output = child.readOutput()
            return (child.wait(), output)
        }
    }
}

/// wl-copy exited with a failure.
public struct WlCopyFailed: Error { public var status: Int32 }
