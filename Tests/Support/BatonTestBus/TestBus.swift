// SPDX-License-Identifier: GPL-2.0-or-later
import CTestSpawn
import Foundation
import Testing

/// A private bus for one test, listening on a unix socket in a fresh temp directory: dbus-daemon,
/// or dbus-broker (the bus of Fedora, Arch and others, which forwards what dbus-daemon strips).
/// `.session` is permissive like a session bus but lets every local user connect (for the
/// other-user tests); `.system(policy:)` mimics the system bus defaults and includes a policy file.
/// `BATON_TEST_BUS=broker` makes dbus-broker the default; tests of hostile input take the daemon
/// as an argument and run on every one installed (`TestBus.Daemon.installed`).
public final class TestBus: @unchecked Sendable {
    public enum Kind: Sendable {
        case session
        case system(policyFile: String)
    }

    public enum Daemon: String, Sendable, CustomStringConvertible, CaseIterable {
        case dbusDaemon = "dbus-daemon"
        case broker = "dbus-broker"

        public var description: String { rawValue }

        /// dbus-broker when `BATON_TEST_BUS=broker`, else dbus-daemon.
        public static var `default`: Daemon {
            ProcessInfo.processInfo.environment["BATON_TEST_BUS"] == "broker" ? .broker : .dbusDaemon
        }

        /// The buses this machine can run (dbus-broker needs dbus-broker-launch and
        /// systemd-socket-activate, Debian's dbus-broker and systemd packages).
        public static var installed: [Daemon] {
            let broker = ["/usr/bin/dbus-broker-launch", "/usr/bin/systemd-socket-activate"].allSatisfy {
                FileManager.default.isExecutableFile(atPath: $0)
            }
            return broker ? [.dbusDaemon, .broker] : [.dbusDaemon]
        }
    }

    public let address: String
    public let directory: URL
    public let daemon: Daemon
    private let child: Child

