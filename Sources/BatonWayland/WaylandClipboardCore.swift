// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonReadiness
import BatonSystem
import Dispatch
import Glibc

/// The Wayland clipboard's I/O shell. `@unchecked Sendable` because every mutable field is touched
/// only on `queue` (the public entry points hop there; the readiness sources and timers run there).
final class WaylandClipboardCore: @unchecked Sendable {
    let queue = DispatchQueue(label: "baton.wayland.clipboard")
    let kind: WaylandDataControlProtocol
    let connection: WaylandConnection
    let configuration: WaylandSessionClipboard.Configuration
    let eventsOut: AsyncStream<ClipboardEvent>.Continuation
    let manager: UInt32
    let device: UInt32

    // Queue-confined state.
    /// Every object the compositor may still send events for, by id: our own until its delete_id,
    /// the compositor's offers until we destroy them.
    var objects: [UInt32: WaylandInterface] = [:]
    /// Our objects we destroyed (their late events are parsed and dropped, descriptors closed).
    var destroyed: Set<UInt32> = []
    var readiness: (any DispatchSourceRead)?
    var writability: (any DispatchSourceRead)?
    var isClosed = false
    var closeReason = "the clipboard adapter closed"
    /// False until the selection at the start was learnt: it is no change.
    var isReady = false
    var syncWaiters: [UInt32: () -> Void] = [:]

    /// Offers introduced by data_offer, not yet named by a selection event, oldest first.
    var introduced: [(id: UInt32, names: OfferNames)] = []
    /// The clipboard's current content as the compositor offers it (ours too), nil when empty.
    var selection: (id: UInt32, names: OfferNames)?
    var selectionGeneration: UInt64 = 0
    var revision: UInt64 = 0

    /// Our offer: the data source that holds (or is about to hold) the clipboard.
    struct OwnOffer {
        var source: UInt32
        var generation: UInt64
        var confirmed = false
        /// Every name offered → the type `provide` is asked for.
        var typeOfName: [String: String]
        var provide: @Sendable (String) async throws -> [UInt8]
    }
    var own: OwnOffer?
    var offerGeneration: UInt64 = 0
    /// A source we withdrew: the selection's clearing that follows is ours, no news.
    var withdrawnSource: UInt32?

    var readers: [ObjectIdentifier: PipeReader] = [:]
    var writers: [ObjectIdentifier: PipeWriter] = [:]
    /// Answers to pasting clients in progress at once, at most (each holds its bytes until read).
    static let maximumWriters = 16
    /// Offers introduced and never named by a selection, kept at most (a compositor sends one at a time).
    static let maximumIntroduced = 4

    /// The names an offer lists: the first 256 distinct ones, and how many more there were.
    struct OfferNames {
        static let maximumCount = 4 * ClipboardTypeList.maximumCount
        var names: [String] = []
        var more = 0
        mutating func add(_ name: String) {
            guard !names.contains(name) else { return }
            if names.count < Self.maximumCount { names.append(name) } else { more += 1 }
        }
    }

