// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
internal import CXCB
import BatonReadiness
import Dispatch
import Glibc

/// The clipboard's I/O shell. `@unchecked Sendable` because every mutable field is touched only on
/// `queue` (public entry points hop there with `queue.async`; the readiness source and the timers
/// run there), which is what makes it sound; libxcb's connection is used from that queue only.
final class X11ClipboardCore: @unchecked Sendable {
    let queue = DispatchQueue(label: "baton.x11.clipboard")
    let connection: X11Connection
    let window: xcb_window_t
    let configuration: X11SessionClipboard.Configuration
    let chunkBytes: Int
    let xfixesEvent: UInt8
    let eventsOut: AsyncStream<ClipboardEvent>.Continuation

    // Atoms interned at start.
    let clipboard, targets, timestampTarget, incr, utf8String, textTarget, stringTarget, hint, timestampProperty: xcb_atom_t
    /// Properties on our window that conversions write to, taken in turn: a conversion that was given
    /// up cannot disturb the next one, whose owner writes to another property.
    let transferProperties: [xcb_atom_t]

    // Queue-confined state.
    var readiness: (any DispatchSourceRead)?
    var isClosed = false
    var names: [xcb_atom_t: String] = [:]
    var revision: UInt64 = 0
    /// Counts owner changes: a change still being looked at is dropped when another came meanwhile.
    var ownerGeneration: UInt64 = 0
    var lastOwner: xcb_window_t = 0
    /// The current other owner's content types and the target each is read through.
    var ownerTargets: (owner: xcb_window_t, generation: UInt64, targets: [String: xcb_atom_t])?

    var conversions = ConversionQueue()
    var timestampWaiters: [(xcb_timestamp_t) -> Void] = []
    var currentOffer: Offer?
    var offerGeneration: UInt64 = 0
    var outgoing: [OutgoingKey: Outgoing] = [:]
    var statistics = X11SessionClipboard.Statistics()
    /// The content target names of the last change by another client when it was marked secret
    /// (`MutterClipboardManager.isRestoreOfSecret`); nil after any other change.
    var lastSecretTargets: Set<String>?
    /// The bits of a resource id that a client chooses (the server's setup): the rest name the client.
    let resourceIDMask: UInt32
    /// INCR answers in progress at once, at most.
    static let maximumTransfers = 16

    struct Offer {
        var generation: UInt64
        var since: xcb_timestamp_t
        /// Every target answered with content → the type `provide` is asked for.
        var targetTypes: [xcb_atom_t: String]
        /// TARGETS' answer, in the order offered.
        var targetList: [xcb_atom_t]
        var provide: @Sendable (String) async throws -> [UInt8]
        /// Where the offer stands with GNOME's clipboard manager (`MutterClipboardManager`).
        var manager: MutterClipboardManager.Stage = .awaitingTargets
    }

    struct OutgoingKey: Hashable {
        var requestor: xcb_window_t
        var property: xcb_atom_t
    }

    /// An INCR transfer to a pasting app.
    struct Outgoing {
        var bytes: [UInt8]
        var sent = 0
        var type: xcb_atom_t
        var timer: (any DispatchSourceTimer)?
    }

