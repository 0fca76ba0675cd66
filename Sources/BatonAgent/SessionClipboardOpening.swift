// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonClient
import BatonCore
import BatonDBus
import BatonPublishers
import BatonSystem
import BatonWayland
import BatonX11
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A session clipboard the agent opened, and how to close it.
public struct OpenedSessionClipboard: Sendable {
    public let clipboard: any SessionClipboard
    /// In words: "X11 display :0".
    public let name: String
    public let close: @Sendable () -> Void

    public init(clipboard: any SessionClipboard, name: String, close: @escaping @Sendable () -> Void) {
        self.clipboard = clipboard
        self.name = name
        self.close = close
    }
}

/// The one place the agent chooses its session clipboard adapter: X11 on an X11 display, the
/// compositor's data control (ext-data-control-v1, else wlr-data-control) in a Wayland session,
/// and in GNOME's Wayland session, whose Mutter offers no data control, X11 on its XWayland display
/// (Mutter hands X11 clients the clipboard whatever has the focus; in `mutterXWayland` mode the
/// adapter refuses Mutter's own read of each of its offers and keeps a secret copy that Mutter puts
/// back unmarked secret). Another compositor without
/// data control, or GNOME without DISPLAY, fails with `.unavailable`, saying so. The X authority
/// file is the session's XAUTHORITY (from `environment`, not the process's).
public func makeSessionClipboard(environment: [String: String]) throws(ClipboardError) -> OpenedSessionClipboard {
    let choice = SessionClipboardChoice(environment: environment)
    switch choice {
    case .x11(let display):
        let authority = environment["XAUTHORITY"].flatMap { $0.isEmpty ? nil : $0 }
        let clipboard = try X11SessionClipboard(display: display, authority: authority)
        return OpenedSessionClipboard(clipboard: clipboard, name: choice.description, close: { clipboard.close() })
    case .wayland(let display):
        var environment = environment
        environment["WAYLAND_DISPLAY"] = display
        let failure: ClipboardError
        do throws(ClipboardError) {
            let clipboard = try WaylandSessionClipboard(environment: environment)
            return OpenedSessionClipboard(clipboard: clipboard, name: "\(choice) (\(clipboard.dataControlProtocol.rawValue))",
                                          close: { clipboard.close() })
        } catch {
            failure = error
        }
        // No data control: GNOME's Mutter is asked for by its globals (a second, short connection).
        guard case .noDataControl(.mutter) = waylandDataControlAvailability(environment: environment) else { throw failure }
        guard let xwayland = SessionClipboardChoice.xwayland(environment: environment) else {
            throw .unavailable(SessionClipboardChoice.gnomeWithoutXWayland.reason + "; " + SessionClipboardChoice.gnomeWithoutXWayland.fix)
        }
        let clipboard = try X11SessionClipboard(display: xwayland.display, authority: xwayland.authority,
                                                configuration: .init(mutterXWayland: true))
        return OpenedSessionClipboard(clipboard: clipboard, name: xwayland.description, close: { clipboard.close() })
    case .none:
        throw .unavailable(choice.unavailableReason ?? "no session clipboard")
    }
}

/// The copied bytes of one session copy: items in order in one sealed memory file (owned: closed
/// when the copy goes).
final class ReadCopy: Sendable {
    let revision: UInt64
    let items: [ClipboardItem]
    let leftOut: [String]
    /// The sealed memory file's descriptor, -1 when nothing could be kept.
    let descriptor: Int32

    init(revision: UInt64, items: [ClipboardItem], leftOut: [String], file: consuming FileDescriptor?) {
        self.revision = revision
        self.items = items
        self.leftOut = leftOut
        descriptor = file?.release() ?? -1
    }

    deinit { if descriptor >= 0 { FileDescriptor(taking: descriptor).close() } }

}