    init(environment: [String: String], configuration: WaylandSessionClipboard.Configuration,
         events: AsyncStream<ClipboardEvent>.Continuation) throws(WaylandUnavailable) {
        // Writing to a pipe whose reader left must fail with EPIPE, not end the process.
        _ = signal(SIGPIPE, SIG_IGN)
        let connection = try WaylandConnection.connect(environment: environment)
        do throws(WaylandUnavailable) {
            let globals = try WaylandGlobals.fetch(connection, timeout: configuration.connectTimeout)
            guard let (kind, managerGlobal) = globals.dataControl else { throw WaylandUnavailable(.noDataControl(globals.compositor)) }
            guard let seatGlobal = globals.seat else {
                throw WaylandUnavailable(.cannotConnect("the Wayland compositor offers no seat, so there is no clipboard"))
            }
            self.kind = kind
            let seat = connection.newID()
            Self.bind(connection, registry: globals.registry, seatGlobal, version: 1, id: seat)
            manager = connection.newID()
            Self.bind(connection, registry: globals.registry, managerGlobal, version: min(managerGlobal.version, kind.supportedVersion), id: manager)
            device = connection.newID()
            var request = WaylandRequest(object: manager, opcode: WaylandInterface.Manager.getDataDevice)
            request.uint(device)
            request.object(seat)
            connection.send(request)
            objects = [globals.registry: .registry, seat: .seat, manager: .manager, device: .device]
        } catch {
            connection.close()
            throw error
        }
        self.connection = connection
        self.configuration = configuration
        eventsOut = events
        // The device announces the current selection at once: learnt before the sync's answer.
        let started = queue.sync { () -> Result<Void, WaylandUnavailable> in
            var synced = false
            sync { synced = true }
            do throws(WaylandUnavailable) {
                try WaylandGlobals.roundTrip(connection, timeout: configuration.connectTimeout, until: { synced || isClosed }) {
                    try dispatch($0)
                }
            } catch {
                return .failure(error)
            }
            guard !isClosed else { return .failure(WaylandUnavailable(.cannotConnect(closeReason))) }
            isReady = true
            guard let source = makeReadinessSource(watching: connection.socket, for: .readable, queue: queue, onCancel: {
                connection.close()
            }) else { return .failure(WaylandUnavailable(.cannotConnect("cannot watch the Wayland connection (descriptor limit?)"))) }
            source.setEventHandler { [weak self] in self?.readable() }
            source.activate()
            readiness = source
            return .success(())
        }
        if case .failure(let error) = started {
            queue.sync { close(reason: error.availability.description, now: true) }
            throw error
        }
    }

    static func bind(_ connection: WaylandConnection, registry: UInt32, _ global: WaylandGlobal, version: UInt32, id: UInt32) {
        var request = WaylandRequest(object: registry, opcode: WaylandInterface.Registry.bind)
        request.uint(global.name)
        request.string(global.interface)
        request.uint(version)
        request.uint(id)
        connection.send(request)
    }

    // MARK: - The event loop

    func readable() {
        guard !isClosed else { return }
        switch connection.receive() {
        case .wouldBlock: return
        case .closed(let reason): return close(reason: reason, now: true)
        case .received: break
        }
        do {
            while !isClosed, let message = try connection.nextMessage() { try dispatch(message) }
        } catch let error as WaylandWireError {
            close(reason: "the Wayland compositor sent \(error)", now: true)
        } catch {
            close(reason: (error as? WaylandUnavailable)?.availability.description ?? "\(error)", now: true)
        }
    }

    /// Queues a request and writes what the socket takes; the rest goes when it is writable.
    func request(_ request: WaylandRequest) {
        guard !isClosed else {
            for descriptor in request.descriptors { closeDescriptor(descriptor) }
            return
        }
        switch connection.send(request) {
        case .done: break
        case .failed: close(reason: "the Wayland compositor stopped reading the clipboard adapter's requests", now: true)
        case .blocked: watchWritable()
        }
    }

    func watchWritable() {
        guard writability == nil else { return }
        writability = makeReadinessSource(watching: connection.socket, for: .writable, queue: queue)
        writability?.setEventHandler { [weak self] in
            guard let self, !isClosed else { return }
            switch connection.flush() {
            case .blocked: return
            case .failed: close(reason: "the connection to the Wayland compositor failed", now: true)
            case .done:
                writability?.cancel()
                writability = nil
            }
        }
        writability?.activate()
    }

    /// wl_display.sync: `action` runs once the compositor handled every request sent before.
    /// After close, `action` runs at once (it finds `isClosed` set).
    func sync(_ action: @escaping () -> Void) {
        guard !isClosed else { return action() }
        let callback = connection.newID()
        objects[callback] = .callback
        syncWaiters[callback] = action
        var message = WaylandRequest(object: 1, opcode: WaylandInterface.Display.sync)
        message.uint(callback)
        request(message)
    }

