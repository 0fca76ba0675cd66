// SPDX-License-Identifier: GPL-2.0-or-later
#if canImport(Glibc)
import Glibc
#endif
import BatonSystem
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Which session clipboard a session has, from its environment: what the agent opens
/// (`makeSessionClipboard`), what `baton clipboard status` and `baton doctor` report.
public enum SessionClipboardChoice: Sendable, Equatable, CustomStringConvertible {
    /// An X11 session: CLIPBOARD on this display (BatonX11).
    case x11(display: String)
    /// A Wayland session (WAYLAND_DISPLAY, or XDG_SESSION_TYPE=wayland): the compositor's data
    /// control (BatonWayland), where it offers one. Its XWayland display is not used then: wlroots
    /// compositors hand X clients the clipboard only while one of their windows has the focus, so
    /// copies in Wayland apps would go unseen. GNOME's Mutter offers no data control but hands its
    /// XWayland's X11 clients the clipboard whatever has the focus: there the agent uses the X11
    /// adapter on that display (`xwayland`; docs/clipboard.md, "GNOME").
    case wayland(display: String)
    /// Neither (a text console, ssh, a service without a session).
    case none

    public init(environment: [String: String]) {
        if let wayland = environment["WAYLAND_DISPLAY"], !wayland.isEmpty {
            self = .wayland(display: wayland)
        } else if environment["XDG_SESSION_TYPE"] == "wayland" {
            self = .wayland(display: "wayland-0")
        } else if let display = environment["DISPLAY"], !display.isEmpty {
            self = .x11(display: display)
        } else {
            self = .none
        }
    }

    public var description: String {
        switch self {
        case .x11(let display): "X11 display \(display)"
        case .wayland(let display): "Wayland display \(display)"
        case .none: "no graphical session"
        }
    }

    /// The session's XWayland display (DISPLAY) and X authority file (XAUTHORITY), for a Wayland
    /// session whose compositor is GNOME's Mutter; nil when DISPLAY is not set.
    public static func xwayland(environment: [String: String]) -> XWaylandDisplay? {
        guard let display = environment["DISPLAY"], !display.isEmpty else { return nil }
        let authority = environment["XAUTHORITY"].flatMap { $0.isEmpty ? nil : $0 }
        return XWaylandDisplay(display: display, authority: authority)
    }

    /// Why GNOME's Wayland session cannot share the clipboard when DISPLAY is not set, and what to do.
    public static let gnomeWithoutXWayland = (
        reason: "GNOME's Wayland compositor (Mutter) lets no Wayland program watch or set the clipboard, so baton-agent reaches it through XWayland, but DISPLAY is not set (XWayland is turned off, or the agent started without the session's environment)",
        fix: "start baton-agent in the GNOME session with its DISPLAY and XAUTHORITY (systemctl --user import-environment DISPLAY XAUTHORITY, then systemctl --user restart baton-agent)")

    /// Why the clipboard cannot be shared in this session, as far as the environment tells, with
    /// what to do; nil when it may be (a Wayland compositor is still asked whether it offers data control).
    public var unavailableReason: String? {
        switch self {
        case .x11, .wayland: nil
        case .none: "there is no graphical session (neither DISPLAY nor WAYLAND_DISPLAY is set); run baton-agent in your desktop session"
        }
    }
}

/// A GNOME Wayland session's XWayland display, where the agent watches and sets the clipboard as
/// an X11 client: Mutter keeps X11's CLIPBOARD and the Wayland one the same, in both directions,
/// whichever window has the focus (docs/clipboard.md, "GNOME").
public struct XWaylandDisplay: Sendable, Equatable, CustomStringConvertible {
    /// The X display name (":0").
    public var display: String
    /// The X authority file with its cookie (Mutter writes `$XDG_RUNTIME_DIR/.mutter-Xwaylandauth.*`).
    public var authority: String?

    public init(display: String, authority: String?) {
        self.display = display
        self.authority = authority
    }

    public var description: String { "X11 display \(display) (XWayland in GNOME's Wayland session)" }
}

