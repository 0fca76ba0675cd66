// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus

/// Publishes one DNS-SD service through avahi-daemon's D-Bus API (an entry group with one service).
///
/// The publisher keeps the wanted service until `withdraw()`: when avahi-daemon goes away and comes
/// back (NameOwnerChanged), or its host name is re-registered (server state), it publishes again by
/// itself. A name collision is reported as `Event.collision`; the caller picks another name and
/// calls `update`. Baton rotates ring instance names every epoch with `update` as well.
public actor AvahiPublisher {
    public enum Event: Sendable, Hashable {
        /// The service is announced on the network under `name`.
        case established(name: String)
        /// Someone else holds `name`; nothing is published until `update` with another name.
        case collision(name: String)
        case failed(name: String, AvahiError)
        /// avahi-daemon left the bus; the service is published again when it returns.
        case daemonLost
        case daemonReturned
    }

    public nonisolated let events: AsyncStream<Event>
    public nonisolated let serviceType: String
    private let eventSink: AsyncStream<Event>.Continuation
    private let connection: DBusConnection
    private let interface: AvahiInterfaceIndex
    private let ipProtocol: AvahiProtocol
    private let callTimeout: Duration = .seconds(10)

    private struct Service: Sendable, Hashable {
        var name: String
        var port: UInt16
        var txt: [[UInt8]]
    }

    private var wanted: Service?
    private var groupPath: String?
    /// Name last committed in the group; nil when nothing is (being) announced.
    private var committedName: String?
    private var feed: SignalFeed?
    private var gate = SerialGate()
    private var closed = false

    public init(connection: DBusConnection, serviceType: String = BatonServiceType.ring,
                interface: AvahiInterfaceIndex = avahiAnyInterface, ipProtocol: AvahiProtocol = .unspecified) {
        self.connection = connection
        self.serviceType = serviceType
        self.interface = interface
        self.ipProtocol = ipProtocol
        (events, eventSink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(64))
    }

    /// Publishes (or replaces) the service. Validates the name and TXT first.
    ///
    /// If avahi-daemon is absent this throws `AvahiError.daemonUnavailable`, but the service stays
    /// wanted and is published as soon as the daemon appears. If the daemon is still registering its
    /// host name, the service is committed once it is running. Wait for `Event.established` to know
    /// it is on the network.
    public func publish(name: String, port: UInt16, txt: [String: String] = [:]) async throws {
        guard !closed else { throw AvahiError.badState }
        try InstanceName.validate(name)
        let service = Service(name: name, port: port, txt: try TXTRecord.encode(txt))
        try await startWatching()
        wanted = service
        try await serialized { try await self.publishIfRunning() }
    }

    /// Reset + AddService + Commit with a new name, port or TXT (same as `publish`).
    public func update(name: String, port: UInt16, txt: [String: String] = [:]) async throws {
        try await publish(name: name, port: port, txt: txt)
    }

    /// Removes the service from the network (frees the entry group) and stops re-publishing.
    public func withdraw() async {
        wanted = nil
        await serialized { await self.freeGroup() }
    }

    /// Withdraws, drops the bus subscriptions and ends `events`.
    public func close() async {
        await withdraw()
        closed = true
        feed?.stop(on: connection)
        feed = nil
        eventSink.finish()
    }

    /// The name currently committed to Avahi, if any (announced or being announced).
    public var currentName: String? { committedName }

    // MARK: - Bus work (always inside the gate)

    private func publishIfRunning() async throws {
        guard let service = wanted else { return }
        let state = try await avahiCall {
            try await connection.call(destination: AvahiBus.name, path: AvahiBus.serverPath, interface: AvahiBus.server,
                                      method: "GetState", timeout: callTimeout)
        }
        guard let raw = state.first?.int32Value else { throw AvahiError.malformedReply("GetState") }
        // While the daemon (re-)registers its host name, services wait; the server's StateChanged
        // to running brings us back here.
        guard raw == AvahiBus.ServerState.running.rawValue else { return }
        try await commit(service)
    }

    private func commit(_ service: Service) async throws {
        do {
            let path: String
            if let existing = groupPath {
                path = existing
                try await groupCall(path, "Reset")
            } else {
                let reply = try await avahiCall {
                    try await connection.call(destination: AvahiBus.name, path: AvahiBus.serverPath,
                                              interface: AvahiBus.server, method: "EntryGroupNew", timeout: callTimeout)
                }
                guard let created = reply.first?.objectPathValue else { throw AvahiError.malformedReply("EntryGroupNew") }
                path = created
                groupPath = created
            }
            committedName = nil
            try await groupCall(path, "AddService", [
                .int32(interface), .int32(ipProtocol.rawValue), .uint32(0),
                .string(service.name), .string(serviceType), .string(""), .string(""),
                .uint16(service.port), TXTRecord.dbusValue(service.txt),
            ])
            try await groupCall(path, "Commit")
            committedName = service.name
        } catch AvahiError.daemonUnavailable {
            groupPath = nil
            committedName = nil
            throw AvahiError.daemonUnavailable
        }
    }

    private func groupCall(_ path: String, _ method: String, _ arguments: [DBusValue] = []) async throws {
        _ = try await avahiCall {
            try await connection.call(destination: AvahiBus.name, path: path, interface: AvahiBus.entryGroup,
                                      method: method, arguments: arguments, timeout: callTimeout)
        }
    }

    private func freeGroup() async {
        guard let path = groupPath else { return }
        groupPath = nil
        committedName = nil
        // If the daemon is gone, so is the group; nothing else can go wrong that we could fix.
        try? await groupCall(path, "Free")
    }

    private func serialized<T>(_ body: () async throws -> T) async rethrows -> T {
        if !gate.tryEnter() {
            await withCheckedContinuation { gate.enqueue($0) }
        }
        defer { gate.leave() }
        return try await body()
    }

    // MARK: - Signals

    private func startWatching() async throws {
        guard feed == nil else { return }
        let rules = [
            AvahiBus.ownerChangedRule,
            DBusMatchRule(sender: AvahiBus.name, interface: AvahiBus.server, member: "StateChanged", path: AvahiBus.serverPath),
            DBusMatchRule(sender: AvahiBus.name, interface: AvahiBus.entryGroup, member: "StateChanged"),
        ]
        feed = try await SignalFeed.start(on: connection, rules: rules, buffer: 256) { [weak self] signal in
            guard let self else { return false }
            await self.handle(signal)
            return true
        }
    }

    private func handle(_ signal: DBusSignal) async {
        if let change = AvahiBus.ownerChange(signal) {
            guard change.name == AvahiBus.name else { return }
            if change.oldOwner != nil {
                groupPath = nil
                committedName = nil
                eventSink.yield(.daemonLost)
            }
            if change.newOwner != nil {
                eventSink.yield(.daemonReturned)
                await serialized { try? await self.publishIfRunning() }
            }
            return
        }
        switch signal.interface {
        case AvahiBus.server:
            guard let raw = signal.arguments.first?.int32Value, let state = AvahiBus.ServerState(rawValue: raw) else { return }
            await serverStateChanged(state)
        case AvahiBus.entryGroup:
            guard signal.path == groupPath, let raw = signal.arguments.first?.int32Value,
                let state = AvahiBus.EntryGroupState(rawValue: raw), let name = committedName
            else { return }
            switch state {
            case .established:
                eventSink.yield(.established(name: name))
            case .collision:
                committedName = nil
                eventSink.yield(.collision(name: name))
            case .failure:
                committedName = nil
                let errorName = signal.arguments.count > 1 ? signal.arguments[1].stringValue ?? "" : ""
                eventSink.yield(.failed(name: name, AvahiError(avahiErrorName: errorName)))
            case .uncommitted, .registering:
                break
            }
        default:
            break
        }
    }

    private func serverStateChanged(_ state: AvahiBus.ServerState) async {
        switch state {
        case .running:
            guard wanted != nil, committedName == nil else { return }
            await serialized { try? await self.publishIfRunning() }
        case .registering, .collision:
            // The host name is being (re-)established: our records refer to it, so take them down
            // until the server is running again.
            await serialized {
                guard let path = groupPath else { return }
                committedName = nil
                try? await groupCall(path, "Reset")
            }
        case .invalid, .failure:
            break
        }
    }
}