    init(display: String?, cookie: X11Cookie?, configuration: X11SessionClipboard.Configuration,
         events: AsyncStream<ClipboardEvent>.Continuation) throws(ClipboardError) {
        var screenNumber: Int32 = 0
        let connected: OpaquePointer?
        if let cookie {
            // libxcb reads the credential during the call (the connection's setup) and keeps no pointer to it.
            var name = Array(cookie.name.utf8CString)
            var data = cookie.data.map { CChar(bitPattern: $0) }
            connected = name.withUnsafeMutableBufferPointer { name in
                data.withUnsafeMutableBufferPointer { data in
                    var info = xcb_auth_info_t(namelen: Int32(name.count - 1), name: name.baseAddress, datalen: Int32(data.count),
                                               data: data.baseAddress)
                    return xcb_connect_to_display_with_auth_info(display, &info, &screenNumber)
                }
            }
        } else {
            connected = xcb_connect(display, &screenNumber)
        }
        guard let raw = connected else { throw .unavailable("cannot connect to the X display") }
        let connection = X11Connection(raw: raw)
        guard !connection.hasError else {
            xcb_disconnect(raw)
            throw .unavailable("cannot connect to the X display \(display ?? "given by DISPLAY")")
        }
        func fail(_ reason: String) -> ClipboardError {
            xcb_disconnect(raw)
            return .unavailable(reason)
        }
        // XFixes: must be asked for its version before use.
        guard let extensionData = baton_xfixes_extension(raw), extensionData.pointee.present != 0 else {
            throw fail("the X server lacks the XFixes extension")
        }
        let versionCookie = xcb_xfixes_query_version(raw, 5, 0)
        var versionError: UnsafeMutablePointer<xcb_generic_error_t>?
        guard let version = xcb_xfixes_query_version_reply(raw, versionCookie, &versionError) else {
            free(versionError)
            throw fail("the X server's XFixes extension did not answer")
        }
        free(version)
        xfixesEvent = extensionData.pointee.first_event

        let names = ["CLIPBOARD", "TARGETS", "TIMESTAMP", "INCR", "UTF8_STRING", "TEXT", ClipboardSecrecy.kdePasswordManagerHint,
                     "_BATON_TIMESTAMP", "_BATON_TRANSFER_0", "_BATON_TRANSFER_1", "_BATON_TRANSFER_2", "_BATON_TRANSFER_3"]
        guard let atoms = connection.intern(names) else { throw fail("the X server did not answer") }
        (clipboard, targets, timestampTarget, incr, utf8String, textTarget, hint, timestampProperty) =
            (atoms[0], atoms[1], atoms[2], atoms[3], atoms[4], atoms[5], atoms[6], atoms[7])
        transferProperties = Array(atoms[8...])
        stringTarget = xcb_atom_t(XCB_ATOM_STRING.rawValue)

        guard let setup = xcb_get_setup(raw) else { throw fail("the X server sent no setup") }
        resourceIDMask = setup.pointee.resource_id_mask
        var screens = xcb_setup_roots_iterator(setup)
        var skip = max(0, Int(screenNumber))
        while skip > 0, screens.rem > 0 {
            xcb_screen_next(&screens)
            skip -= 1
        }
        guard screens.rem > 0, let screen = screens.data else { throw fail("the X display has no such screen") }
        window = xcb_generate_id(raw)
        var eventMask = UInt32(XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue)
        xcb_create_window(raw, 0, window, screen.pointee.root, 0, 0, 1, 1, 0, UInt16(XCB_WINDOW_CLASS_INPUT_ONLY.rawValue),
                          0, UInt32(XCB_CW_EVENT_MASK.rawValue), &eventMask)
        let selectionMask = XCB_XFIXES_SELECTION_EVENT_MASK_SET_SELECTION_OWNER.rawValue
            | XCB_XFIXES_SELECTION_EVENT_MASK_SELECTION_WINDOW_DESTROY.rawValue
            | XCB_XFIXES_SELECTION_EVENT_MASK_SELECTION_CLIENT_CLOSE.rawValue
        xcb_xfixes_select_selection_input(raw, window, clipboard, UInt32(selectionMask))
        // Words of 4 bytes; some room for the request's own header.
        let maximumRequest = Int(xcb_get_maximum_request_length(raw)) * 4
        chunkBytes = max(1024, min(configuration.chunkBytes, maximumRequest - 64))
        connection.flush()
        guard !connection.hasError else { throw fail("the X server closed the connection") }

        self.connection = connection
        self.configuration = configuration
        eventsOut = events

        let descriptor = xcb_get_file_descriptor(raw)
        let started = queue.sync { () -> Bool in
            guard let source = makeReadinessSource(watching: descriptor, for: .readable, queue: queue, onCancel: {
                xcb_disconnect(connection.raw)
            }) else { return false }
            source.setEventHandler { [weak self] in self?.drain() }
            source.activate()
            readiness = source
            return true
        }
        guard started else { throw fail("cannot watch the X connection (descriptor limit?)") }
        queue.async { [self] in drain() }
    }

    // MARK: - The event loop

    /// Handles every event libxcb has or can read now (replies waited for meanwhile leave events
    /// in its queue, so this runs after every piece of work too).
    func drain() {
        guard !isClosed else { return }
        while !isClosed, let event = xcb_poll_for_event(connection.raw) {
            handle(event)
            free(event)
        }
        connection.flush()
        if !isClosed, connection.hasError { close() }
    }

    func handle(_ event: UnsafeMutablePointer<xcb_generic_event_t>) {
        let kind = event.pointee.response_type & 0x7F
        let raw = UnsafeRawPointer(event)
        switch Int32(kind) {
        case 0:
            break  // An error of a request that waits for no reply (a requestor window gone): nothing to do.
        case XCB_PROPERTY_NOTIFY:
            propertyChanged(raw.load(as: xcb_property_notify_event_t.self))
        case XCB_SELECTION_NOTIFY:
            selectionNotified(raw.load(as: xcb_selection_notify_event_t.self))
        case XCB_SELECTION_REQUEST:
            selectionRequested(raw.load(as: xcb_selection_request_event_t.self))
        case XCB_SELECTION_CLEAR:
            selectionCleared(raw.load(as: xcb_selection_clear_event_t.self))
        case XCB_DESTROY_NOTIFY:
            requestorDestroyed(raw.load(as: xcb_destroy_notify_event_t.self).window)
        default:
            if kind == xfixesEvent &+ UInt8(XCB_XFIXES_SELECTION_NOTIFY) {
                ownerChanged(raw.load(as: xcb_xfixes_selection_notify_event_t.self))
            }
        }
    }

    func close() {
        queue.async { [self] in
            guard !isClosed else { return }
            isClosed = true
            conversions.failAll(.unavailable("the clipboard adapter closed"))
            for waiter in timestampWaiters { waiter(0) }
            timestampWaiters.removeAll()
            for (_, transfer) in outgoing { transfer.timer?.cancel() }
            outgoing.removeAll()
            currentOffer = nil
            eventsOut.finish()
            if let readiness {
                readiness.cancel()  // its cancel handler disconnects
            } else {
                xcb_disconnect(connection.raw)
            }
            readiness = nil
        }
    }

    func makeTimer(after duration: Duration, _ handler: @escaping @Sendable () -> Void) -> any DispatchSourceTimer {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = Int(clamping: seconds) &* 1_000_000_000 &+ Int(attoseconds / 1_000_000_000)
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(max(0, nanoseconds)))
        timer.setEventHandler(handler: handler)
        timer.activate()
        return timer
    }

}
