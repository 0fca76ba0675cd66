// SPDX-License-Identifier: GPL-2.0-or-later
import Foundation

/// A headless media player with MPRIS on a given session bus (docs/media.md), for the media tests
/// on the host and in the lab: mpv with mpv-mpris (no config, no video, the null audio output,
/// idle at the end rather than quitting), or VLC's dummy interface with its D-Bus control
/// module (no video, the dummy audio output). Both play in real time.
///
/// VLC refuses to run as root ("VLC is not supposed to be run as root"), so when this process is
/// root (the lab, CI containers) it runs as `nobody` through setpriv, with a home of its own;
/// the test buses (`TestBus(.session)`) let every local user connect.
public final class HeadlessPlayer: @unchecked Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case mpv, vlc

        public static let mpvPath = "/usr/bin/mpv"
        public static let mprisScript = "/etc/mpv/scripts/mpris.so"
        public static let vlcPath = "/usr/bin/vlc"
        public static let vlcDBusPlugin = "/usr/lib/x86_64-linux-gnu/vlc/plugins/control/libdbus_plugin.so"

        /// The MPRIS bus name the first player of this kind owns (VLC also owns `vlc.instancePID`).
        public var busName: String { "org.mpris.MediaPlayer2.\(rawValue)" }

        /// Why this player cannot run here, naming the Debian packages (nil when it can).
        public var missing: String? {
            switch self {
            case .mpv:
                if !FileManager.default.isExecutableFile(atPath: Self.mpvPath) { return "mpv is missing (Debian package mpv; scripts/install-deps installs it)" }
                if !FileManager.default.fileExists(atPath: Self.mprisScript) { return "mpv-mpris is missing (Debian package mpv-mpris; scripts/install-deps installs it)" }
            case .vlc:
                if !FileManager.default.isExecutableFile(atPath: Self.vlcPath) { return "VLC is missing (Debian package vlc-bin; scripts/install-deps installs it)" }
                if !FileManager.default.fileExists(atPath: Self.vlcDBusPlugin) {
                    return "VLC's D-Bus control module is missing (Debian package vlc-plugin-base; scripts/install-deps installs it)"
                }
                if geteuid() == 0, !FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") {
                    return "setpriv is missing (Debian package util-linux), needed to run VLC as nobody"
                }
            }
            return nil
        }
    }

    public let kind: Kind
    public let process = Process()

    /// `start`: seconds into the media; `pause`: opened paused. `home`: a directory for the player's
    /// own files (made, and given to nobody for VLC run as root).
    public init(_ kind: Kind, sessionAddress: String, home: URL, url: String, start: Int?, pause: Bool, log: URL) throws {
        self.kind = kind
        FileManager.default.createFile(atPath: log.path, contents: nil)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        var environment = ["DBUS_SESSION_BUS_ADDRESS": sessionAddress, "HOME": home.path, "PATH": "/usr/bin:/bin",
                           "XDG_CONFIG_HOME": home.appendingPathComponent("config").path,
                           "XDG_CACHE_HOME": home.appendingPathComponent("cache").path,
                           "XDG_DATA_HOME": home.appendingPathComponent("data").path]
        switch kind {
        case .mpv:
            process.executableURL = URL(fileURLWithPath: Kind.mpvPath)
            var arguments = ["--no-config", "--no-video", "--ao=null", "--idle=yes", "--no-terminal", "--script=\(Kind.mprisScript)"]
            if let start { arguments.append("--start=\(start)") }
            if pause { arguments.append("--pause") }
            process.arguments = arguments + [url]
        case .vlc:
            // -I dummy: no interface; --control dbus: MPRIS; no video, audio to nowhere (in real time).
            var arguments = ["-I", "dummy", "--control", "dbus", "--aout", "dummy", "--no-video", "--no-osd"]
            if let start { arguments.append("--start-time=\(start)") }
            if pause { arguments.append("--start-paused") }
            arguments.append(url)
            if geteuid() == 0 {
                guard let entry = getpwnam("nobody") else { throw HeadlessPlayerError.noNobody }
                let uid = entry.pointee.pw_uid, gid = entry.pointee.pw_gid
                chown(home.path, uid, gid)
                // The directories above must let nobody through to its home.
                process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                process.arguments = ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", Kind.vlcPath] + arguments
            } else {
                process.executableURL = URL(fileURLWithPath: Kind.vlcPath)
                process.arguments = arguments
            }
            environment["VLC_VERBOSE"] = "0"
        }
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: log)
        try launch(process)
    }

    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

public enum HeadlessPlayerError: Error, CustomStringConvertible {
    case noNobody
    public var description: String { "there is no user nobody to run VLC as (VLC refuses root)" }
}

/// `python3 -m http.server` on an ephemeral port of `host` (loopback by default), serving `directory`.
public final class MediaWebServer: @unchecked Sendable {
    public let process = Process()
    public let log: URL

    public init(directory: URL, log: URL, host: String = "127.0.0.1") throws {
        self.log = log
        FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-u", "-m", "http.server", "0", "--bind", host, "--directory", directory.path]
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        try launch(process)
    }

    /// The port from "Serving HTTP on HOST port N (...)".
    public var port: Int? {
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        guard let range = text.range(of: " port ") else { return nil }
        return Int(text[range.upperBound...].prefix { $0.isNumber })
    }

    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A WAV file of silence: 8 kHz, mono, 16-bit, `seconds` long.
public func silentWAV(seconds: Int) -> Data {
    let samples = 8000 * seconds, bytes = samples * 2
    var data = Data()
    func add(_ text: String) { data.append(contentsOf: Array(text.utf8)) }
    func add32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
    func add16(_ value: UInt16) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
    add("RIFF"); add32(UInt32(36 + bytes)); add("WAVE")
    add("fmt "); add32(16); add16(1); add16(1); add32(8000); add32(16000); add16(2); add16(16)
    add("data"); add32(UInt32(bytes))
    data.append(Data(count: bytes))
    return data
}

/// A duration in seconds.
public func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}