    func dispatch(_ message: WaylandMessage) throws {
        var arguments = WaylandArguments(message)
        let unknown = WaylandWireError.unknownTarget(object: message.object, opcode: message.opcode)
        if message.object == 1 {
            if message.opcode == WaylandInterface.Display.deleteID {
                let id = try arguments.uint()
                guard id < waylandServerIDStart, objects.removeValue(forKey: id) != nil else { return }
                destroyed.remove(id)
                connection.release(id)
                return
            }
            return try WaylandGlobals.handleDisplayEvent(message, connection)
        }
        guard let interface = objects[message.object] else { throw unknown }
        let gone = destroyed.contains(message.object)
        switch (interface, message.opcode) {
        case (.registry, WaylandInterface.Registry.global):
            _ = (try arguments.uint(), try arguments.requiredString(), try arguments.uint())
        case (.registry, WaylandInterface.Registry.globalRemove):
            _ = try arguments.uint()
        case (.callback, WaylandInterface.Callback.done):
            // The compositor destroys a callback itself (its delete_id follows).
            destroyed.insert(message.object)
            syncWaiters.removeValue(forKey: message.object)?()
        case (.seat, 0):
            _ = try arguments.uint()  // capabilities
        case (.device, WaylandInterface.Device.dataOffer):
            let id = try arguments.uint()
            guard id >= waylandServerIDStart else { throw WaylandWireError.badNewID(id) }
            objects[id] = .offer
            introduced.removeAll { $0.id == id }
            introduced.append((id, OfferNames()))
            if introduced.count > Self.maximumIntroduced { destroyOffer(introduced.removeFirst().id) }
        case (.device, WaylandInterface.Device.selection):
            try selectionChanged(to: try arguments.object())
        case (.device, WaylandInterface.Device.primarySelection):
            // The primary selection is never followed: its offer is destroyed unread.
            if let id = try arguments.object() {
                introduced.removeAll { $0.id == id }
                destroyOffer(id)
            }
        case (.device, WaylandInterface.Device.finished):
            close(reason: "the Wayland compositor removed the seat whose clipboard this adapter followed", now: true)
        case (.offer, WaylandInterface.Offer.offer):
            let name = try arguments.requiredString()
            if let index = introduced.firstIndex(where: { $0.id == message.object }) { introduced[index].names.add(name) }
        case (.source, WaylandInterface.Source.send):
            let name = try arguments.requiredString()
            let descriptor = try connection.takeDescriptor()
            guard !gone, let offer = own, offer.source == message.object, let type = offer.typeOfName[name] else {
                closeDescriptor(descriptor)  // closed unanswered: the pasting client reads nothing
                return
            }
            serve(type: type, name: name, to: descriptor, provide: offer.provide)
        case (.source, WaylandInterface.Source.cancelled):
            sourceCancelled(message.object, alreadyDestroyed: gone)
        default:
            throw unknown
        }
    }

    func destroyOffer(_ id: UInt32) {
        guard objects[id] == .offer else { return }
        objects[id] = nil  // the compositor's own id: free once it handles the request, no delete_id
        request(WaylandRequest(object: id, opcode: WaylandInterface.Offer.destroy))
    }

    func close(reason: String, now: Bool = false) {
        guard now else { return queue.async { [self] in close(reason: reason, now: true) } }
        guard !isClosed else { return }
        isClosed = true
        closeReason = reason
        for reader in readers.values { reader.finish(.failure(.unavailable(reason))) }
        readers.removeAll()
        for writer in writers.values { writer.finish(false) }
        writers.removeAll()
        let waiters = syncWaiters.values
        syncWaiters.removeAll()
        for waiter in waiters { waiter() }  // each finds isClosed set
        own = nil
        eventsOut.finish()
        writability?.cancel()
        writability = nil
        if let readiness {
            readiness.cancel()  // its cancel handler closes the connection
        } else {
            connection.close()
        }
        readiness = nil
    }

