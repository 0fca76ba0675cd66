// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport

extension RingService {
    /// Endpoint hints kept per member, newest first.
    static let maxEndpointsPerMember = Endpoint.maxPerMember

    // MARK: Queries

    public func isMember(_ id: DeviceID) -> Bool { snapshot().isMember(id) }

    public func memberName(_ id: DeviceID) -> String { snapshot().memberName(id) }

    public var rosterVersion: UInt64 { keeper.state.roster.version }
    public var rosterDigest: UInt64 { keeper.state.roster.digestPrefix }

    // MARK: Endpoint hints

    /// Where a member may be reached, newest that worked first.
    public func endpointHints(of id: DeviceID) -> [Endpoint] { peers[id]?.hints ?? [] }

    /// Where the transfer dials a member, in order (typed; the transfer takes them as they are). A
    /// member with a `ble:` hint is dialled at the address its sealed advert was last heard from
    /// instead of the stored one (§8.3): with LE privacy the stored address (the pairing channel's)
    /// has rotated away, and an address that is no longer advertised cannot be connected to anyway.
    public func dialEndpoints(of id: DeviceID) async -> [Endpoint] {
        var hints = endpointHints(of: id)
        // The radio is asked only for a member with a `ble:` hint (nothing to replace otherwise).
        if let first = hints.firstIndex(where: Self.isBluetooth), let heard = await radio.heardEndpoint(of: id) {
            hints.removeAll(where: Self.isBluetooth)
            hints.insert(heard, at: min(first, hints.count))
        }
        return hints
    }

    /// The text forms of `dialEndpoints(of:)` (diagnostics and tests).
    public func endpoints(of id: DeviceID) async -> [String] { await dialEndpoints(of: id).map(\.description) }

    /// DNS-SD resolved a member's keyed name: its address goes first in the member's hints.
    func endpointFound(_ id: DeviceID, _ endpoint: Endpoint) {
        // Resolved from a directory built before the ring changed (a removal, a new identity): no
        // record for a device that is no longer a member.
        guard snapshot().isMember(id) else { return }
        var info = peers[id] ?? RingStore.PeerInfo(pairedSince: clock.unixSeconds())
        guard info.hints.first != endpoint else { return }
        info.hints = Endpoint.merge(new: [endpoint], old: info.hints)
        peers[id] = info
        do { try store.savePeers(peers) } catch { log("batond: cannot save peers: \(error)") }
    }

    /// Text from DNS-SD: ignored unless it parses as an endpoint.
    func endpointFound(_ id: DeviceID, _ text: String) {
        guard let endpoint = try? Endpoint(parsing: text) else { return }
        endpointFound(id, endpoint)
    }

    /// The endpoint answered as the member: it goes first.
    public func endpointWorked(_ id: DeviceID, _ endpoint: Endpoint) {
        guard var info = peers[id], info.hints.first != endpoint else { return }
        info.hints = Endpoint.merge(new: [endpoint], old: info.hints)
        peers[id] = info
        try? store.savePeers(peers)
    }

    public func endpointWorked(_ id: DeviceID, _ text: String) {
        guard let endpoint = try? Endpoint(parsing: text) else { return }
        endpointWorked(id, endpoint)
    }

    /// Pairing told us the peer's endpoints and where its TCP connection came from or went to.
    /// Pairing over L2CAP also tells the peer's adapter address: its transfer listener (§8.3) is tried last.
    func recordPairingEndpoints(_ id: DeviceID, announced: [String], observedHost: String?, bluetoothPeer: L2CAPSocketAddress? = nil) {
        let hints = Endpoint.pairingHints(announced: announced, observedHost: observedHost,
                                          bluetoothPeer: bluetoothPeer.map { ($0.address, $0.addressType) })
        var info = peers[id] ?? RingStore.PeerInfo(pairedSince: clock.unixSeconds())
        info.hints = Endpoint.merge(new: hints, old: info.hints)
        peers[id] = info
        try? store.savePeers(peers)
    }

    static func formatEndpoint(host: String, port: UInt16) -> String {
        Endpoint.ip(host: host, port: port).description
    }

    /// What this device announces when pairing.
    func pairingInfoWithEndpoints() -> LocalPairingInfo {
        var info = keeper.pairingInfo()
        info.endpoints = Array((transferReachability?.localEndpoints ?? []).prefix(PairingEndpoints.maxCount))
        return info
    }
}

extension RingService {
    static func isBluetooth(_ endpoint: Endpoint) -> Bool {
        if case .bluetooth = endpoint { true } else { false }
    }
}
