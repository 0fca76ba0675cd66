// SPDX-License-Identifier: GPL-2.0-or-later
internal import CXCB
import Glibc

/// The few libxcb requests the clipboard needs, as Swift calls. Not thread-safe by itself: its owner
/// (`X11ClipboardCore`) calls it from one queue only. Requests that wait for a reply block on the
/// local X server for one round trip; events that arrive meanwhile stay in libxcb's queue, which the
/// owner drains after every piece of work.
///
/// `@unchecked Sendable`: it is a pointer to libxcb's connection, which only the owner's queue uses
/// (the readiness source's cancel handler, which disconnects, runs there too, after the last use).
struct X11Connection: @unchecked Sendable {
    let raw: OpaquePointer

    /// The reply of GetProperty.
    struct Property {
        var type: xcb_atom_t
        var format: UInt8
        var bytes: [UInt8]
        /// Bytes left after what was read.
        var bytesAfter: Int
    }

    func flush() { _ = xcb_flush(raw) }
    var hasError: Bool { xcb_connection_has_error(raw) != 0 }

    /// Atoms for `names`, created when missing; nil when the server refused (connection lost).
    func intern(_ names: [String]) -> [xcb_atom_t]? {
        let cookies = names.map { name in
            name.withCString { xcb_intern_atom(raw, 0, UInt16(strlen($0)), $0) }
        }
        var atoms: [xcb_atom_t] = []
        var failed = false
        for cookie in cookies {
            var error: UnsafeMutablePointer<xcb_generic_error_t>?
            let reply = xcb_intern_atom_reply(raw, cookie, &error)
            free(error)
            if let reply {
                atoms.append(reply.pointee.atom)
                free(reply)
            } else {
                failed = true
            }
        }
        return failed ? nil : atoms
    }

    /// The names of `atoms`; nil for an atom the server does not know (a hostile or stale list).
    func names(of atoms: [xcb_atom_t]) -> [String?] {
        let cookies = atoms.map { xcb_get_atom_name(raw, $0) }
        return cookies.map { cookie -> String? in
            var error: UnsafeMutablePointer<xcb_generic_error_t>?
            let reply = xcb_get_atom_name_reply(raw, cookie, &error)
            free(error)
            guard let reply else { return nil }
            defer { free(reply) }
            let length = Int(xcb_get_atom_name_name_length(reply))
            guard let start = xcb_get_atom_name_name(reply) else { return nil }
            return start.withMemoryRebound(to: UInt8.self, capacity: length) {
                String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
            }
        }
    }

    /// GetProperty of at most `maximumBytes` bytes (rounded up to whole 32-bit units, as the request counts).
    func property(_ property: xcb_atom_t, of window: xcb_window_t, delete: Bool, maximumBytes: Int) -> Property? {
        let units = UInt32(clamping: (maximumBytes + 3) / 4)
        let cookie = xcb_get_property(raw, delete ? 1 : 0, window, property, 0 /* AnyPropertyType */, 0, units)
        var error: UnsafeMutablePointer<xcb_generic_error_t>?
        let reply = xcb_get_property_reply(raw, cookie, &error)
        free(error)
        guard let reply else { return nil }
        defer { free(reply) }
        let length = Int(xcb_get_property_value_length(reply))
        var bytes: [UInt8] = []
        if length > 0, let value = xcb_get_property_value(reply) {
            bytes = Array(UnsafeRawBufferPointer(start: value, count: length))
        }
        return Property(type: reply.pointee.type, format: reply.pointee.format, bytes: bytes,
                        bytesAfter: Int(reply.pointee.bytes_after))
    }

    func deleteProperty(_ property: xcb_atom_t, of window: xcb_window_t) {
        xcb_delete_property(raw, window, property)
    }

    /// ChangeProperty with 8-bit data.
    func setProperty(_ property: xcb_atom_t, of window: xcb_window_t, type: xcb_atom_t, bytes: UnsafeRawBufferPointer,
                     append: Bool = false) {
        xcb_change_property(raw, UInt8(append ? XCB_PROP_MODE_APPEND.rawValue : XCB_PROP_MODE_REPLACE.rawValue),
                            window, property, type, 8, UInt32(bytes.count), bytes.baseAddress)
    }

    /// ChangeProperty with 32-bit data (atoms, timestamps, the INCR size).
    func setProperty(_ property: xcb_atom_t, of window: xcb_window_t, type: xcb_atom_t, words: [UInt32]) {
        _ = words.withUnsafeBytes {
            xcb_change_property(raw, UInt8(XCB_PROP_MODE_REPLACE.rawValue), window, property, type, 32,
                                UInt32(words.count), $0.baseAddress)
        }
    }

    func selectionOwner(_ selection: xcb_atom_t) -> xcb_window_t? {
        let cookie = xcb_get_selection_owner(raw, selection)
        var error: UnsafeMutablePointer<xcb_generic_error_t>?
        let reply = xcb_get_selection_owner_reply(raw, cookie, &error)
        free(error)
        guard let reply else { return nil }
        defer { free(reply) }
        return reply.pointee.owner
    }

    /// SendEvent of a SelectionNotify to `requestor` (property 0: the request failed).
    func notifySelection(requestor: xcb_window_t, selection: xcb_atom_t, target: xcb_atom_t, property: xcb_atom_t,
                         time: xcb_timestamp_t) {
        var event = xcb_selection_notify_event_t()
        event.response_type = UInt8(XCB_SELECTION_NOTIFY)
        event.time = time
        event.requestor = requestor
        event.selection = selection
        event.target = target
        event.property = property
        // SendEvent carries 32 bytes whatever the event's size.
        var wire = [CChar](repeating: 0, count: 32)
        withUnsafeBytes(of: &event) { source in
            wire.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(32))) }
        }
        wire.withUnsafeBufferPointer {
            _ = xcb_send_event(raw, 0, requestor, UInt32(XCB_EVENT_MASK_NO_EVENT.rawValue), $0.baseAddress)
        }
    }

    /// The events this client receives from another client's window (a requestor of an INCR transfer).
    func watch(_ window: xcb_window_t, mask: UInt32) {
        var value = mask
        _ = xcb_change_window_attributes(raw, window, UInt32(XCB_CW_EVENT_MASK.rawValue), &value)
    }
}
