// SPDX-License-Identifier: GPL-2.0-or-later
import Glibc

/// The data-control protocols the adapter speaks, in the order it prefers them.
public enum WaylandDataControlProtocol: String, Sendable, Equatable, CaseIterable {
    /// ext-data-control-v1 (wayland-protocols, staging): what newer wlroots, KWin, Hyprland, COSMIC offer.
    case ext = "ext_data_control_manager_v1"
    /// wlr-data-control-unstable-v1, its forerunner: what older compositors such as sway 1.7 offer.
    case wlr = "zwlr_data_control_manager_v1"

    /// The highest version of the manager this adapter was written for (wlr version 2 adds the
    /// primary selection, which the adapter never sets but must expect offers of).
    var supportedVersion: UInt32 { self == .ext ? 1 : 2 }
}

/// Whether the session's compositor lets a client watch and set the clipboard (data control), and
/// why not: for the agent's choice of adapter and for `baton doctor`.
public enum WaylandDataControlAvailability: Sendable, Equatable, CustomStringConvertible {
    /// The compositor offers data control through this protocol (version as advertised).
    case available(WaylandDataControlProtocol, version: UInt32)
    /// WAYLAND_DISPLAY is not set: no Wayland session (an X11 session, or none).
    case noDisplay
    /// The compositor's socket could not be reached or did not answer.
    case cannotConnect(String)
    /// The compositor answers but offers neither data-control protocol; which compositor it is, as
    /// far as its globals tell (GNOME's Mutter hands its XWayland's X11 clients the clipboard).
    case noDataControl(WaylandCompositor)

    public var description: String {
        switch self {
        case .available(let kind, let version): "the compositor offers \(kind.rawValue) version \(version)"
        case .noDisplay: "no Wayland session (WAYLAND_DISPLAY is not set)"
        case .cannotConnect(let reason): reason
        case .noDataControl(.mutter):
            "GNOME's Wayland compositor (Mutter) offers no clipboard access to other Wayland programs (neither ext-data-control-v1 nor wlr-data-control)"
        case .noDataControl(.other):
            "the Wayland compositor offers no clipboard access to other programs (neither ext-data-control-v1 nor wlr-data-control)"
        }
    }
}

/// Which compositor answers, for what its lack of data control means (docs/clipboard.md, "GNOME").
public enum WaylandCompositor: Sendable, Equatable {
    /// GNOME's Mutter (GNOME Shell): it announces `gtk_shell1`, which only Mutter and compositors
    /// for GNOME (Phosh's phoc, which offers data control) do.
    case mutter
    /// Any other.
    case other
}

/// An availability other than `.available`, as an error.
struct WaylandUnavailable: Error {
    var availability: WaylandDataControlAvailability
    init(_ availability: WaylandDataControlAvailability) { self.availability = availability }
}

/// Asks the session's compositor (WAYLAND_DISPLAY in `environment`) which globals it offers and
/// answers whether data control is among them. Connects, asks once, disconnects; waits at most
/// `timeout` for the answer (blocking the calling thread).
public func waylandDataControlAvailability(environment: [String: String], timeout: Duration = .seconds(5))
    -> WaylandDataControlAvailability {
    let connection: WaylandConnection
    do {
        connection = try WaylandConnection.connect(environment: environment)
    } catch {
        return error.availability
    }
    defer { connection.close() }
    do {
        let globals = try WaylandGlobals.fetch(connection, timeout: timeout)
        guard let (kind, global) = globals.dataControl else { return .noDataControl(globals.compositor) }
        return .available(kind, version: global.version)
    } catch {
        return error.availability
    }
}

/// One global the registry announced.
struct WaylandGlobal: Equatable {
    var name: UInt32
    var interface: String
    var version: UInt32
}

/// The registry's globals, learnt with one round trip at the start of a connection.
struct WaylandGlobals {
    /// A registry of more globals than this is hostile (a desktop has a few dozen).
    static let maximumCount = 1024

    var registry: UInt32
    var all: [WaylandGlobal]

