// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonAvahi
import BatonCore
import BatonDBus

/// What the DNS-SD part keeps (protocol §5, §8.2): the Avahi connection, the `_baton._tcp`
/// publisher and browser, one `_baton-pair._tcp` publisher per waiting pairing session, and the
/// directory that maps keyed instance names to members.
struct DiscoveryBook: Sendable {
    var connection: DBusConnection?
    var ringPublisher: AvahiPublisher?
    var ringBrowser: AvahiBrowser?
    /// What the ring publisher was last asked to announce (nil: withdrawn).
    var announced: RingAnnouncement?
    var pairingPublishers: [String: AvahiPublisher] = [:]
    var tasks: [Task<Void, Never>] = []
    var directory: InstanceNameDirectory?
    var directoryRosterVersion: UInt64?
    /// The last connection attempt, in wall-clock seconds (retries when the bus was missing).
    var lastConnectAttempt: Int64?
    var discoverRuns = 0

    struct RingAnnouncement: Sendable, Hashable {
        var name: String
        var port: UInt16
    }
}

/// One `_baton-pair._tcp` endpoint found by Pairing1.Discover: the reply type clients decode.
typealias DiscoveredPairing = PairingEndpoint

/// DNS-SD through Avahi: announces this device's keyed `_baton._tcp` name while the transfer runs
/// and there are members, turns members' resolved names into endpoint hints (for the ring), and
/// announces and browses `_baton-pair._tcp` for pairing. Follows the ring through its snapshots.
public actor DiscoveryService {
    let ring: RingService
    let avahiBus: DBusBusKind?
    let clock: any WallClock
    let log: @Sendable (String) -> Void
    var discovery = DiscoveryBook()
    var snapshot: RingSnapshot?
    /// Session ids (hex) of the pairing endpoints announced, by session path: this device's own.
    var pairingSessionIDs: [String: String] = [:]

    static let observerKey = "discovery"
    static let connectRetrySeconds: Int64 = 30
    static let maxDiscoverSeconds: UInt32 = 30
    static let maxConcurrentDiscovers = 4

    public init(ring: RingService, avahiBus: DBusBusKind?, clock: any WallClock, log: @escaping @Sendable (String) -> Void) {
        self.ring = ring
        self.avahiBus = avahiBus
        self.clock = clock
        self.log = log
    }

    public func start() async {
        await ring.observe(Self.observerKey) { [weak self] change in await self?.ringChanged(change.snapshot) }
        await startDiscovery()
    }

    public func stop() async {
        await ring.stopObserving(Self.observerKey)
        await stopDiscovery()
    }

    /// From the daemon's clock: a new epoch means a new instance name; a missing Avahi bus is retried.
    public func tick() async { await discoveryTick() }

    /// When `tick` should next retry reaching Avahi (nil while connected or without Avahi): the
    /// daemon's only wake between epoch boundaries.
    public var retryAt: Int64? {
        guard discovery.connection == nil, avahiBus != nil else { return nil }
        return (discovery.lastConnectAttempt ?? 0) + Self.connectRetrySeconds
    }

    /// Whether pairing endpoints are announced over DNS-SD (the pairing advert says so, §5).
    var isConnected: Bool { discovery.connection != nil }

    private func ringChanged(_ snapshot: RingSnapshot) async {
        // A new identity here restarts the roster version at 1: the instance-name directory, keyed
        // by that version, must not be taken for the old ring's.
        if let previous = self.snapshot, previous.deviceID != snapshot.deviceID {
            discovery.directory = nil
            discovery.directoryRosterVersion = nil
        }
        self.snapshot = snapshot
        await refreshRingAnnouncement()
    }


    // MARK: Lifecycle

    /// Connects to Avahi's bus and starts browsing `_baton._tcp`. Without avahi-daemon (or without
    /// its bus) this only leaves a notice: the browser and publisher start when Avahi appears, and a
    /// missing bus is retried from `tick`.
    func startDiscovery() async {
        guard let bus = avahiBus, discovery.connection == nil else { return }
        discovery.lastConnectAttempt = clock.unixSeconds()
        let connection: DBusConnection
        do { connection = try DBusConnection.service(bus: bus, configuration: DaemonMemoryPolicy.dbusConfiguration) } catch {
            await discoveryNotice("cannot reach the bus for Avahi: \(error)")
            return
        }
        discovery.connection = connection
        let publisher = AvahiPublisher(connection: connection, serviceType: BatonServiceType.ring)
        let browser = AvahiBrowser(connection: connection, serviceType: BatonServiceType.ring)
        discovery.ringPublisher = publisher
        discovery.ringBrowser = browser
        discovery.tasks.append(Task { [weak self] in
            for await event in publisher.events {
                guard let self else { return }
                await self.ringPublisherEvent(event)
            }
        })
        discovery.tasks.append(Task { [weak self] in
            for await event in browser.events {
                guard let self else { return }
                await self.ringBrowserEvent(event)
            }
        })
        do { try await browser.start() } catch { await discoveryNotice("browsing \(BatonServiceType.ring): \(error)") }
        await refreshRingAnnouncement()
    }

    func stopDiscovery() async {
        for task in discovery.tasks { task.cancel() }
        for publisher in discovery.pairingPublishers.values { await publisher.close() }
        await discovery.ringPublisher?.close()
        await discovery.ringBrowser?.stop()
        discovery.connection?.close()
        discovery = DiscoveryBook()
        pairingSessionIDs = [:]
    }

    /// From `tick`: a new epoch means a new instance name; a missing Avahi bus is retried.
    func discoveryTick() async {
        if discovery.connection == nil, avahiBus != nil,
           clock.unixSeconds() - (discovery.lastConnectAttempt ?? 0) >= Self.connectRetrySeconds {
            await startDiscovery()
            return
        }
        await refreshRingAnnouncement()
    }

    func discoveryNotice(_ text: String) async {
        await ring.radio.notice("avahi: \(text)")
        log("batond: avahi: \(text)")
    }

    // MARK: _baton._tcp

    /// Publishes this device's keyed name for the current epoch on the TLS port, or withdraws when
    /// there is nobody to be found by (no other member) or nothing to reach (no transfer).
    func refreshRingAnnouncement() async {
        guard let publisher = discovery.ringPublisher else { return }
        let wanted: DiscoveryBook.RingAnnouncement?
        if let snapshot, let port = snapshot.transferPort, !snapshot.peerSecrets.isEmpty {
            let epoch = Protocol.epoch(unixSeconds: clock.unixSeconds())
            wanted = .init(name: DerivedKeys(secret: snapshot.ownSecret).mdnsInstanceName(epoch: epoch), port: port)
        } else {
            wanted = nil
        }
        guard wanted != discovery.announced else { return }
        discovery.announced = wanted
        guard let wanted else {
            await publisher.withdraw()
            return
        }
        do {
            try await publisher.publish(name: wanted.name, port: wanted.port)
        } catch AvahiError.daemonUnavailable {
            // Kept wanted by the publisher: announced when avahi-daemon appears.
            await discoveryNotice("avahi-daemon is not running; \(BatonServiceType.ring) waits for it")
        } catch {
            await discoveryNotice("publishing \(BatonServiceType.ring): \(error)")
        }
    }

    private func ringPublisherEvent(_ event: AvahiPublisher.Event) async {
        switch event {
        case .established: break
        case .collision(let name): await discoveryNotice("name collision for \(name) (\(BatonServiceType.ring))")
        case .failed(let name, let error): await discoveryNotice("publishing \(name) failed: \(error)")
        case .daemonLost: await discoveryNotice("avahi-daemon left the bus")
        case .daemonReturned: await discoveryNotice("avahi-daemon is back")
        }
    }

    private func ringBrowserEvent(_ event: AvahiBrowser.Event) async {
        switch event {
        case .found(let endpoint):
            await discoveredRingService(name: endpoint.name, address: endpoint.address, port: endpoint.port)
        case .failure(let error):
            await discoveryNotice("browsing \(BatonServiceType.ring): \(error)")
        case .removed, .resolveFailed, .allForNow, .daemonLost:
            // Hints stay hints: a vanished service does not make a cached endpoint wrong.
            break
        }
    }

    /// A `_baton._tcp` instance was resolved: if its name is a member's keyed name (epochs e−1..e+1),
    /// its address goes first in that member's endpoint hints. Strangers are ignored.
    @discardableResult
    func discoveredRingService(name: String, address: String, port: UInt16) async -> DeviceID? {
        guard port > 0, let snapshot, let id = ringDirectory(snapshot).member(forInstanceName: name), id != snapshot.deviceID,
              let endpoint = Self.hintEndpoint(address: address, port: port) else { return nil }
        await ring.endpointFound(id, endpoint)
        return id
    }

    /// The instance-name directory for the current epoch and roster, rebuilt when either changes.
    func ringDirectory(_ snapshot: RingSnapshot) -> InstanceNameDirectory {
        let epoch = Protocol.epoch(unixSeconds: clock.unixSeconds())
        let version = snapshot.rosterVersion
        if let directory = discovery.directory, directory.epoch == epoch, discovery.directoryRosterVersion == version {
            return directory
        }
        var members: [DeviceID: DerivedKeys] = [:]
        for (id, secret) in snapshot.peerSecrets { members[id] = DerivedKeys(secret: secret) }
        let directory = InstanceNameDirectory(members: members, epoch: epoch)
        discovery.directory = directory
        discovery.directoryRosterVersion = version
        return directory
    }

    /// "address:port" for a resolved address; IPv6 link-local addresses need a scope the resolver
    /// does not give, so they are no use as hints.
    static func hintEndpoint(address: String, port: UInt16) -> String? {
        guard !address.isEmpty, !LocalAddresses.isWildcard(address) else { return nil }
        if address.lowercased().hasPrefix("fe80:") { return nil }
        return RingService.formatEndpoint(host: address, port: port)
    }

    // MARK: _baton-pair._tcp

    /// While a pairing session waits for its initiator, its listener is announced with TXT sid.
    func publishPairingEndpoint(path: String, sessionID: [UInt8], port: UInt16, deviceName: String) async {
        guard let connection = discovery.connection else { return }
        let publisher = AvahiPublisher(connection: connection, serviceType: BatonServiceType.pairing)
        discovery.pairingPublishers[path] = publisher
        pairingSessionIDs[path] = sessionID.hexString
        do {
            try await publisher.publish(name: Self.pairingInstanceName(deviceName: deviceName, sessionID: sessionID),
                                        port: port, txt: PairingEndpointTXT.txt(sessionID: sessionID))
        } catch AvahiError.daemonUnavailable {
            await discoveryNotice("avahi-daemon is not running; the pairing endpoint is announced when it starts")
        } catch {
            await discoveryNotice("publishing \(BatonServiceType.pairing): \(error)")
        }
    }

    /// A session that stopped waiting (connected, paired, failed) no longer wants initiators.
    func pairingSessionLeftWaiting(_ path: String) async {
        pairingSessionIDs[path] = nil
        guard let publisher = discovery.pairingPublishers.removeValue(forKey: path) else { return }
        await publisher.close()
    }

    /// The device name and the session id's first 4 hex digits (two devices of the same name may
    /// accept at once), within DNS-SD's 63 bytes.
    static func pairingInstanceName(deviceName: String, sessionID: [UInt8]) -> String {
        let suffix = " (\(Array(sessionID.prefix(2)).hexString))"
        var name = deviceName.isEmpty ? "baton" : deviceName
        while name.utf8.count + suffix.utf8.count > 63 { name.removeLast() }
        return name + suffix
    }

    /// Browses `_baton-pair._tcp` for `seconds` and returns what was resolved, without this
    /// device's own waiting sessions.
    func discoverPairingEndpoints(seconds: UInt32) async throws(ServiceFailure) -> [DiscoveredPairing] {
        guard let connection = discovery.connection else {
            // Without DNS-SD the radio may still have heard pairing adverts (no TCP endpoint then).
            if await ring.radio.isPresent {
                try? await Task.sleep(for: .seconds(Int(seconds)))
                let heard = await bluetoothPairings(known: [])
                if !heard.isEmpty { return heard }
            }
            throw .notReady("Avahi is not available")
        }
        guard discovery.discoverRuns < Self.maxConcurrentDiscovers else {
            throw .notReady("too many discoveries at once")
        }
        discovery.discoverRuns += 1
        defer { discovery.discoverRuns -= 1 }
        let browser = AvahiBrowser(connection: connection, serviceType: BatonServiceType.pairing, maxEntries: 64)
        do { try await browser.start() } catch {
            await browser.stop()
            if await ring.radio.isPresent {
                try? await Task.sleep(for: .seconds(Int(seconds)))
                let heard = await bluetoothPairings(known: [])
                if !heard.isEmpty { return heard }
            }
            throw .notReady("Avahi is not available: \(error)")
        }
        try? await Task.sleep(for: .seconds(Int(seconds)))
        let endpoints = await browser.endpoints
        await browser.stop()
        let own = Set(pairingSessionIDs.values)
        var seen: Set<DiscoveredPairing> = []
        var found: [DiscoveredPairing] = []
        for endpoint in endpoints.sorted(by: { ($0.name, $0.address) < ($1.name, $1.address) }) {
            guard let sid = PairingEndpointTXT.sessionID(from: endpoint.txt), !own.contains(sid.hexString),
                  endpoint.port > 0, Self.hintEndpoint(address: endpoint.address, port: endpoint.port) != nil else { continue }
            let entry = DiscoveredPairing(name: endpoint.name, sessionID: sid.hexString, address: endpoint.address,
                                          port: endpoint.port, host: endpoint.host)
            if seen.insert(entry).inserted { found.append(entry) }
        }
        return found + (await bluetoothPairings(known: Set(found.map(\.sessionID))))
    }

    /// Pairing adverts heard on the radio whose session DNS-SD did not already list: the
    /// machine is nearby and waiting; its address is a Bluetooth one (Port 0, Transport "ble").
    func bluetoothPairings(known: Set<String>) async -> [DiscoveredPairing] {
        await ring.radio.recentPairingAdverts().filter { !known.contains($0.advert.sessionID.hexString) }.map {
            DiscoveredPairing(name: $0.advert.name, sessionID: $0.advert.sessionID.hexString, address: $0.address.description, port: 0,
                              host: "", transport: "ble", psm: $0.advert.psm ?? 0, addressType: $0.addressType.name)
        }
    }
}
