import BatonCore
import BatonTransport

extension RingService {
    /// Endpoint hints kept per member, newest first.
    static let maxEndpointsPerMember = 8

    // MARK: Queries

    public func isMember(_ id: DeviceID) -> Bool { snapshot().isMember(id) }

    public func memberName(_ id: DeviceID) -> String { snapshot().memberName(id) }

    public var rosterVersion: UInt64 { keeper.state.roster.version }

    // MARK: Endpoint hints

    public func endpoints(of id: DeviceID) -> [String] { peers[id]?.endpoints ?? [] }

    /// DNS-SD resolved a member's keyed name: its address goes first in the member's hints.
    func endpointFound(_ id: DeviceID, _ endpoint: String) {
        var info = peers[id] ?? RingStore.PeerInfo(pairedSince: clock.unixSeconds())
        guard info.endpoints.first != endpoint else { return }
        info.endpoints = Self.mergeEndpoints(new: [endpoint], old: info.endpoints)
        peers[id] = info
        do { try store.savePeers(peers) } catch { log("batond: cannot save peers: \(error)") }
    }

    /// The endpoint answered as the member: it goes first.
    public func endpointWorked(_ id: DeviceID, _ endpoint: String) {
        guard var info = peers[id], info.endpoints.first != endpoint else { return }
        info.endpoints = Self.mergeEndpoints(new: [endpoint], old: info.endpoints)
        peers[id] = info
        try? store.savePeers(peers)
    }

    /// Pairing told us the peer's endpoints and where its TCP connection came from or went to.
    /// Pairing over L2CAP also tells the peer's adapter address: its transfer listener (§8.3) is tried last.
    func recordPairingEndpoints(_ id: DeviceID, announced: [String], observedHost: String?, bluetoothPeer: L2CAPSocketAddress? = nil) {
        var hints: [String] = []
        let ports = announced.compactMap { Self.splitEndpoint($0)?.1 }
        if let observedHost, !observedHost.isEmpty, observedHost != "?" {
            for port in ports { hints.append(Self.formatEndpoint(host: observedHost, port: port)) }
        }
        for endpoint in announced {
            guard let (host, _) = Self.splitEndpoint(endpoint), !LocalAddresses.isWildcard(host) else { continue }
            hints.append(endpoint)
        }
        if let bluetoothPeer { hints.append(Self.bluetoothTransferEndpoint(bluetoothPeer.address, bluetoothPeer.addressType)) }
        var info = peers[id] ?? RingStore.PeerInfo(pairedSince: clock.unixSeconds())
        info.endpoints = Self.mergeEndpoints(new: hints, old: info.endpoints)
        peers[id] = info
        try? store.savePeers(peers)
    }

    static func mergeEndpoints(new: [String], old: [String]) -> [String] {
        var seen: Set<String> = []
        return (new + old).filter { seen.insert($0).inserted }.prefix(maxEndpointsPerMember).map { $0 }
    }

    static func formatEndpoint(host: String, port: UInt16) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// What this device announces when pairing.
    func pairingInfoWithEndpoints() -> LocalPairingInfo {
        var info = keeper.pairingInfo()
        info.endpoints = Array((transferReachability?.localEndpoints ?? []).prefix(PairingEndpoints.maxCount))
        return info
    }
}