    /// The preferred data-control manager the compositor offers.
    var dataControl: (WaylandDataControlProtocol, WaylandGlobal)? {
        for kind in WaylandDataControlProtocol.allCases {
            if let global = all.first(where: { $0.interface == kind.rawValue && $0.version >= 1 }) { return (kind, global) }
        }
        return nil
    }

    var seat: WaylandGlobal? { all.first { $0.interface == "wl_seat" && $0.version >= 1 } }

    /// GNOME's Mutter, told by its `gtk_shell1` global; otherwise another compositor.
    var compositor: WaylandCompositor { all.contains { $0.interface == "gtk_shell1" } ? .mutter : .other }

    /// get_registry, then sync: every global is announced before the sync's callback is done.
    static func fetch(_ connection: WaylandConnection, timeout: Duration) throws(WaylandUnavailable) -> WaylandGlobals {
        let registry = connection.newID()
        var request = WaylandRequest(object: 1, opcode: WaylandInterface.Display.getRegistry)
        request.uint(registry)
        connection.send(request)
        let callback = connection.newID()
        request = WaylandRequest(object: 1, opcode: WaylandInterface.Display.sync)
        request.uint(callback)
        connection.send(request)
        var globals = WaylandGlobals(registry: registry, all: [])
        var done = false
        try roundTrip(connection, timeout: timeout, until: { done }) { message in
            var arguments = WaylandArguments(message)
            switch (message.object, message.opcode) {
            case (1, _):
                try handleDisplayEvent(message, connection)
            case (registry, WaylandInterface.Registry.global):
                let global = WaylandGlobal(name: try arguments.uint(), interface: try arguments.requiredString(),
                                           version: try arguments.uint())
                if globals.all.count < maximumCount { globals.all.append(global) }
            case (registry, WaylandInterface.Registry.globalRemove):
                let name = try arguments.uint()
                globals.all.removeAll { $0.name == name }
            case (callback, WaylandInterface.Callback.done):
                done = true
            default:
                throw WaylandWireError.unknownTarget(object: message.object, opcode: message.opcode)
            }
        }
        return globals
    }

    /// Writes what is queued, then reads and hands messages to `handle` until `until` holds
    /// (blocking the calling thread at most `timeout`).
    static func roundTrip(_ connection: WaylandConnection, timeout: Duration, until: () -> Bool,
                          handle: (WaylandMessage) throws -> Void) throws(WaylandUnavailable) {
        guard connection.flushBlocking() else { throw WaylandUnavailable(.cannotConnect("the Wayland compositor does not read its socket")) }
        let deadline = ContinuousClock.now + timeout
        while !until() {
            do {
                while !until(), let message = try connection.nextMessage() { try handle(message) }
            } catch let error as WaylandWireError {
                throw WaylandUnavailable(.cannotConnect("the Wayland compositor sent \(error)"))
            } catch let error as WaylandUnavailable {
                throw error
            } catch {
                throw WaylandUnavailable(.cannotConnect("\(error)"))
            }
            if until() { break }
            guard let left = milliseconds(until: deadline), connection.waitReadable(milliseconds: left) else {
                throw WaylandUnavailable(.cannotConnect("the Wayland compositor did not answer within \(timeout)"))
            }
            if case .closed(let reason) = connection.receive() { throw WaylandUnavailable(.cannotConnect(reason)) }
        }
    }

    /// wl_display's events: error (fatal: the compositor closes the connection after it) and delete_id.
    static func handleDisplayEvent(_ message: WaylandMessage, _ connection: WaylandConnection) throws {
        var arguments = WaylandArguments(message)
        switch message.opcode {
        case WaylandInterface.Display.error:
            let object = try arguments.uint()
            let code = try arguments.uint()
            let text = (try? arguments.string()).flatMap { $0 } ?? ""
            throw WaylandUnavailable(.cannotConnect(
                "the Wayland compositor refused a request of the clipboard adapter (object \(object), error \(code): \(text.prefix(200)))"))
        case WaylandInterface.Display.deleteID:
            connection.release(try arguments.uint())
        default:
            throw WaylandWireError.unknownTarget(object: 1, opcode: message.opcode)
        }
    }
}
