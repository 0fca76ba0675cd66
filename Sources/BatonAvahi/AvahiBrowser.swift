// SPDX-License-Identifier: GPL-2.0-or-later
import BatonDBus

/// Identifies one DNS-SD service instance as Avahi reports it (per interface and protocol).
public struct AvahiServiceKey: Sendable, Hashable {
    public var interface: AvahiInterfaceIndex
    public var ipProtocol: Int32
    public var name: String
    public var type: String
    public var domain: String
}

/// A resolved service instance.
public struct DiscoveredEndpoint: Sendable, Hashable {
    public var name: String
    public var type: String
    public var domain: String
    /// Host name as announced, e.g. `laptop.local`.
    public var host: String
    /// Numeric address text (IPv4 dotted quad or IPv6).
    public var address: String
    public var addressProtocol: AvahiProtocol
    public var port: UInt16
    public var txt: [String: String]
    public var interface: AvahiInterfaceIndex
    public var ipProtocol: AvahiProtocol
    /// Published on this machine (by any client of the local avahi-daemon).
    public var isLocal: Bool

    public var key: AvahiServiceKey {
        AvahiServiceKey(interface: interface, ipProtocol: ipProtocol.rawValue, name: name, type: type, domain: domain)
    }
}

/// Browses one service type through avahi-daemon and resolves every instance it sees.
///
/// Events come in order per instance: `found` once resolved, `removed` when the instance goes away
/// (only for instances that were reported found). The table of known instances is bounded by
/// `maxEntries`; further instances are counted in `droppedItems` and otherwise ignored. When
/// avahi-daemon leaves the bus every known instance is reported removed, and browsing restarts
/// when it returns.
public actor AvahiBrowser {
    public enum Event: Sendable, Hashable {
        case found(DiscoveredEndpoint)
        case removed(AvahiServiceKey)
        case resolveFailed(AvahiServiceKey, AvahiError)
        /// Avahi has sent what it had cached; more may follow.
        case allForNow
        case failure(AvahiError)
        case daemonLost
    }

    public nonisolated let events: AsyncStream<Event>
    public nonisolated let serviceType: String
    public nonisolated let maxEntries: Int
    public private(set) var droppedItems = 0

    private enum Item {
        case resolving(token: UInt64)
        case resolved(DiscoveredEndpoint)
        case unresolvable
    }

    private let eventSink: AsyncStream<Event>.Continuation
    private let connection: DBusConnection
    private let interface: AvahiInterfaceIndex
    private let ipProtocol: AvahiProtocol
    private let maxConcurrentResolves: Int
    private let resolveTimeout: Duration = .seconds(10)

    private var table: [AvahiServiceKey: Item] = [:]
    private var resolveQueue: [(AvahiServiceKey, UInt64)] = []
    private var resolvesInFlight = 0
    private var nextToken: UInt64 = 0
    private var browserPath: String?
    /// While a browser is being created its path is unknown; signals wait here (bounded).
    private var creatingBrowser = false
    private var earlySignals: [DBusSignal] = []
    private var feed: SignalFeed?
    private var stopped = false

    public init(connection: DBusConnection, serviceType: String = BatonServiceType.ring,
                interface: AvahiInterfaceIndex = avahiAnyInterface, ipProtocol: AvahiProtocol = .unspecified,
                maxEntries: Int = 128, maxConcurrentResolves: Int = 4) {
        self.connection = connection
        self.serviceType = serviceType
        self.interface = interface
        self.ipProtocol = ipProtocol
        self.maxEntries = max(1, maxEntries)
        self.maxConcurrentResolves = max(1, maxConcurrentResolves)
        (events, eventSink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(max(64, 2 * maxEntries)))
    }

    /// Subscribes and starts browsing. Throws `AvahiError.daemonUnavailable` if avahi-daemon is not
    /// on the bus (browsing then still starts when it appears, until `stop()`).
    public func start() async throws {
        guard !stopped else { throw AvahiError.badState }
        guard feed == nil else { return }
        let rules = [
            AvahiBus.ownerChangedRule,
            // The whole interface, not one path: with the ServiceBrowserNew fallback the path is known
            // only after the browser may already have sent signals.
            DBusMatchRule(sender: AvahiBus.name, interface: AvahiBus.serviceBrowser),
        ]
        feed = try await SignalFeed.start(on: connection, rules: rules, buffer: 1024) { [weak self] signal in
            guard let self else { return false }
            await self.handle(signal)
            return true
        }
        try await createBrowser()
    }

    /// Frees the browser, drops subscriptions and ends `events`.
    public func stop() async {
        guard !stopped else { return }
        stopped = true
        feed?.stop(on: connection)
        feed = nil
        if let path = browserPath {
            browserPath = nil
            _ = try? await connection.call(destination: AvahiBus.name, path: path, interface: AvahiBus.serviceBrowser,
                                           method: "Free", timeout: .seconds(2))
        }
        table = [:]
        resolveQueue = []
        eventSink.finish()
    }

    /// Resolved instances currently known.
    public var endpoints: [DiscoveredEndpoint] {
        table.values.compactMap { if case .resolved(let endpoint) = $0 { endpoint } else { nil } }
    }

    // MARK: - Browser object

    private func createBrowser() async throws {
        creatingBrowser = true
        earlySignals = []
        defer { creatingBrowser = false }
        let arguments: [DBusValue] = [.int32(interface), .int32(ipProtocol.rawValue), .string(serviceType), .string(""), .uint32(0)]
        let path = try await newBrowserPath(arguments)
        let early = earlySignals
        earlySignals = []
        creatingBrowser = false
        for signal in early where signal.path == path { browserSignal(signal) }
    }

    private func newBrowserPath(_ arguments: [DBusValue]) async throws -> String {
        do {
            // Avahi ≥ 0.8: Prepare creates the browser without starting it, so nothing is missed
            // between learning the path and subscribing; Start begins the lookups.
            let reply = try await connection.call(destination: AvahiBus.name, path: AvahiBus.serverPath, interface: AvahiBus.server2,
                                                  method: "ServiceBrowserPrepare", arguments: arguments, timeout: resolveTimeout)
            guard let path = reply.first?.objectPathValue else { throw AvahiError.malformedReply("ServiceBrowserPrepare") }
            browserPath = path
            _ = try await connection.call(destination: AvahiBus.name, path: path, interface: AvahiBus.serviceBrowser,
                                          method: "Start", timeout: resolveTimeout)
            return path
        } catch let error as DBusError where error.name == DBusError.unknownMethodName || error.name == DBusError.unknownInterfaceName {
            // Older Avahi: the browser starts at once; signals sent before the reply wait in earlySignals.
            let reply = try await avahiCall {
                try await connection.call(destination: AvahiBus.name, path: AvahiBus.serverPath, interface: AvahiBus.server,
                                          method: "ServiceBrowserNew", arguments: arguments, timeout: resolveTimeout)
            }
            guard let path = reply.first?.objectPathValue else { throw AvahiError.malformedReply("ServiceBrowserNew") }
            browserPath = path
            return path
        } catch let error as DBusError {
            throw AvahiError(error)
        }
    }

    // MARK: - Signals

    private func handle(_ signal: DBusSignal) async {
        if let change = AvahiBus.ownerChange(signal) {
            guard change.name == AvahiBus.name else { return }
            if change.oldOwner != nil { daemonLost() }
            if change.newOwner != nil, !stopped {
                do { try await createBrowser() } catch let error as AvahiError { eventSink.yield(.failure(error)) } catch {}
            }
            return
        }
        guard signal.interface == AvahiBus.serviceBrowser else { return }
        if creatingBrowser {
            if earlySignals.count < 2 * maxEntries + 16 { earlySignals.append(signal) }
            return
        }
        guard signal.path == browserPath else { return }
        browserSignal(signal)
    }

    private func daemonLost() {
        browserPath = nil
        for (key, item) in table {
            if case .resolved = item { eventSink.yield(.removed(key)) }
        }
        table = [:]
        resolveQueue = []
        eventSink.yield(.daemonLost)
    }

    private func browserSignal(_ signal: DBusSignal) {
        switch signal.member {
        case "ItemNew":
            guard let key = Self.itemKey(signal.arguments), table[key] == nil else { return }
            guard table.count < maxEntries else {
                droppedItems += 1
                return
            }
            nextToken &+= 1
            table[key] = .resolving(token: nextToken)
            resolveQueue.append((key, nextToken))
            pumpResolves()
        case "ItemRemove":
            guard let key = Self.itemKey(signal.arguments), let item = table.removeValue(forKey: key) else { return }
            if case .resolved = item { eventSink.yield(.removed(key)) }
        case "Failure":
            let name = signal.arguments.first?.stringValue ?? ""
            eventSink.yield(.failure(AvahiError(avahiErrorName: name)))
        case "AllForNow":
            eventSink.yield(.allForNow)
        default:
            break
        }
    }

    /// (interface i, protocol i, name s, type s, domain s, flags u)
    static func itemKey(_ arguments: [DBusValue]) -> AvahiServiceKey? {
        guard arguments.count == 6, let interface = arguments[0].int32Value, let proto = arguments[1].int32Value,
            let name = arguments[2].stringValue, let type = arguments[3].stringValue, let domain = arguments[4].stringValue
        else { return nil }
        return AvahiServiceKey(interface: interface, ipProtocol: proto, name: name, type: type, domain: domain)
    }

    // MARK: - Resolving

    private func pumpResolves() {
        while resolvesInFlight < maxConcurrentResolves, !resolveQueue.isEmpty {
            let (key, token) = resolveQueue.removeFirst()
            guard case .resolving(token)? = table[key] else { continue }
            resolvesInFlight += 1
            Task { await self.resolve(key, token: token) }
        }
    }

    private func resolve(_ key: AvahiServiceKey, token: UInt64) async {
        defer {
            resolvesInFlight -= 1
            pumpResolves()
        }
        let outcome: Result<DiscoveredEndpoint, AvahiError>
        do {
            let reply = try await avahiCall {
                try await connection.call(
                    destination: AvahiBus.name, path: AvahiBus.serverPath, interface: AvahiBus.server, method: "ResolveService",
                    arguments: [.int32(key.interface), .int32(key.ipProtocol), .string(key.name), .string(key.type),
                                .string(key.domain), .int32(ipProtocol.rawValue), .uint32(0)],
                    timeout: resolveTimeout)
            }
            outcome = .success(try Self.endpoint(fromResolveReply: reply))
        } catch let error as AvahiError {
            outcome = .failure(error)
        } catch {
            outcome = .failure(.malformedReply("\(error)"))
        }
        // The instance may have been removed (or removed and re-added) meanwhile.
        guard !stopped, case .resolving(token)? = table[key] else { return }
        switch outcome {
        case .success(let endpoint):
            table[key] = .resolved(endpoint)
            eventSink.yield(.found(endpoint))
        case .failure(let error):
            table[key] = .unresolvable
            eventSink.yield(.resolveFailed(key, error))
        }
    }

    /// ResolveService reply: (interface i, protocol i, name s, type s, domain s, host s, aprotocol i,
    /// address s, port q, txt aay, flags u).
    static func endpoint(fromResolveReply reply: [DBusValue]) throws(AvahiError) -> DiscoveredEndpoint {
        guard reply.count == 11,
            let interface = reply[0].int32Value,
            let proto = reply[1].int32Value.flatMap(AvahiProtocol.init(rawValue:)),
            let name = reply[2].stringValue, let type = reply[3].stringValue, let domain = reply[4].stringValue,
            let host = reply[5].stringValue,
            let addressProtocol = reply[6].int32Value.flatMap(AvahiProtocol.init(rawValue:)),
            let address = reply[7].stringValue,
            let port = reply[8].uint16Value,
            let txtStrings = reply[9].arrayValue,
            let flags = reply[10].uint32Value
        else { throw .malformedReply("ResolveService") }
        var txt: [[UInt8]] = []
        for string in txtStrings.prefix(TXTRecord.maxEntries) {
            guard let bytes = string.bytesValue else { throw .malformedReply("ResolveService TXT") }
            txt.append(bytes)
        }
        return DiscoveredEndpoint(name: name, type: type, domain: domain, host: host, address: address,
                                  addressProtocol: addressProtocol, port: port, txt: TXTRecord.decode(txt),
                                  interface: interface, ipProtocol: proto, isLocal: flags & AvahiBus.resultLocal != 0)
    }
}
