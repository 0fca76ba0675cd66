#if canImport(Glibc)
import Glibc
#endif
import BatonDBus

public enum LaunchError: Error, Sendable, Hashable {
    case noExecLine
    case badExecLine
    case spawnFailed(errno: Int32)
    case activationFailed(String)
}

/// Starts an installed application that is not running.
public protocol ApplicationLauncher: Sendable {
    func launch(_ entry: DesktopEntry) async throws(LaunchError)
}

/// D-Bus activation (`org.freedesktop.Application.Activate`) for DBusActivatable entries, else the
/// Exec line through posix_spawnp. Children get the daemon's environment plus the bus address
/// the daemon uses (so apps find the same bus) and default signal dispositions.
public struct SpawningApplicationLauncher: ApplicationLauncher {
    let connection: DBusConnection
    let busAddressForChildren: String?

    public init(connection: DBusConnection, busAddressForChildren: String?) {
        self.connection = connection
        self.busAddressForChildren = busAddressForChildren
    }

    public func launch(_ entry: DesktopEntry) async throws(LaunchError) {
        if entry.dbusActivatable {
            let path = "/" + String(entry.id.map { $0 == "." ? "/" : $0 == "-" ? "_" : $0 })
            do {
                _ = try await connection.call(destination: entry.id, path: path, interface: "org.freedesktop.Application",
                                              method: "Activate", arguments: [.propertyDictionary([:])], timeout: .seconds(10))
            } catch let error as DBusError {
                throw .activationFailed(error.name)
            } catch {
                throw .activationFailed("cancelled")
            }
            return
        }
        guard let exec = entry.exec else { throw .noExecLine }
        guard let arguments = ExecLine.arguments(exec) else { throw .badExecLine }
        let pid = try Self.spawn(arguments, busAddress: busAddressForChildren)
        Self.reap(pid)
    }

    static func spawn(_ arguments: [String], busAddress: String?) throws(LaunchError) -> pid_t {
        var environment: [String] = []
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            if busAddress == nil || !text.hasPrefix("DBUS_SESSION_BUS_ADDRESS=") { environment.append(text) }
            index += 1
        }
        if let busAddress { environment.append("DBUS_SESSION_BUS_ADDRESS=" + busAddress) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The daemon ignores SIGTERM/SIGINT to handle them itself; ignored dispositions survive exec.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGTERM)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else { throw .spawnFailed(errno: result) }
        return pid
    }

    /// Collects the child's exit status when it ends, so no zombie stays behind. Linux Dispatch has
    /// no process sources; one short-lived detached thread per launched application is cheap enough.
    static func reap(_ pid: pid_t) {
        let argument = UnsafeMutablePointer<pid_t>.allocate(capacity: 1)
        argument.initialize(to: pid)
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let created = pthread_create(&thread, &attributes, { raw in
            guard let pointer = raw?.assumingMemoryBound(to: pid_t.self) else { return nil }
            let child = pointer.move()
            pointer.deallocate()
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            return nil
        }, argument)
        if created != 0 { argument.deallocate() }
    }
}
