// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
internal import CXCB
import BatonReadiness
import Dispatch
import Glibc

/// The session clipboard on X11 (docs/clipboard.md): one connection to the display, one invisible
/// window, XFixes reports of who owns CLIPBOARD (PRIMARY is never watched), conversions on request
/// and INCR both ways. The event loop waits on the connection's descriptor through BatonReadiness;
/// timers exist only while a transfer waits for its other side.
public final class X11SessionClipboard: SessionClipboard {
    public struct Configuration: Sendable {
        /// How long an owner may take to answer one request, or to send the next INCR chunk.
        public var answerTimeout: Duration
        /// How long a pasting app may take to read the next INCR chunk before its transfer is dropped.
        public var requestorTimeout: Duration
        /// The most bytes of one property written to a pasting app at once; more goes by INCR (also
        /// bounded by the server's maximum request length).
        public var chunkBytes: Int

        public init(answerTimeout: Duration = .seconds(15), requestorTimeout: Duration = .seconds(60),
                    chunkBytes: Int = 256 << 10) {
            self.answerTimeout = answerTimeout
            self.requestorTimeout = requestorTimeout
            self.chunkBytes = chunkBytes
        }
    }

    /// Transfers that went in chunks (INCR), both ways, since the start: a copy of the counts.
    public struct Statistics: Sendable, Equatable {
        /// Reads whose owner sent INCR.
        public var incrementalReads = 0
        /// Answers to pasting apps sent by INCR, and their chunks.
        public var incrementalSends = 0
        public var chunksSent = 0
        /// INCR answers dropped because the pasting app stopped reading (`requestorTimeout`).
        public var abandonedSends = 0
    }

    public let events: AsyncStream<ClipboardEvent>
    private let core: X11ClipboardCore

    /// Connects to `display` (nil: `$DISPLAY`).
    public init(display: String? = nil, configuration: Configuration = Configuration()) throws(ClipboardError) {
        let (stream, continuation) = AsyncStream<ClipboardEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        events = stream
        core = try X11ClipboardCore(display: display, configuration: configuration, events: continuation)
    }

    deinit { core.close() }

    /// Closes the connection: pending reads fail, the offer ends, `events` finishes.
    public func close() { core.close() }

    public func read(type: String, limit: Int) async throws(ClipboardError) -> [UInt8] {
        let core = core
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[UInt8], ClipboardError>, Never>) in
            core.queue.async { core.read(type: type, limit: max(0, limit)) { continuation.resume(returning: $0) } }
        }
        return try result.get()
    }

    @discardableResult
    public func offer(types: [String], provide: @escaping @Sendable (String) async throws -> [UInt8])
        async throws(ClipboardError) -> [ClipboardTypeList.Dropped] {
        let list = ClipboardTypeList(types)
        guard !list.types.isEmpty || !list.markers.isEmpty else { throw .nothingToOffer }
        let core = core
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, ClipboardError>, Never>) in
            core.queue.async { core.offer(list, provide: provide) { continuation.resume(returning: $0) } }
        }
        try result.get()
        return list.dropped
    }

    public var statistics: Statistics {
        get async {
            let core = core
            return await withCheckedContinuation { continuation in
                core.queue.async { continuation.resume(returning: core.statistics) }
            }
        }
    }

    public func withdraw() async {
        let core = core
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            core.queue.async {
                core.withdraw()
                continuation.resume()
            }
        }
    }
}

/// The clipboard's I/O shell. `@unchecked Sendable` because every mutable field is touched only on
/// `queue` (public entry points hop there with `queue.async`; the readiness source and the timers
/// run there), which is what makes it sound; libxcb's connection is used from that queue only.
final class X11ClipboardCore: @unchecked Sendable {
    let queue = DispatchQueue(label: "baton.x11.clipboard")
    private let connection: X11Connection
    private let window: xcb_window_t
    private let configuration: X11SessionClipboard.Configuration
    private let chunkBytes: Int
    private let xfixesEvent: UInt8
    private let eventsOut: AsyncStream<ClipboardEvent>.Continuation

