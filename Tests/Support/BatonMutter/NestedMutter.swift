// SPDX-License-Identifier: GPL-2.0-or-later
// Test support: GNOME's compositor for the suites that test the clipboard in GNOME's Wayland
// session (BatonX11Tests, the clipboard's end-to-end tests): Mutter, or GNOME Shell (built on
// Mutter), run nested in a private Xvfb with its XWayland, and wl-clipboard and xclip as the
// Wayland and X11 clients.
//
// Nested, not `--headless`: a headless Mutter 43 has no input devices, so its seat offers no
// keyboard, and wl-clipboard (which Mutter makes take the keyboard focus for a moment to copy or
// paste, having no data control) refuses to run there ("This seat has no keyboard"). Nested in an
// X server, Mutter takes the X server's keyboard as its own. Its clipboard code (MetaSelection,
// the Wayland data device, the X11 selection bridge of XWayland) does not depend on the backend.
import BatonSpawn
import BatonSway
import BatonWayland
import BatonXvfb
import CTestSpawn
import Foundation

/// Which GNOME compositor to run.
public enum GnomeCompositor: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Mutter alone (Debian's mutter package).
    case mutter
    /// GNOME Shell, in a session mode of its own without the overview it opens at startup (in the
    /// overview, new windows get no keyboard focus, so wl-clipboard would wait forever).
    case gnomeShell = "gnome-shell"

    public var description: String { rawValue }
    var program: String { "/usr/bin/\(rawValue)" }
    var package: String { rawValue }
}

/// A private GNOME compositor, nested in its own Xvfb: its own XDG_RUNTIME_DIR and HOME (0700), a
/// private D-Bus daemon without service activation as its session (and, for GNOME Shell, system)
/// bus, settings in memory, and its XWayland (Mutter starts it at once outside a systemd unit)
/// with the X authority file Mutter writes. Runs as root (Mutter does not refuse it).
/// `@unchecked Sendable`: `stopped` is guarded by `lock`.
public final class NestedMutter: @unchecked Sendable {
    public let compositor: GnomeCompositor
    public let directory: String
    /// The Wayland socket's name in `directory`.
    public let waylandDisplay: String
    /// XWayland's display (":N").
    public let xDisplay: String
    /// The X authority file Mutter wrote for its XWayland.
    public let xAuthority: String
    private let host: XvfbServer
    private let bus: Spawned
    private let child: Spawned
    private let lock = NSLock()
    private var stopped = false

    /// What a client in this GNOME session has in its environment (as gnome-session exports it).
    public var environment: [String: String] {
        ["WAYLAND_DISPLAY": directory + "/" + waylandDisplay, "XDG_RUNTIME_DIR": directory, "DISPLAY": xDisplay,
         "XAUTHORITY": xAuthority, "XDG_SESSION_TYPE": "wayland", "XDG_CURRENT_DESKTOP": "GNOME"]
    }
    public var environmentList: [String] { ["PATH=/usr/bin:/bin"] + environment.map { "\($0.key)=\($0.value)" } }

    private init(compositor: GnomeCompositor, directory: String, waylandDisplay: String, xDisplay: String, xAuthority: String,
                 host: XvfbServer, bus: Spawned, child: Spawned) {
        self.compositor = compositor
        self.directory = directory
        self.waylandDisplay = waylandDisplay
        self.xDisplay = xDisplay
        self.xAuthority = xAuthority
        self.host = host
        self.bus = bus
        self.child = child
    }

