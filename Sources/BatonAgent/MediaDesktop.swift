// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import CGio

/// What the media receiver asks of the desktop (GIO): whether a player's desktop entry is
/// installed as a media player, whether the session has a default handler for a URL scheme, and
/// starting an entry on a URL. Behind a protocol so the receiver's tests can record instead of start programs.
public protocol MediaDesktop: Sendable {
    /// The entry is installed and a media player (its Categories: `MediaPlayerName.isMediaPlayer`).
    /// The id comes from another machine: any other entry (a terminal, an office suite) is never
    /// started on its URL.
    func isMediaPlayer(desktopID: String) -> Bool
    func hasDefaultHandler(scheme: String) -> Bool
    /// The desktop id of the session's default application for files of `mediaType`, when it is a
    /// media player and no browser (a received local file is only ever opened by a player).
    func defaultMediaPlayer(mediaType: String) -> String?
    func launch(desktopID: String, uri: String) throws(LaunchError)
    /// Opens `uri` with the session's default handler for its scheme (for http(s): the browser).
    func openDefault(_ uri: String) async throws
}

/// `MediaDesktop` through GIO's GDesktopAppInfo, as the rest of the agent launches apps.
public struct GioMediaDesktop: MediaDesktop {
    let opener: any URLOpener

    public init(opener: any URLOpener = DesktopURLOpener()) {
        self.opener = opener
    }

    public func isMediaPlayer(desktopID: String) -> Bool {
        guard let desktop = g_desktop_app_info_new(desktopID) else { return false }
        defer { g_object_unref(UnsafeMutableRawPointer(desktop)) }
        return Self.isMediaPlayer(desktop)
    }

    /// `isMediaPlayer` for the desktop file at `path` (tests: GIO finds ids through the process's
    /// XDG directories, read once).
    public static func isMediaPlayer(desktopFile path: String) -> Bool {
        guard let desktop = g_desktop_app_info_new_from_filename(path) else { return false }
        defer { g_object_unref(UnsafeMutableRawPointer(desktop)) }
        return isMediaPlayer(desktop)
    }

    private static func isMediaPlayer(_ desktop: OpaquePointer) -> Bool {
        MediaPlayerName.isMediaPlayer(categories: g_desktop_app_info_get_categories(desktop).map { String(cString: $0) })
    }

    public func hasDefaultHandler(scheme: String) -> Bool {
        guard let info = g_app_info_get_default_for_uri_scheme(scheme) else { return false }
        g_object_unref(UnsafeMutableRawPointer(info))
        return true
    }

    public func defaultMediaPlayer(mediaType: String) -> String? {
        guard let info = g_app_info_get_default_for_type(mediaType, 0) else { return nil }
        defer { g_object_unref(UnsafeMutableRawPointer(info)) }
        guard let id = g_app_info_get_id(info).map({ String(cString: $0) }), id.hasSuffix(".desktop"),
              !MediaPlayerName.isBrowser(busName: id, desktopEntry: id), isMediaPlayer(desktopID: id) else { return nil }
        return id
    }

    public func launch(desktopID: String, uri: String) throws(LaunchError) {
        guard let desktop = g_desktop_app_info_new(desktopID) else { throw LaunchError(message: "no desktop entry \(desktopID)") }
        defer { g_object_unref(UnsafeMutableRawPointer(desktop)) }
        let copy = g_strdup(uri)
        let list = g_list_append(nil, copy)
        defer {
            g_free(copy)
            g_list_free(list)
        }
        var error: UnsafeMutablePointer<GError>?
        if g_app_info_launch_uris(desktop, list, nil, &error) == 0 {
            var message = "starting \(desktopID) failed"
            if let error {
                if let text = error.pointee.message { message += ": " + String(cString: text) }
                g_error_free(error)
            }
            throw LaunchError(message: message)
        }
    }

    public func openDefault(_ uri: String) async throws { try await opener.open(uri) }
}