    // Atoms interned at start.
    private let clipboard, targets, timestampTarget, incr, utf8String, textTarget, stringTarget, hint, timestampProperty: xcb_atom_t
    /// Properties on our window that conversions write to, taken in turn: a conversion that was given
    /// up cannot disturb the next one, whose owner writes to another property.
    private let transferProperties: [xcb_atom_t]

    // Queue-confined state.
    private var readiness: (any DispatchSourceRead)?
    private var isClosed = false
    private var names: [xcb_atom_t: String] = [:]
    private var revision: UInt64 = 0
    /// Counts owner changes: a change still being looked at is dropped when another came meanwhile.
    private var ownerGeneration: UInt64 = 0
    private var lastOwner: xcb_window_t = 0
    /// The current other owner's content types and the target each is read through.
    private var ownerTargets: (owner: xcb_window_t, generation: UInt64, targets: [String: xcb_atom_t])?

    private var conversions = ConversionQueue()
    private var timestampWaiters: [(xcb_timestamp_t) -> Void] = []
    private var currentOffer: Offer?
    private var offerGeneration: UInt64 = 0
    private var outgoing: [OutgoingKey: Outgoing] = [:]
    var statistics = X11SessionClipboard.Statistics()
    /// INCR answers in progress at once, at most.
    static let maximumTransfers = 16

    private struct Offer {
        var generation: UInt64
        var since: xcb_timestamp_t
        /// Every target answered with content → the type `provide` is asked for.
        var targetTypes: [xcb_atom_t: String]
        /// TARGETS' answer, in the order offered.
        var targetList: [xcb_atom_t]
        var provide: @Sendable (String) async throws -> [UInt8]
    }

    private struct OutgoingKey: Hashable {
        var requestor: xcb_window_t
        var property: xcb_atom_t
    }

    /// An INCR transfer to a pasting app.
    private struct Outgoing {
        var bytes: [UInt8]
        var sent = 0
        var type: xcb_atom_t
        var timer: (any DispatchSourceTimer)?
    }