    public static func start(_ compositor: GnomeCompositor = .mutter) async throws -> NestedMutter {
        for (program, package) in [(compositor.program, compositor.package), ("/usr/bin/Xwayland", "xwayland"),
                                   ("/usr/bin/dbus-daemon", "dbus")] {
            guard FileManager.default.isExecutableFile(atPath: program) else { throw MissingGnome(program: program, package: package) }
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-mutter-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        let host = try await XvfbServer.start()
        let bus: Spawned
        do {
            bus = try await startBus(directory: directory)
        } catch {
            host.stop()
            throw error
        }
        var environment = ["PATH=/usr/bin:/bin", "HOME=\(directory)", "XDG_RUNTIME_DIR=\(directory)", "XDG_CONFIG_HOME=\(directory)/config",
                           "XDG_CACHE_HOME=\(directory)/cache", "XDG_DATA_HOME=\(directory)/data", "DISPLAY=\(host.display)",
                           "DBUS_SESSION_BUS_ADDRESS=unix:path=\(directory)/bus", "GSETTINGS_BACKEND=memory", "NO_AT_BRIDGE=1",
                           "GTK_A11Y=none"]
        let waylandDisplay = "baton-gnome"
        var arguments = ["--wayland", "--nested", "--wayland-display", waylandDisplay]
        if compositor == .gnomeShell {
            let modes = directory + "/modes/gnome-shell/modes"
            try FileManager.default.createDirectory(atPath: modes, withIntermediateDirectories: true)
            try Data(#"{"parentMode": "user", "hasOverview": false}"#.utf8).write(to: URL(fileURLWithPath: modes + "/baton-test.json"))
            environment += ["XDG_DATA_DIRS=\(directory)/modes:/usr/share", "DBUS_SYSTEM_BUS_ADDRESS=unix:path=\(directory)/bus"]
            arguments += ["--mode=baton-test"]
        }
        let log = directory + "/compositor.log"
        // Through sh only to send both outputs to the log (exec: the pid is the compositor's).
        let child: Spawned
        do {
            child = try Spawned.spawn("/bin/sh", ["-c", "exec \"$0\" \"$@\" >\"$LOG\" 2>&1", compositor.program] + arguments,
                                      environment: environment + ["LOG=\(log)"])
        } catch {
            stopProcess(bus)
            host.stop()
            throw error
        }
        let started = NestedMutter(compositor: compositor, directory: directory, waylandDisplay: waylandDisplay, xDisplay: "",
                                   xAuthority: "", host: host, bus: bus, child: child)
        // Ready once it answers a Wayland client (a registry round trip: it has set its X11 display
        // up before it serves one) and its log names XWayland's display: a guard of 120 s.
        let deadline = ContinuousClock.now + .seconds(120)
        let clientEnvironment = ["WAYLAND_DISPLAY": directory + "/" + waylandDisplay, "XDG_RUNTIME_DIR": directory]
        while ContinuousClock.now < deadline {
            var status: Int32 = 0
            if waitpid(child.pid, &status, WNOHANG) == child.pid {
                started.stop(alreadyEnded: true)
                throw GnomeFailed(compositor: compositor, log: (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
            }
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let number = text.firstMatch(of: /Using public X11 display :([0-9]+)/)?.1,
               let authority = try? FileManager.default.contentsOfDirectory(atPath: directory).first(where: { $0.hasPrefix(".mutter-Xwaylandauth.") }),
               case .noDataControl(.mutter) = try await onThread({ waylandDataControlAvailability(environment: clientEnvironment, timeout: .seconds(120)) }) {
                return NestedMutter(compositor: compositor, directory: directory, waylandDisplay: waylandDisplay, xDisplay: ":\(number)",
                                    xAuthority: directory + "/" + authority, host: host, bus: bus, child: child)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        started.stop()
        throw GnomeFailed(compositor: compositor, log: (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    /// A dbus-daemon on `directory`/bus: any connection may own and call anything; no service
    /// directories, so nothing is started on demand (no stray processes after the test).
    private static func startBus(directory: String) async throws -> Spawned {
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig><type>session</type><listen>unix:path=\(directory)/bus</listen><auth>EXTERNAL</auth>
            <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
            </busconfig>
            """
        try Data(config.utf8).write(to: URL(fileURLWithPath: directory + "/bus.conf"))
        let bus = try Spawned.spawn("/usr/bin/dbus-daemon", ["--config-file=\(directory)/bus.conf", "--nofork", "--print-address=1"],
                                    environment: ["PATH=/usr/bin:/bin"], captureOutput: true)
        // Its address on a line once it listens; end of file if it failed.
        let line = try await onThread { () -> String in
            guard let output = bus.output else { return "" }
            defer { close(output) }
            var bytes: [UInt8] = []
            var byte: UInt8 = 0
            while read(output, &byte, 1) == 1, byte != UInt8(ascii: "\n") { bytes.append(byte) }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard line.hasPrefix("unix:") else {
            stopProcess(bus)
            throw GnomeFailed(compositor: .mutter, log: "the private dbus-daemon did not start")
        }
        return bus
    }

    private static func stopProcess(_ process: Spawned) {
        kill(process.pid, SIGTERM)
        process.wait()
    }

    /// The processes whose parent is `pid` (XWayland, and what the compositor started).
    private static func children(of pid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { candidate in
            guard let stat = try? String(contentsOfFile: "/proc/\(candidate)/stat", encoding: .utf8),
                  let end = stat.lastIndex(of: ")") else { return false }
            // After the command's closing parenthesis: state, then the parent's pid.
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid
        }
    }

    /// Ends the compositor, its XWayland, its bus and its X server (once), and removes its directory.
    public func stop() { stop(alreadyEnded: false) }

    private func stop(alreadyEnded: Bool) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        let orphans = alreadyEnded ? [] : Self.children(of: child.pid)
        if !alreadyEnded {
            kill(child.pid, SIGTERM)
            child.wait()
        }
        // XWayland ends when its compositor goes; one that lingers is ended here (not our child:
        // init reaps it).
        for pid in orphans { kill(pid, SIGKILL) }
        Self.stopProcess(bus)
        host.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

extension NestedMutter {
    /// Copies `bytes` with wl-copy (it takes the keyboard focus for a moment, sets the selection,
    /// and serves it from the background until replaced).
    public func wlCopy(_ bytes: [UInt8], arguments: [String] = []) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("baton-wl-\(UUID().uuidString)")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let environment = environmentList
        let status = try await onThread {
            try Spawned.spawn("/usr/bin/wl-copy", arguments, environment: environment, input: file.path).wait()
        }
        guard status == 0 else { throw GnomeClientFailed(program: "wl-copy", status: status) }
    }

    /// wl-paste's output and status (`--no-newline`: the bytes as they are).
    public func wlPaste(_ arguments: [String] = []) async throws -> (status: Int32, output: [UInt8]) {
        let environment = environmentList
        return try await onThread {
            let child = try Spawned.spawn("/usr/bin/wl-paste", ["--no-newline"] + arguments, environment: environment, captureOutput: true)
            let output = child.readOutput()
            return (child.wait(), output)
        }
    }

    /// xclip on XWayland's display with the session's X authority; its output when pasting.
    public func xclip(_ arguments: [String], input: [UInt8]? = nil) async throws -> (status: Int32, output: [UInt8]) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/xclip") else {
            throw MissingGnome(program: "/usr/bin/xclip", package: "xclip")
        }
        var file: URL?
        if let input {
            file = FileManager.default.temporaryDirectory.appendingPathComponent("baton-x11-\(UUID().uuidString)")
            try Data(input).write(to: file!)
        }
        defer { if let file { try? FileManager.default.removeItem(at: file) } }
        let environment = environmentList
        let path = file?.path
        return try await onThread {
            let pasting = arguments.contains("-o")
            let child = try Spawned.spawn("/usr/bin/xclip", arguments, environment: environment, input: path, captureOutput: pasting)
            let output = child.readOutput()
            return (child.wait(), output)
        }
    }
}

extension NestedMutter {
    /// A GTK 4 app on Wayland that copies `text` marked secret (`x-kde-passwordManagerHint` with
    /// `secret`, as KeePassXC marks a password) as soon as its window has the focus, and keeps it
    /// until it is killed. wl-clipboard 2.1.0 cannot offer two types at once.
    public func copySecretWithGtk(_ text: String) throws -> Spawned {
        for (program, package) in [("/usr/bin/python3", "python3-gi"), ("/usr/lib/x86_64-linux-gnu/girepository-1.0/Gtk-4.0.typelib", "gir1.2-gtk-4.0")]
        where !FileManager.default.fileExists(atPath: program) {
            throw MissingGnome(program: program, package: package)
        }
        let script = """
            import sys, gi
            gi.require_version('Gtk', '4.0'); gi.require_version('Gdk', '4.0')
            from gi.repository import Gtk, Gdk, GLib
            window = Gtk.Window(title='baton secret copy')
            def copy(*_):
                if window.props.is_active and not getattr(window, 'copied', False):
                    window.copied = True
                    window.get_clipboard().set_content(Gdk.ContentProvider.new_union([
                        Gdk.ContentProvider.new_for_bytes('text/plain;charset=utf-8', GLib.Bytes.new(sys.argv[1].encode())),
                        Gdk.ContentProvider.new_for_bytes('x-kde-passwordManagerHint', GLib.Bytes.new(b'secret'))]))
            window.connect('notify::is-active', copy)
            window.present()
            GLib.MainLoop().run()
            """
        return try Spawned.spawn("/usr/bin/python3", ["-c", script, text],
                                 environment: environmentList + ["GDK_BACKEND=wayland", "NO_AT_BRIDGE=1", "GSETTINGS_BACKEND=memory"])
    }
}

/// A GNOME program the tests need is missing: the message names the Debian package (CI has it).
public struct MissingGnome: Error, CustomStringConvertible {
    public var program: String
    public var package: String
    public var description: String { "\(program) is missing: install the Debian package \(package) (scripts/install-deps does)" }
}

/// The compositor did not start (or ended): its log says why.
public struct GnomeFailed: Error, CustomStringConvertible {
    public var compositor: GnomeCompositor
    public var log: String
    public var description: String { "\(compositor) did not start (nested in Xvfb): \(log.suffix(2000))" }
}

/// A client program (wl-copy) exited with a failure.
public struct GnomeClientFailed: Error, CustomStringConvertible {
    public var program: String
    public var status: Int32
    public var description: String { "\(program) exited with status \(status)" }
}
