// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonXvfb
import CTestSpawn
import CXCB
import Foundation
import Testing

/// Collects a clipboard's events so that a test can wait for the next one with a generous guard.
actor EventRecorder {
    private var buffered: [ClipboardEvent] = []
    private var waiter: (id: Int, continuation: CheckedContinuation<ClipboardEvent?, Never>)?
    private var nextWaiter = 0

    init(_ events: AsyncStream<ClipboardEvent>) {
        Task { [weak self] in
            for await event in events { await self?.record(event) }
        }
    }

    private func record(_ event: ClipboardEvent) {
        if let waiter {
            self.waiter = nil
            waiter.continuation.resume(returning: event)
        } else {
            buffered.append(event)
        }
    }

    /// The next event, or nil after `timeout` (only a guard: the tests expect the event long before).
    func next(timeout: Duration = .seconds(30)) async -> ClipboardEvent? {
        if !buffered.isEmpty { return buffered.removeFirst() }
        nextWaiter += 1
        let id = nextWaiter
        return await withCheckedContinuation { continuation in
            waiter = (id, continuation)
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                await self?.expire(id)
            }
        }
    }

    private func expire(_ id: Int) {
        guard let waiter, waiter.id == id else { return }
        self.waiter = nil
        waiter.continuation.resume(returning: nil)
    }

    /// The next change, skipping other events.
    func nextChange(timeout: Duration = .seconds(30)) async -> ClipboardChange? {
        while let event = await next(timeout: timeout) {
            if case .changed(let change) = event { return change }
        }
        return nil
    }
}

/// Deterministic bytes that are no text (a stand-in for an image).
func binaryBytes(count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 56)
    }
}

/// Counts calls of `provide` per type, and can make the next call of a type fail.
actor ProvideLog {
    private(set) var calls: [String: Int] = [:]
    private var failing: Set<String> = []
    func called(_ type: String) -> Bool {
        calls[type, default: 0] += 1
        return failing.remove(type) == nil
    }
    func failNext(_ type: String) { failing.insert(type) }
    func count(_ type: String) -> Int { calls[type, default: 0] }
    var total: Int { calls.values.reduce(0, +) }
}

struct ProvideFailed: Error {}

/// Another X client written against libxcb directly: owns CLIPBOARD and answers TARGETS with a
/// crafted list of atoms (garbage, too many), or never answers at all. Its thread waits for events
/// until the display goes away.
struct RawOwnerFailed: Error {}

final class RawSelectionOwner: @unchecked Sendable {
    // @unchecked: after `init`, only the owner's own thread touches the connection.
    private let connection: OpaquePointer
    private let window: xcb_window_t
    private let targetsReply: [xcb_atom_t]?
    private let targetsAtom: xcb_atom_t

    /// `targets`: names interned and answered to TARGETS; `garbage`: atom numbers that name nothing,
    /// put first. nil: answers nothing, ever.
    init(display: String, targets: [String]?, garbage: [xcb_atom_t] = []) throws {
        let connection = try rawConnection(display)
        self.connection = connection
        func intern(_ name: String) -> xcb_atom_t { internAtom(connection, name) }
        targetsAtom = intern("TARGETS")
        targetsReply = targets.map { names in garbage + names.map(intern) }
        let screen = xcb_setup_roots_iterator(xcb_get_setup(connection)).data!
        window = xcb_generate_id(connection)
        xcb_create_window(connection, 0, window, screen.pointee.root, 0, 0, 1, 1, 0,
                          UInt16(XCB_WINDOW_CLASS_INPUT_ONLY.rawValue), 0, 0, nil)
        let clipboard = intern("CLIPBOARD")
        xcb_set_selection_owner(connection, window, clipboard, UInt32(XCB_CURRENT_TIME))
        // A round trip: the server has made this window the owner before init returns, so a
        // conversion the test asks for next (on another connection) reaches this owner, not the one before.
        let owner = xcb_get_selection_owner_reply(connection, xcb_get_selection_owner(connection, clipboard), nil)
        defer { free(owner) }
        guard owner?.pointee.owner == window else { throw RawOwnerFailed() }
        Thread { [self] in serve() }.start()
    }