    init(display: String?, configuration: X11SessionClipboard.Configuration,
         events: AsyncStream<ClipboardEvent>.Continuation) throws(ClipboardError) {
        var screenNumber: Int32 = 0
        guard let raw = xcb_connect(display, &screenNumber) else { throw .unavailable("cannot connect to the X display") }
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
    private func drain() {
        guard !isClosed else { return }
        while !isClosed, let event = xcb_poll_for_event(connection.raw) {
            handle(event)
            free(event)
        }
        connection.flush()
        if !isClosed, connection.hasError { close() }
    }

    private func handle(_ event: UnsafeMutablePointer<xcb_generic_event_t>) {
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

    private func makeTimer(after duration: Duration, _ handler: @escaping @Sendable () -> Void) -> any DispatchSourceTimer {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = Int(clamping: seconds) &* 1_000_000_000 &+ Int(attoseconds / 1_000_000_000)
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(max(0, nanoseconds)))
        timer.setEventHandler(handler: handler)
        timer.activate()
        return timer
    }

    // MARK: - Another client's copy

    private func ownerChanged(_ event: xcb_xfixes_selection_notify_event_t) {
        guard event.selection == clipboard else { return }
        let previous = lastOwner
        lastOwner = event.owner
        ownerGeneration &+= 1
        ownerTargets = nil
        dropStaleDescriptions()
        if event.owner == window { return }  // our own offer
        if event.owner == 0 {
            // Our own withdraw is no news; an owner that went away is.
            if previous == window, event.subtype == UInt8(XCB_XFIXES_SELECTION_EVENT_SET_SELECTION_OWNER.rawValue) { return }
            eventsOut.yield(.cleared)
            return
        }
        let generation = ownerGeneration
        let owner = event.owner
        // 16,384 atoms at most: far more than any real list, a bound on a hostile one.
        convert(target: targets, limit: 64 << 10, describing: generation) { [self] result in
            guard generation == ownerGeneration, case .success(let reply) = result else { return }
            var atoms: [xcb_atom_t] = []
            var seen = Set<xcb_atom_t>()
            if reply.format == 32 {
                reply.bytes.withUnsafeBytes { buffer in
                    for index in 0..<(buffer.count / 4) {
                        let atom = buffer.loadUnaligned(fromByteOffset: index * 4, as: xcb_atom_t.self)
                        if atom != 0, seen.insert(atom).inserted { atoms.append(atom) }
                    }
                }
            }
            let offersHint = seen.contains(hint)
            // Names of the first 256 distinct atoms only: a list of thousands is hostile, and 64 types is the bound.
            let named = Array(atoms.prefix(4 * ClipboardTypeList.maximumCount))
            let atomNames = names(of: named)
            var targetNames: [String] = []
            var targetOf: [String: xcb_atom_t] = [:]
            var garbage: [ClipboardTypeList.Dropped] = []
            for (atom, name) in zip(named, atomNames) {
                guard let name else {
                    if garbage.count < 8 { garbage.append(.init(name: "atom \(atom)", reason: .notMediaType)) }
                    continue
                }
                targetNames.append(name)
                if let type = ClipboardTypes.mediaType(ofTarget: name) {
                    if let known = targetOf[type], let knownName = self.names[known] {
                        // Text: the alias a reader prefers (UTF-8 first).
                        let order = ClipboardTypes.textTargets
                        if (order.firstIndex(of: name) ?? order.count) < (order.firstIndex(of: knownName) ?? order.count) {
                            targetOf[type] = atom
                        }
                    } else {
                        targetOf[type] = atom
                    }
                }
            }
            var list = ClipboardTypeList(targetNames)
            if atoms.count > named.count {
                list.dropped.append(.init(name: "\(atoms.count - named.count) more targets", reason: .tooMany))
            }
            list.dropped.append(contentsOf: garbage)
            ownerTargets = (owner, generation, targetOf.filter { list.types.contains($0.key) })
            let publish: ([UInt8]?) -> Void = { [self] hintValue in
                guard generation == ownerGeneration else { return }
                var offered = targetNames
                if offersHint, !offered.contains(ClipboardSecrecy.kdePasswordManagerHint) {
                    offered.append(ClipboardSecrecy.kdePasswordManagerHint)
                }
                let secret = ClipboardSecrecy.isSecret(offered: offered, hintValue: hintValue)
                revision += 1
                eventsOut.yield(.changed(ClipboardChange(types: list.types, isSecret: secret, dropped: list.dropped,
                                                         revision: revision)))
            }
            if offersHint {
                convert(target: hint, limit: 256, describing: generation) { result in
                    if case .success(let value) = result { publish(value.bytes) } else { publish(nil) }
                }
            } else {
                publish(nil)
            }
        }
    }

    /// A new owner: what was being learnt about the previous copy no longer matters, and must not
    /// hold the queue (a silent previous owner would delay the new copy by its whole timeout).
    private func dropStaleDescriptions() {
        conversions.pending.removeAll { $0.describes.map { $0 != ownerGeneration } ?? false }
        if let active = conversions.active, let describes = active.describes, describes != ownerGeneration,
           !active.incremental {
            finishConversion(.failure(.refused))
        }
    }

    /// Names of atoms, cached (a bounded cache: a hostile owner could name endless atoms).
    private func names(of atoms: [xcb_atom_t]) -> [String?] {
        let unknown = atoms.filter { names[$0] == nil }
        if !unknown.isEmpty {
            if names.count > 4096 { names.removeAll(keepingCapacity: true) }
            for (atom, name) in zip(unknown, connection.names(of: unknown)) {
                if let name { names[atom] = name }
            }
        }
        return atoms.map { names[$0] }
    }

    private func atom(named name: String) -> xcb_atom_t? {
        if let known = names.first(where: { $0.value == name })?.key { return known }
        guard let atom = connection.intern([name])?.first else { return nil }
        if names.count > 4096 { names.removeAll(keepingCapacity: true) }
        names[atom] = name
        return atom
    }

    // MARK: - Reading

    func read(type: String, limit: Int, completion: @escaping (Result<[UInt8], ClipboardError>) -> Void) {
        guard !isClosed else { return completion(.failure(.unavailable("the clipboard adapter closed"))) }
        guard let owner = connection.selectionOwner(clipboard) else {
            return completion(.failure(.unavailable("the X server did not answer")))
        }
        guard owner != 0 else { return completion(.failure(.noOwner)) }
        let target: xcb_atom_t
        if let known = ownerTargets, known.owner == owner, known.generation == ownerGeneration {
            guard let offered = known.targets[type] else { return completion(.failure(.typeNotOffered(type))) }
            target = offered
        } else if type == ClipboardTypes.text {
            target = utf8String
        } else if ClipboardTypes.isMediaType(type), type.utf8.count <= ClipboardTypeList.maximumNameBytes,
                  let interned = atom(named: type) {
            target = interned
        } else {
            return completion(.failure(.typeNotOffered(type)))
        }
        convert(target: target, limit: limit) { [self] result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let reply) where reply.type == stringTarget && type == ClipboardTypes.text:
                let text = ClipboardTypes.utf8(fromLatin1: reply.bytes)
                completion(text.count <= limit ? .success(text) : .failure(.overLimit(limit: limit)))
            case .success(let reply):
                completion(.success(reply.bytes))
            }
        }
        drain()
    }

    /// ConvertSelection of CLIPBOARD to `target`, one at a time in arrival order.
    /// `describing`: the owner generation whose copy the conversion looks at (TARGETS, the hint);
    /// such a conversion is dropped as soon as the owner changes again.
    private func convert(target: xcb_atom_t, limit: Int, describing: UInt64? = nil,
                         completion: @escaping (Result<ConversionQueue.Reply, ClipboardError>) -> Void) {
        conversions.pending.append(ConversionQueue.Conversion(target: target, limit: limit, describes: describing,
                                                              completion: completion))
        startNextConversion()
    }

    private func startNextConversion() {
        guard !isClosed, conversions.active == nil, !conversions.pending.isEmpty else { return }
        var conversion = conversions.pending.removeFirst()
        conversions.serial &+= 1
        conversion.serial = conversions.serial
        conversion.property = transferProperties[Int(conversions.serial % UInt64(transferProperties.count))]
        connection.deleteProperty(conversion.property, of: window)
        xcb_convert_selection(connection.raw, window, clipboard, conversion.target, conversion.property, UInt32(XCB_CURRENT_TIME))
        connection.flush()
        conversions.active = conversion
        armConversionTimer()
    }

    private func armConversionTimer() {
        guard let serial = conversions.active?.serial else { return }
        conversions.timer?.cancel()
        conversions.timer = makeTimer(after: configuration.answerTimeout) { [self] in
            guard conversions.active?.serial == serial else { return }
            finishConversion(.failure(.timedOut))
        }
    }

    /// Fails the active INCR conversion's caller now, but keeps the conversion until the owner sent
    /// its last chunk, each deleted unread: an owner such as xclip answers no other request before
    /// its transfer ends, so the next conversion waits for it (or for the answer timeout).
    private func discardRest(failing error: ClipboardError) {
        guard let active = conversions.active else { return }
        conversions.active?.completion = { _ in }
        conversions.active?.incremental = true
        conversions.active?.discarding = true
        conversions.active?.buffer = []
        active.completion(.failure(error))
        connection.flush()
        armConversionTimer()
    }

    private func finishConversion(_ result: Result<ConversionQueue.Reply, ClipboardError>) {
        conversions.timer?.cancel()
        conversions.timer = nil
        guard let conversion = conversions.active else { return }
        conversions.active = nil
        conversion.completion(result)
        startNextConversion()
    }

    private func selectionNotified(_ event: xcb_selection_notify_event_t) {
        guard event.requestor == window, event.selection == clipboard, let active = conversions.active,
              !active.incremental, event.target == active.target else { return }
        guard event.property != 0 else { return finishConversion(.failure(.refused)) }
        guard event.property == active.property else { return }
        // The size first: nothing over the limit is ever fetched.
        guard let head = connection.property(active.property, of: window, delete: false, maximumBytes: 0) else {
            return finishConversion(.failure(.refused))
        }
        if head.type == incr {
            // The owner sends chunks, each after we delete the last; its lower bound on the size comes first.
            let announced = connection.property(active.property, of: window, delete: true, maximumBytes: 4)
            if let announced, announced.bytes.count == 4 {
                let size = announced.bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
                if Int(size) > active.limit { return discardRest(failing: .overLimit(limit: active.limit)) }
            }
            conversions.active?.incremental = true
            statistics.incrementalReads += 1
            connection.flush()
            armConversionTimer()
            return
        }
        guard head.bytesAfter <= active.limit else {
            connection.deleteProperty(active.property, of: window)
            return finishConversion(.failure(.overLimit(limit: active.limit)))
        }
        guard let whole = connection.property(active.property, of: window, delete: true, maximumBytes: head.bytesAfter) else {
            return finishConversion(.failure(.refused))
        }
        finishConversion(.success(.init(type: whole.type, format: whole.format, bytes: whole.bytes)))
    }

    private func propertyChanged(_ event: xcb_property_notify_event_t) {
        if event.state == UInt8(XCB_PROPERTY_DELETE.rawValue) {
            // A pasting app took a chunk of our INCR answer (that app may be this adapter itself).
            return sendNextChunk(OutgoingKey(requestor: event.window, property: event.atom))
        }
        if event.window == window {
            let newValue = event.state == UInt8(XCB_PROPERTY_NEW_VALUE.rawValue)
            if event.atom == timestampProperty, newValue, !timestampWaiters.isEmpty {
                timestampWaiters.removeFirst()(event.time)
                return
            }
            guard let active = conversions.active, active.incremental, event.atom == active.property,
                  event.state == UInt8(XCB_PROPERTY_NEW_VALUE.rawValue) else { return }
            guard let head = connection.property(active.property, of: window, delete: false, maximumBytes: 0),
                  head.type != 0 else { return }
            if active.discarding {
                // Deleted unread: the owner sends the next chunk, up to its zero-length end.
                connection.deleteProperty(active.property, of: window)
                connection.flush()
                return head.bytesAfter == 0 ? finishConversion(.failure(.refused)) : armConversionTimer()
            }
            if head.bytesAfter == 0 {
                // The zero-length chunk: done.
                connection.deleteProperty(active.property, of: window)
                return finishConversion(.success(.init(type: head.type, format: active.format ?? head.format, bytes: active.buffer)))
            }
            guard active.buffer.count + head.bytesAfter <= active.limit else {
                connection.deleteProperty(active.property, of: window)
                return discardRest(failing: .overLimit(limit: active.limit))
            }
            guard let chunk = connection.property(active.property, of: window, delete: true, maximumBytes: head.bytesAfter) else {
                return finishConversion(.failure(.refused))
            }
            conversions.active?.buffer.append(contentsOf: chunk.bytes)
            if conversions.active?.format == nil { conversions.active?.format = chunk.format }
            connection.flush()
            armConversionTimer()
        }
    }

    // MARK: - Owning

    func offer(_ list: ClipboardTypeList, provide: @escaping @Sendable (String) async throws -> [UInt8],
               completion: @escaping (Result<Void, ClipboardError>) -> Void) {
        guard !isClosed else { return completion(.failure(.unavailable("the clipboard adapter closed"))) }
        var targetTypes: [xcb_atom_t: String] = [:]
        var targetList: [xcb_atom_t] = [targets, timestampTarget]
        for type in list.types + list.markers {
            let aliases = list.markers.contains(type) ? [type] : ClipboardTypes.targets(ofMediaType: type)
            guard let atoms = connection.intern(aliases) else {
                return completion(.failure(.unavailable("the X server did not answer")))
            }
            for (atom, name) in zip(atoms, aliases) {
                names[atom] = name
                if targetTypes[atom] == nil { targetList.append(atom) }
                targetTypes[atom] = type
            }
        }
        offerGeneration &+= 1
        let generation = offerGeneration
        serverTime { [self] time in
            guard !isClosed, generation == offerGeneration else {
                return completion(.failure(isClosed ? .unavailable("the clipboard adapter closed") : .replaced))
            }
            xcb_set_selection_owner(connection.raw, window, clipboard, time)
            guard connection.selectionOwner(clipboard) == window else {
                return completion(.failure(.unavailable("another application took the clipboard at the same time")))
            }
            currentOffer = Offer(generation: generation, since: time, targetTypes: targetTypes, targetList: targetList,
                                 provide: provide)
            completion(.success(()))
        }
        drain()
    }

    func withdraw() {
        guard !isClosed else { return }
        offerGeneration &+= 1  // an offer still waiting for its server time is replaced too
        guard currentOffer != nil else { return }
        currentOffer = nil
        if connection.selectionOwner(clipboard) == window {
            xcb_set_selection_owner(connection.raw, 0, clipboard, UInt32(XCB_CURRENT_TIME))
        }
        drain()
    }

    /// A real server time (ICCCM 2.1: never CurrentTime for ownership): the time of the PropertyNotify
    /// that a zero-length append to our own window causes.
    private func serverTime(_ body: @escaping (xcb_timestamp_t) -> Void) {
        timestampWaiters.append(body)
        let empty: [UInt8] = []
        empty.withUnsafeBytes {
            connection.setProperty(timestampProperty, of: window, type: stringTarget, bytes: $0, append: true)
        }
        connection.flush()
    }

    private func selectionCleared(_ event: xcb_selection_clear_event_t) {
        guard event.owner == window, event.selection == clipboard, let offer = currentOffer else { return }
        guard event.time == 0 || event.time >= offer.since else { return }  // about an older ownership of ours
        currentOffer = nil
        offerGeneration &+= 1
        eventsOut.yield(.offerLost)
    }

    /// What answering a SelectionRequest needs.
    private struct Request: Sendable {
        var requestor: xcb_window_t
        var selection: xcb_atom_t
        var target: xcb_atom_t
        var property: xcb_atom_t
        var time: xcb_timestamp_t
    }

    private func answer(_ request: Request, property: xcb_atom_t) {
        connection.notifySelection(requestor: request.requestor, selection: request.selection, target: request.target,
                                   property: property, time: request.time)
    }

    private func selectionRequested(_ event: xcb_selection_request_event_t) {
        // Obsolete requestors name no property: the target stands for it (ICCCM 2.2).
        let request = Request(requestor: event.requestor, selection: event.selection, target: event.target,
                              property: event.property != 0 ? event.property : event.target, time: event.time)
        guard event.selection == clipboard, event.owner == window, let offer = currentOffer,
              event.time == 0 || event.time >= offer.since else { return answer(request, property: 0) }
        if event.target == targets {
            connection.setProperty(request.property, of: event.requestor, type: xcb_atom_t(XCB_ATOM_ATOM.rawValue),
                                   words: offer.targetList)
            return answer(request, property: request.property)
        }
        if event.target == timestampTarget {
            connection.setProperty(request.property, of: event.requestor, type: xcb_atom_t(XCB_ATOM_INTEGER.rawValue),
                                   words: [offer.since])
            return answer(request, property: request.property)
        }
        guard let type = offer.targetTypes[event.target] else { return answer(request, property: 0) }
        // Each request waits for its own bytes; the loop goes on meanwhile. A failed provide fails
        // this request only.
        let provide = offer.provide
        Task { [self] in
            let bytes = try? await provide(type)
            queue.async { [self] in
                guard !isClosed else { return }
                if let bytes {
                    send(bytes, of: type, for: request)
                } else {
                    answer(request, property: 0)
                }
                drain()
            }
        }
    }

    private func send(_ content: [UInt8], of type: String, for request: Request) {
        var bytes = content
        var replyType = request.target
        if type == ClipboardTypes.text {
            if request.target == stringTarget {
                bytes = ClipboardTypes.latin1(fromUTF8: content)
            } else if request.target == textTarget {
                replyType = utf8String
            }
        }
        guard bytes.count > chunkBytes else {
            bytes.withUnsafeBytes { connection.setProperty(request.property, of: request.requestor, type: replyType, bytes: $0) }
            return answer(request, property: request.property)
        }
        // INCR (ICCCM 2.7.2): the size, then a chunk each time the requestor deletes the property.
        let key = OutgoingKey(requestor: request.requestor, property: request.property)
        // Each holds its bytes until read: a bound on what pasting apps that stop reading can pin.
        guard outgoing[key] != nil || outgoing.count < Self.maximumTransfers else { return answer(request, property: 0) }
        outgoing[key]?.timer?.cancel()
        outgoing[key] = Outgoing(bytes: bytes, type: replyType)
        statistics.incrementalSends += 1
        if request.requestor != window {  // our own window already reports its properties
            connection.watch(request.requestor,
                             mask: UInt32(XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue | XCB_EVENT_MASK_STRUCTURE_NOTIFY.rawValue))
        }
        connection.setProperty(request.property, of: request.requestor, type: incr, words: [UInt32(clamping: bytes.count)])
        answer(request, property: request.property)
        armOutgoingTimer(key)
    }

    private func armOutgoingTimer(_ key: OutgoingKey) {
        outgoing[key]?.timer?.cancel()
        let sent = outgoing[key]?.sent
        outgoing[key]?.timer = makeTimer(after: configuration.requestorTimeout) { [self] in
            // Dropped only when no chunk went since (each chunk re-arms the timer).
            guard let transfer = outgoing[key], transfer.sent == sent else { return }
            statistics.abandonedSends += 1
            endTransfer(key)
        }
    }

    private func sendNextChunk(_ key: OutgoingKey) {
        guard var transfer = outgoing[key] else { return }
        let end = min(transfer.bytes.count, transfer.sent + chunkBytes)
        transfer.bytes.withUnsafeBytes { all in
            connection.setProperty(key.property, of: key.requestor, type: transfer.type,
                                   bytes: UnsafeRawBufferPointer(rebasing: all[transfer.sent..<end]))
        }
        // After the last chunk, a zero-length one (written above when nothing was left) ends it.
        if transfer.sent == end { return endTransfer(key) }
        statistics.chunksSent += 1
        transfer.sent = end
        outgoing[key] = transfer
        connection.flush()
        armOutgoingTimer(key)
    }

    private func endTransfer(_ key: OutgoingKey) {
        outgoing.removeValue(forKey: key)?.timer?.cancel()
        if key.requestor != window, !outgoing.keys.contains(where: { $0.requestor == key.requestor }) {
            connection.watch(key.requestor, mask: 0)
        }
        connection.flush()
    }

    private func requestorDestroyed(_ requestor: xcb_window_t) {
        for key in outgoing.keys where key.requestor == requestor {
            outgoing.removeValue(forKey: key)?.timer?.cancel()
        }
    }
}

/// Conversions of the selection this client asked for: one on the wire at a time, the rest waiting.
struct ConversionQueue {
    struct Reply {
        var type: xcb_atom_t
        var format: UInt8
        var bytes: [UInt8]
    }

    struct Conversion {
        var target: xcb_atom_t
        var limit: Int
        /// The owner generation it describes (TARGETS, the hint), nil for a read.
        var describes: UInt64?
        var completion: (Result<Reply, ClipboardError>) -> Void
        var serial: UInt64 = 0
        var property: xcb_atom_t = 0
        var incremental = false
        /// Given up (over the limit): the rest of an INCR transfer is deleted unread.
        var discarding = false
        var buffer: [UInt8] = []
        var format: UInt8?
    }

    var pending: [Conversion] = []
    var active: Conversion?
    var serial: UInt64 = 0
    var timer: (any DispatchSourceTimer)?

    mutating func failAll(_ error: ClipboardError) {
        timer?.cancel()
        timer = nil
        let all = (active.map { [$0] } ?? []) + pending
        active = nil
        pending.removeAll()
        for conversion in all { conversion.completion(.failure(error)) }
    }
}