    // MARK: - Another client's copy

    func selectionChanged(to id: UInt32?) throws(WaylandWireError) {
        if let previous = selection?.id, previous != id { destroyOffer(previous) }
        selectionGeneration &+= 1
        if let id {
            guard let index = introduced.firstIndex(where: { $0.id == id }) else {
                throw .unknownTarget(object: id, opcode: WaylandInterface.Device.selection)
            }
            selection = (id, introduced.remove(at: index).names)
        } else {
            selection = nil
        }
        guard isReady, own == nil else { return }  // the selection at the start, or our own copy: no news
        if id == nil {
            if withdrawnSource != nil {
                withdrawnSource = nil
                return
            }
            eventsOut.yield(.cleared)
            return
        }
        withdrawnSource = nil
        describeSelection()
    }

    func describeSelection() {
        guard let (id, offered) = selection else { return }
        let generation = selectionGeneration
        var list = ClipboardTypeList(offered.names)
        if offered.more > 0 { list.dropped.append(.init(name: "\(offered.more) more types", reason: .tooMany)) }
        let publish: ([UInt8]?) -> Void = { [self] hintValue in
            guard generation == selectionGeneration, !isClosed else { return }
            revision += 1
            let secret = ClipboardSecrecy.isSecret(offered: offered.names, hintValue: hintValue)
            eventsOut.yield(.changed(ClipboardChange(types: list.types, isSecret: secret, dropped: list.dropped,
                                                     revision: revision)))
        }
        guard offered.names.contains(ClipboardSecrecy.kdePasswordManagerHint) else { return publish(nil) }
        receive(from: id, name: ClipboardSecrecy.kdePasswordManagerHint, limit: 256) { result in
            publish(try? result.get())  // unreadable: nil, which counts as secret
        }
    }

    // MARK: - Reading

    func read(type: String, limit: Int, completion: @escaping (Result<[UInt8], ClipboardError>) -> Void) {
        guard !isClosed else { return completion(.failure(.unavailable(closeReason))) }
        guard let (id, offered) = selection else { return completion(.failure(.noOwner)) }
        guard ClipboardTypes.isMediaType(type), let name = WaylandTypeNames.name(for: type, offered: offered.names) else {
            return completion(.failure(.typeNotOffered(type)))
        }
        receive(from: id, name: name, limit: limit) { result in
            // STRING is ISO Latin-1 (ICCCM); XWayland clients' text may come only under it.
            guard name == "STRING", case .success(let bytes) = result else { return completion(result) }
            let text = ClipboardTypes.utf8(fromLatin1: bytes)
            completion(text.count <= limit ? .success(text) : .failure(.overLimit(limit: limit)))
        }
    }

    /// receive(name, the write end of a new pipe): the client that copied writes its bytes there
    /// and closes it; they are read from the other end as they come.
    func receive(from offer: UInt32, name: String, limit: Int,
                         completion: @escaping (Result<[UInt8], ClipboardError>) -> Void) {
        guard let (reader, writer) = makeReceivePipe() else {
            return completion(.failure(.unavailable("cannot create a pipe (descriptor limit?)")))
        }
        var message = WaylandRequest(object: offer, opcode: WaylandInterface.Offer.receive)
        message.string(name)
        message.descriptor(writer)  // the connection closes our copy once sent
        request(message)
        var key: ObjectIdentifier?
        let pipeReader = PipeReader(descriptor: reader, limit: limit, timeout: configuration.answerTimeout, queue: queue) {
            [weak self] result in
            if let key { self?.readers[key] = nil }
            completion(result)
        }
        guard let pipeReader else { return completion(.failure(.unavailable("cannot watch a pipe (descriptor limit?)"))) }
        key = ObjectIdentifier(pipeReader)
        readers[ObjectIdentifier(pipeReader)] = pipeReader
    }
}