    /// `serviceDirectory`: .service files for D-Bus activation on this bus.
    public init(_ kind: Kind = .session, serviceDirectory: String? = nil, daemon: Daemon = .default) throws {
        self.daemon = daemon
        directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("baton-svc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Other users (nobody) must reach the socket and read helper scripts.
        chmod(directory.path, 0o755)
        let socketPath = directory.appendingPathComponent("bus").path
        let policy: String
        switch kind {
        case .session:
            policy = """
                  <type>session</type>
                  <policy context="default">
                    <allow user="*"/>
                    <allow send_destination="*" eavesdrop="true"/>
                    <allow eavesdrop="true"/>
                    <allow own="*"/>
                  </policy>
                  <!-- As Debian's session.conf: a connection may wait for many replies (the system bus's is 128). -->
                  <limit name="max_replies_per_connection">50000</limit>
                """
        case .system(let policyFile):
            // The defaults of Debian's /usr/share/dbus-1/system.conf, restated.
            policy = """
                  <type>system</type>
                  <policy context="default">
                    <allow user="*"/>
                    <deny own="*"/>
                    <deny send_type="method_call"/>
                    <allow send_type="signal"/>
                    <allow send_requested_reply="true" send_type="method_return"/>
                    <allow send_requested_reply="true" send_type="error"/>
                    <allow receive_type="method_call"/>
                    <allow receive_type="method_return"/>
                    <allow receive_type="error"/>
                    <allow receive_type="signal"/>
                    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
                    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
                    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
                  </policy>
                  <include>\(policyFile)</include>
                """
        }
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <listen>unix:path=\(socketPath)</listen>
              <auth>EXTERNAL</auth>
            \(serviceDirectory.map { "<servicedir>\($0)</servicedir>" } ?? "")
            \(policy)
            </busconfig>
            """
        let configURL = directory.appendingPathComponent("bus.conf")
        try config.write(to: configURL, atomically: true, encoding: .utf8)

        switch daemon {
        case .dbusDaemon:
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
            process.arguments = ["--config-file=\(configURL.path)", "--print-address", "--nofork"]
            let output = ChildPipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try launch(process)
            child = .foundation(process)

            var line = Data()
            let reader = output.fileHandleForReading
            while !line.contains(UInt8(ascii: "\n")) {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                line.append(chunk)
            }
            let printed = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !printed.isEmpty else {
                child.stop()
                throw TestBusError.daemonDidNotStart
            }
            address = printed
        case .broker:
            // dbus-broker-launch takes its listening socket from socket activation (which
            // systemd-socket-activate provides, starting the launcher at the first connection),
            // logs to the journal, and connects to the bus it serves as its own client (found
            // through DBUS_SESSION_BUS_ADDRESS for the user scope). <listen> is ignored there.
            //
            // Started with posix_spawn, not Process: the launcher closes the descriptors it
            // inherits, among them the socket Foundation watches for a child's end; Foundation
            // then blocks in waitpid for it, and no later Process anywhere in the test process is
            // seen to end (suites on dbus-broker hung). Here the child gets no descriptor but
            // 0-2 (closefrom in the child), and stop() reaps it once, itself.
            try BrokerJournal.ensure()
            let busAddress = "unix:path=\(socketPath)"
            let pid = try Child.spawn("/usr/bin/systemd-socket-activate",
                                      ["-E", "DBUS_SESSION_BUS_ADDRESS=\(busAddress)", "-l", socketPath,
                                       "/usr/bin/dbus-broker-launch", "--scope", "user", "--config-file", configURL.path])
            child = .spawned(pid, Child.Reaped())
            // Ready once it accepts a connection (the file exists from bind, before listen).
            for _ in 0..<3_000 where !BrokerJournal.accepts(socketPath, type: SOCK_STREAM) && child.isRunning { usleep(10_000) }
            guard BrokerJournal.accepts(socketPath, type: SOCK_STREAM) else {
                child.stop()
                throw TestBusError.daemonDidNotStart
            }
            // systemd-socket-activate binds under this process's umask (0755 here), and connecting
            // needs write permission on the socket: other users (the nobody tests) were refused
            // with EACCES. dbus-daemon makes its sockets 0777; this does the same.
            chmod(socketPath, 0o777)
            address = busAddress
        }
    }

    /// Ends the bus (dbus-broker-launch on SIGTERM ends its broker; SIGKILL would leave the broker
    /// running) and removes its directory.
    public func stop() {
        child.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}

/// The bus's own process: a Foundation Process (dbus-daemon, whose address is read from its output)
/// or a pid from posix_spawn that this type alone reaps (dbus-broker).
enum Child: Sendable {
    /// Whether the spawned child has been reaped: once reaped, its pid may belong to anyone.
    final class Reaped: @unchecked Sendable {
        private let lock = NSLock()
        private var done = false
        func with<T>(_ body: (inout Bool) -> T) -> T { lock.lock(); defer { lock.unlock() }; return body(&done) }
    }

    case foundation(Process)
    case spawned(pid_t, Reaped)

    var isRunning: Bool {
        switch self {
        case .foundation(let process): return process.isRunning
        case .spawned(let pid, let reaped): return reaped.with { done in Self.reap(pid, &done); return !done }
        }
    }

    /// dbus-daemon: SIGKILL. A spawned child (dbus-broker-launch): SIGTERM, up to 10 s for it to
    /// end its broker, then SIGKILL; reaped here.
    func stop() {
        switch self {
        case .foundation(let process):
            // SIGKILL at once: dbus-daemon keeps nothing to save, and this runs on a test's thread
            // (SIGTERM first, waited for, held each test's thread 10 s and stalled whole runs).
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGKILL)
            for _ in 0..<200 where process.isRunning { usleep(10_000) }
        case .spawned(let pid, let reaped):
            reaped.with { done in
                Self.reap(pid, &done)
                guard !done else { return }
                kill(pid, SIGTERM)
                for _ in 0..<1_000 where !done { Self.reap(pid, &done); if !done { usleep(10_000) } }
                guard !done else { return }
                kill(pid, SIGKILL)
                while !done { Self.reap(pid, &done); if !done { usleep(10_000) } }
            }
        }
    }

    /// waitpid without blocking; marks the child reaped when it has ended (or is not ours).
    private static func reap(_ pid: pid_t, _ done: inout Bool) {
        guard !done else { return }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid || (result < 0 && errno == ECHILD) { done = true }
    }

    /// posix_spawn with stdin, stdout and stderr on /dev/null and every other descriptor closed.
    static func spawn(_ path: String, _ arguments: [String]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { throw TestBusError.daemonDidNotStart }
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in 0...2 {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        guard baton_spawn_closefrom(&actions, 3) == 0 else { throw TestBusError.daemonDidNotStart }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard result == 0 else { throw TestBusError.daemonDidNotStart }
        return pid
    }
}

public enum TestBusError: Error {
    case daemonDidNotStart
    /// dbus-broker-launch needs /run/systemd/journal/socket, and it could not be made (not root).
    case brokerNeedsJournal
    case timedOut
}

/// The first element of `stream`, or `TestBusError.timedOut`.
public func first<Element: Sendable>(of stream: AsyncStream<Element>, timeout: Duration = .seconds(5)) async throws -> Element {
    try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask {
            for await element in stream { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next(), let element = result else { throw TestBusError.timedOut }
        return element
    }
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes; returns whether it held.
public func eventually(timeout: Duration = .seconds(5), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// Runs `body` with a fresh session-like bus and stops the bus afterwards.
public func withTestBus<T>(_ daemon: TestBus.Daemon = .default, _ body: (TestBus) async throws -> T) async throws -> T {
    let bus = try TestBus(daemon: daemon)
    defer { bus.stop() }
    return try await body(bus)
}

/// dbus-broker-launch logs to the journal and will not start without its socket. Where there is no
/// journal (a container without systemd), a sink that reads and drops everything takes its place,
/// for the life of the test process (made only when the socket is missing; needs root).
enum BrokerJournal {
    static let path = "/run/systemd/journal/socket"
    nonisolated(unsafe) private static var ready = false
    private static let lock = NSLock()

    static func ensure() throws {
        lock.lock()
        defer { lock.unlock() }
        guard !ready else { return }
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK {
            if accepts(path, type: SOCK_DGRAM) { ready = true; return }
            unlink(path)
        }
        try? FileManager.default.createDirectory(atPath: "/run/systemd/journal", withIntermediateDirectories: true)
        let sink = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard sink >= 0, bind(sink, path) else {
            if sink >= 0 { close(sink) }
            throw TestBusError.brokerNeedsJournal
        }
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true { _ = buffer.withUnsafeMutableBytes { recv(sink, $0.baseAddress, $0.count, 0) } }
        }
        thread.start()
        ready = true
    }

    /// Whether a socket of `type` at `path` takes a connection now.
    static func accepts(_ path: String, type: __socket_type) -> Bool {
        let probe = socket(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(probe) }
        return probe >= 0 && connect(probe, path)
    }

    private static func address(_ path: String) -> (sockaddr_un, socklen_t) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { room in
            for (index, byte) in path.utf8.enumerated() where index < room.count - 1 { room[index] = byte }
        }
        return (address, socklen_t(MemoryLayout<sa_family_t>.size + path.utf8.count + 1))
    }

    private static func connect(_ socket: Int32, _ path: String) -> Bool {
        var (address, length) = address(path)
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, length) } } == 0
    }

    private static func bind(_ socket: Int32, _ path: String) -> Bool {
        var (address, length) = address(path)
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket, $0, length) } } == 0
    }
}
