// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonWayland

/// Whether this session's clipboard can be shared, for `baton clipboard status` and `baton doctor`:
/// the environment says which kind of session it is, and a Wayland compositor is asked whether it
/// offers data control (what baton-agent's Wayland adapter needs) or is GNOME's Mutter (then the
/// agent uses the session's XWayland display, as `makeSessionClipboard` does).
enum SessionClipboardSupport: Equatable {
    /// It can: through this session clipboard ("X11 display :0", "Wayland display wayland-1 (ext_data_control_manager_v1)",
    /// "X11 display :0 (XWayland in GNOME's Wayland session)").
    case works(String)
    /// It cannot: the session, why, and what to do.
    case cannot(session: String, reason: String, fix: String)

    /// The session clipboard in words.
    var session: String {
        switch self {
        case .works(let session), .cannot(let session, _, _): session
        }
    }

    /// `xwayland`: the session's XWayland display (DISPLAY), used when the compositor is GNOME's Mutter.
    init(choice: SessionClipboardChoice, wayland: WaylandDataControlAvailability?, xwayland: XWaylandDisplay? = nil) {
        switch choice {
        case .x11:
            self = .works(choice.description)
        case .wayland:
            switch wayland {
            case .available(let kind, _):
                self = .works("\(choice) (\(kind.rawValue))")
            case .noDataControl(.mutter):
                // Mutter hands X11 clients the clipboard whatever has the focus: the agent uses XWayland.
                if let xwayland {
                    self = .works(xwayland.description)
                } else {
                    self = .cannot(session: choice.description, reason: SessionClipboardChoice.gnomeWithoutXWayland.reason,
                                   fix: SessionClipboardChoice.gnomeWithoutXWayland.fix)
                }
            case .noDataControl(.other):
                self = .cannot(session: choice.description,
                               reason: "this Wayland compositor lets no other program watch or set the clipboard (it offers neither ext-data-control-v1 nor wlr-data-control)",
                               fix: "use a compositor that offers it (sway and other wlroots ones, KDE Plasma, Hyprland; COSMIC with COSMIC_DATA_CONTROL_ENABLED=1; GNOME through XWayland), or an X11 session")
            case .cannotConnect(let reason):
                self = .cannot(session: choice.description, reason: "the Wayland compositor could not be asked: \(reason)",
                               fix: "run this in your desktop session (WAYLAND_DISPLAY and XDG_RUNTIME_DIR as the session has them)")
            case .noDisplay, nil:
                self = .cannot(session: choice.description, reason: "the Wayland compositor was not asked",
                               fix: "run this in your desktop session")
            }
        case .none:
            self = .cannot(session: choice.description, reason: "there is no graphical session (neither DISPLAY nor WAYLAND_DISPLAY is set)",
                           fix: "run baton-agent in your desktop session (systemctl --user enable --now baton-agent)")
        }
    }

    /// Asks this session: a Wayland compositor is asked (waiting at most 5 s for its answer).
    static func probe(environment: [String: String]) -> SessionClipboardSupport {
        let choice = SessionClipboardChoice(environment: environment)
        guard case .wayland(let display) = choice else { return SessionClipboardSupport(choice: choice, wayland: nil) }
        var environment = environment
        environment["WAYLAND_DISPLAY"] = display
        return SessionClipboardSupport(choice: choice, wayland: waylandDataControlAvailability(environment: environment, timeout: .seconds(5)),
                                       xwayland: SessionClipboardChoice.xwayland(environment: environment))
    }
}
