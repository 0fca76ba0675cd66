// SPDX-License-Identifier: GPL-2.0-or-later
import CGio

/// A handler app found among the installed .desktop files.
public struct DesktopHandler: Sendable, Hashable {
    /// The desktop file id, e.g. "org.example.Reader.desktop".
    public var id: String
    public var activityTypes: [String]
}

public struct LaunchError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Finds and starts handler apps the way the desktop does, through GIO's GDesktopAppInfo:
/// XDG_DATA_DIRS lookup, Exec field codes, DBusActivatable, and the session's environment.
/// GIO reads the directories once per process, so a process sees the entries of its start.
public struct DesktopAppLauncher: Sendable {
    /// The .desktop key listing the activity types an app continues (";"-separated, as in docs/dbus-api.md).
    public static let activityTypesKey = "X-Baton-ActivityTypes"

    public init() {}

    /// Every installed app that declares activity types, sorted by id.
    public func handlers() -> [DesktopHandler] {
        var found: [DesktopHandler] = []
        var node = g_app_info_get_all()
        let list = node
        while let current = node {
            // GAppInfo and GDesktopAppInfo are opaque to Swift: the list holds untyped pointers.
            if let data = current.pointee.data, let id = g_app_info_get_id(OpaquePointer(data)).map({ String(cString: $0) }),
               let desktop = g_desktop_app_info_new(id) {
                if let value = g_desktop_app_info_get_string(desktop, Self.activityTypesKey) {
                    let types = String(cString: value).split(separator: ";").map { String($0).trimmed }.filter { !$0.isEmpty }
                    g_free(value)
                    if !types.isEmpty { found.append(DesktopHandler(id: id, activityTypes: types)) }
                }
                g_object_unref(UnsafeMutableRawPointer(desktop))
            }
            node = current.pointee.next
        }
        g_list_free_full(list) { g_object_unref($0) }
        return found.sorted { $0.id < $1.id }
    }

    /// The apps that handle `activityType`.
    public func handlers(for activityType: String) -> [DesktopHandler] {
        handlers().filter { $0.activityTypes.contains(activityType) }
    }

    /// Starts the first app (by id) that handles `activityType`; returns its desktop id.
    public func launch(activityType: String) throws(LaunchError) -> String {
        guard let handler = handlers(for: activityType).first else {
            throw LaunchError(message: "no installed app handles \(activityType)")
        }
        try launch(desktopID: handler.id)
        return handler.id
    }

    public func launch(desktopID: String) throws(LaunchError) {
        guard let desktop = g_desktop_app_info_new(desktopID) else { throw LaunchError(message: "no desktop entry \(desktopID)") }
        defer { g_object_unref(UnsafeMutableRawPointer(desktop)) }
        var error: UnsafeMutablePointer<GError>?
        if g_app_info_launch_uris(desktop, nil, nil, &error) == 0 { throw LaunchError(message: Self.consume(error, or: "launching \(desktopID) failed")) }
    }

    /// Opens a web page with the user's default browser.
    public func open(url: String) throws(LaunchError) {
        var error: UnsafeMutablePointer<GError>?
        if g_app_info_launch_default_for_uri(url, nil, &error) == 0 {
            throw LaunchError(message: Self.consume(error, or: "opening \(url) failed"))
        }
    }

    private static func consume(_ error: UnsafeMutablePointer<GError>?, or fallback: String) -> String {
        guard let error else { return fallback }
        defer { g_error_free(error) }
        return error.pointee.message.map { String(cString: $0) } ?? fallback
    }
}

/// `URLOpener` through GIO, for the browser fallback.
public struct DesktopURLOpener: URLOpener {
    public init() {}
    public func open(_ url: String) async throws { try DesktopAppLauncher().open(url: url) }
}

extension String {
    var trimmed: String {
        var text = Substring(self)
        while text.first?.isWhitespace == true { text = text.dropFirst() }
        while text.last?.isWhitespace == true { text = text.dropLast() }
        return String(text)
    }
}