    private func serve() {
        while let event = xcb_wait_for_event(connection) {
            defer { free(event) }
            guard Int32(event.pointee.response_type & 0x7F) == XCB_SELECTION_REQUEST, let targetsReply else { continue }
            let request = UnsafeRawPointer(event).load(as: xcb_selection_request_event_t.self)
            var notify = xcb_selection_notify_event_t()
            notify.response_type = UInt8(XCB_SELECTION_NOTIFY)
            notify.time = request.time
            notify.requestor = request.requestor
            notify.selection = request.selection
            notify.target = request.target
            notify.property = 0
            if request.target == targetsAtom {
                _ = targetsReply.withUnsafeBytes {
                    xcb_change_property(connection, UInt8(XCB_PROP_MODE_REPLACE.rawValue), request.requestor, request.property,
                                        xcb_atom_t(XCB_ATOM_ATOM.rawValue), 32, UInt32(targetsReply.count), $0.baseAddress)
                }
                notify.property = request.property
            }
            var wire = [CChar](repeating: 0, count: 32)
            withUnsafeBytes(of: &notify) { source in
                wire.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(32))) }
            }
            wire.withUnsafeBufferPointer { _ = xcb_send_event(connection, 0, request.requestor, 0, $0.baseAddress) }
            xcb_flush(connection)
        }
        xcb_disconnect(connection)
    }
}

/// A pasting app that asks for a type, receives the answer's start, and then never reads on: an
/// INCR answer to it stalls. The connection stays open until this object goes.
final class StalledRequestor: @unchecked Sendable {
    // @unchecked: the connection is used in `init` only, then closed by `deinit`.
    private let connection: OpaquePointer
    /// The type of the property the owner answered with (INCR for a large answer), 0 if refused.
    let answerType: xcb_atom_t
    let incrAtom: xcb_atom_t

    init(display: String, target: String) throws {
        let connection = try rawConnection(display)
        self.connection = connection
        func intern(_ name: String) -> xcb_atom_t { internAtom(connection, name) }
        incrAtom = intern("INCR")
        let property = intern("STALLED")
        let screen = xcb_setup_roots_iterator(xcb_get_setup(connection)).data!
        let window = xcb_generate_id(connection)
        xcb_create_window(connection, 0, window, screen.pointee.root, 0, 0, 1, 1, 0,
                          UInt16(XCB_WINDOW_CLASS_INPUT_ONLY.rawValue), 0, 0, nil)
        xcb_convert_selection(connection, window, intern("CLIPBOARD"), intern(target), property, UInt32(XCB_CURRENT_TIME))
        xcb_flush(connection)
        var type: xcb_atom_t = 0
        while let event = xcb_wait_for_event(connection) {
            defer { free(event) }
            guard Int32(event.pointee.response_type & 0x7F) == XCB_SELECTION_NOTIFY else { continue }
            let notify = UnsafeRawPointer(event).load(as: xcb_selection_notify_event_t.self)
            if notify.property != 0 {
                // Looks at the property without deleting it: the owner waits for that deletion.
                let reply = xcb_get_property_reply(connection, xcb_get_property(connection, 0, window, property, 0, 0, 0), nil)
                type = reply?.pointee.type ?? 0
                free(reply)
            }
            break
        }
        answerType = type
    }

    deinit { xcb_disconnect(connection) }
}

/// A plain xcb connection for the hostile test clients (their own, not the adapter's).
func rawConnection(_ display: String) throws -> OpaquePointer {
    var screenNumber: Int32 = 0
    guard let connection = xcb_connect(display, &screenNumber), xcb_connection_has_error(connection) == 0 else {
        throw XvfbServer.XvfbFailed()
    }
    return connection
}

/// The atom named `name` on `connection`, interned; 0 if the server did not answer.
func internAtom(_ connection: OpaquePointer, _ name: String) -> xcb_atom_t {
    let cookie = name.withCString { xcb_intern_atom(connection, 0, UInt16(strlen($0)), $0) }
    let reply = xcb_intern_atom_reply(connection, cookie, nil)
    defer { free(reply) }
    return reply?.pointee.atom ?? 0
}