/// What baton-agent's clipboard bridge is doing, written by the agent whenever it changes to
/// $XDG_RUNTIME_DIR/baton/clipboard-agent (0600, atomically) and read by `baton clipboard status`.
/// `key = value` lines; unknown keys are skipped.
public struct ClipboardAgentStatus: Sendable, Equatable {
    /// The agent's process (the file of an agent that died is recognised by it).
    public var pid: Int32
    /// The session clipboard it uses ("X11 display :0"), or why none.
    public var sessionClipboard: String
    /// Clipboard1.RegisterAgent holds on the present batond.
    public var registered: Bool
    /// What this machine offers, in words ("text: text/plain;charset=utf-8 12 bytes"); nil: nothing.
    public var offer: String?
    /// The copy from another machine on the session clipboard, in words; nil: none.
    public var taken: String?
    /// Why the clipboard is not shared although it is on; nil when nothing stands in the way.
    public var problem: String?
    /// Why the last copy was not offered, or the last paste of files failed; nil: nothing to say.
    public var note: String?

    public init(pid: Int32, sessionClipboard: String, registered: Bool, offer: String? = nil, taken: String? = nil, problem: String? = nil,
                note: String? = nil) {
        self.pid = pid
        self.sessionClipboard = sessionClipboard
        self.registered = registered
        self.offer = offer
        self.taken = taken
        self.problem = problem
        self.note = note
    }

    public var text: String {
        var lines = ["pid = \(pid)", "session-clipboard = \(sessionClipboard)", "registered = \(registered ? "yes" : "no")"]
        if let offer { lines.append("offer = \(offer)") }
        if let taken { lines.append("taken = \(taken)") }
        if let problem { lines.append("problem = \(problem)") }
        if let note { lines.append("note = \(note)") }
        return lines.map { $0.replacingNewlines() + "\n" }.joined()
    }

    /// nil when the text holds no valid pid.
    public init?(parsing text: String) {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n").prefix(64) {
            let parts = line.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            values[parts[0].trimmedSpaces()] = parts[1].trimmedSpaces()
        }
        guard let pid = values["pid"].flatMap({ Int32($0) }), pid > 0 else { return nil }
        self.init(pid: pid, sessionClipboard: values["session-clipboard"] ?? "unknown", registered: values["registered"] == "yes",
                  offer: values["offer"], taken: values["taken"], problem: values["problem"], note: values["note"])
    }

    /// $XDG_RUNTIME_DIR/baton/clipboard-agent; nil without an absolute XDG_RUNTIME_DIR.
    public static func fileURL(environment: [String: String]) -> URL? {
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return nil }
        return URL(fileURLWithPath: runtime + "/baton/clipboard-agent")
    }

    /// The most of the file that is read: a status is a few lines.
    public static let maximumFileBytes = 16_384
    /// The agent's process name (/proc/PID/comm).
    public static let agentProcessName = "baton-agent"

    /// The status an agent left, if that agent still runs: a regular file of this account of at most
    /// `maximumFileBytes` (anything else is not read), whose pid is a running baton-agent of this
    /// account (a pid of any other process, or of none, means no agent runs).
    public static func load(environment: [String: String]) -> ClipboardAgentStatus? {
        guard let status = read(environment: environment), SmallFile.isProcess(status.pid, named: agentProcessName) else { return nil }
        return status
    }

    /// The status as written, whether its agent still runs or not (`load` believes it only then):
    /// a regular file of this account of at most `maximumFileBytes`, else nil.
    public static func read(environment: [String: String]) -> ClipboardAgentStatus? {
        guard let url = fileURL(environment: environment), let bytes = SmallFile.read(url.path, limit: maximumFileBytes, owner: geteuid()) else {
            return nil
        }
        return ClipboardAgentStatus(parsing: String(decoding: bytes, as: UTF8.self))
    }

    /// Writes the file: a temporary file (0600) written and synced, renamed over the old one.
    public func save(environment: [String: String]) -> Bool {
        guard let url = Self.fileURL(environment: environment) else { return false }
        let directory = url.deletingLastPathComponent().path
        _ = mkdir(directory, 0o700)
        let temporary = directory + "/.clipboard-agent.\(getpid())"
        let bytes = Array(text.utf8)
        let saved: Bool
        do throws(Errno) {
            let descriptor = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
            try descriptor.writeAll(bytes)
            saved = fsync(descriptor.rawValue) == 0
            descriptor.close()
        } catch {
            saved = false
        }
        guard saved, rename(temporary, url.path) == 0 else {
            unlink(temporary)
            return false
        }
        return true
    }

    public static func remove(environment: [String: String]) {
        if let url = fileURL(environment: environment) { unlink(url.path) }
    }
}

extension String {
    fileprivate func replacingNewlines() -> String { String(map { $0.isNewline ? " " : $0 }) }
}

extension Substring {
    fileprivate func trimmedSpaces() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
