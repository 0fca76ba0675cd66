import BatonAPI
import BatonCore
import BatonCrypto
import BatonDBus
import BatonTransport

/// What the advert currently stands for: the activity a FetchActivity may ask for.
struct Publication: Sendable {
    var uid: UInt32
    var record: ActivityRecord
    /// The type hash under this device's current secret (§3).
    var typeHash: TypeHash
    /// The advert revision (§4.2), not the registry's per-activity one.
    var revision: UInt32
}

extension RingService {
    /// Endpoint hints kept per member, newest first.
    static let maxEndpointsPerMember = 8

    // MARK: Attachment

    func attach(_ service: TransferService) async {
        transfer = service
        await service.ringChanged(memberKeys: memberKeys(), syncTo: [])
        await refreshRingAnnouncement()
    }

    func detach(_ service: TransferService) async {
        guard transfer === service else { return }
        transfer = nil
        await refreshRingAnnouncement()
    }

    /// Identity keys of every member but this device.
    func memberKeys() -> [DeviceID: [UInt8]] {
        var keys: [DeviceID: [UInt8]] = [:]
        for (id, member) in keeper.state.roster.members where id != keeper.deviceID { keys[id] = member.identityKey }
        return keys
    }

    /// After every ring change (RingService.apply): pins, channels of removed members, RingSync.
    func transferRingChanged(_ actions: [RingKeeper.Action]) async {
        guard let transfer else { return }
        let syncTo = actions.compactMap { action -> DeviceID? in
            if case .sync(let id) = action { return id }
            return nil
        }
        await transfer.ringChanged(memberKeys: memberKeys(), syncTo: syncTo)
    }

    // MARK: Queries for the transfer

    func isMember(_ id: DeviceID) -> Bool { id != keeper.deviceID && keeper.state.roster.members[id] != nil }

    func memberName(_ id: DeviceID) -> String { keeper.state.roster.members[id]?.name ?? id.shortForm }

    var rosterVersion: UInt64 { keeper.state.roster.version }

    func rosterForSync() -> Roster { keeper.state.roster }

    func currentPublication() -> Publication? {
        guard let uid = advertisedUID, let record = currentRecord() else { return nil }
        let hash = DerivedKeys(secret: keeper.ownSecret).typeHash(record.activityType)
        return Publication(uid: uid, record: record, typeHash: hash, revision: sender.counters.revision)
    }

    /// A member's RingSync (inside pinned TLS): merged, persisted and acted on; returns our roster after it.
    func receivedRoster(_ roster: Roster, from sender: DeviceID) async -> Roster {
        let before = Set(keeper.state.roster.members.keys)
        let actions = keeper.received(roster, from: sender, random: SystemRandom())
        let gone = before.subtracting(keeper.state.roster.members.keys)
        if !gone.isEmpty {
            for id in gone { peers[id] = nil }
            try? store.savePeers(peers)
            log("batond: RingSync from \(sender.shortForm) removed \(gone.count) member(s)")
        }
        await apply(actions)
        return keeper.state.roster
    }

    // MARK: Endpoint hints

    func endpoints(of id: DeviceID) -> [String] { peers[id]?.endpoints ?? [] }

    /// The endpoint answered as the member: it goes first.
    func endpointWorked(_ id: DeviceID, _ endpoint: String) {
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
        info.endpoints = Array((transfer?.localEndpoints ?? []).prefix(PairingEndpoints.maxCount))
        return info
    }

    // MARK: Continuing by hand (Ring1.Continue)

    func transferMethods() -> [DBusMethod] {
        [
            DBusMethod("Continue", in: [DBusArgument("device", "s"), DBusArgument("type", "s")], out: [DBusArgument("outcome", "s")]) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.requirePrivilege(call.sender)
                guard call.arguments.count == 2, let device = call.arguments[0].stringValue, let type = call.arguments[1].stringValue else {
                    throw DBusError(name: BatonErrorName.invalidArguments, message: "Continue takes (s device, s type)")
                }
                return [.string(try await self.continueActivity(from: device, type: type, uid: uid))]
            },
        ]
    }

    /// Fetches `member`'s current activity of `type`, delivers it to `uid`'s handler and, when it was
    /// delivered, tells the source (ActivityContinued → WasContinued). Returns the delivery outcome.
    func continueActivity(from device: String, type: String, uid: UInt32) async throws -> String {
        guard let member = findMember(device), member.deviceID != keeper.deviceID else {
            throw DBusError(name: BatonErrorName.unknownDevice, message: "no single ring member matches")
        }
        do { try ActivityRecord.validateType(type) } catch {
            throw DBusError(name: BatonErrorName.invalidArguments, message: "invalid activity type")
        }
        guard let transfer else { throw DBusError(name: BatonErrorName.notReady, message: "the transfer is not running") }
        // The type hash is keyed with the sender's secret (§3).
        let typeHash = DerivedKeys(secret: member.secret).typeHash(type)
        let record: ActivityRecord
        do {
            record = try await transfer.fetch(member: member.deviceID, typeHash: typeHash, revision: ActivityReference.anyRevision)
        } catch {
            throw Self.dbusError(error)
        }
        guard record.activityType == type else { throw DBusError(name: BatonErrorName.failed, message: "the member sent another activity type") }
        let outcome = await transfer.activities.deliver(activity: record, from: member.name, to: uid)
        guard outcome == .delivered else { return Self.outcomeName(outcome) }
        do {
            try await transfer.sendContinued(member: member.deviceID, typeHash: typeHash, revision: record.revision)
        } catch {
            log("batond: ActivityContinued to \(member.deviceID.shortForm) failed: \(error)")
        }
        return Self.outcomeName(outcome)
    }

    static func outcomeName(_ outcome: DeliveryOutcome) -> String {
        switch outcome {
        case .delivered: "delivered"
        case .declined: "declined"
        case .noHandler: "no-handler"
        case .launchFailed: "launch-failed"
        case .failed: "failed"
        }
    }

    static func dbusError(_ error: TransferError) -> DBusError {
        switch error {
        case .notAMember: DBusError(name: BatonErrorName.unknownDevice, message: "not a ring member")
        case .noEndpoints: DBusError(name: BatonErrorName.notReady, message: "no endpoint known for the member")
        case .unreachable(let why): DBusError(name: BatonErrorName.notReady, message: "the member cannot be reached: \(why)")
        case .remote(let frame) where frame.code == .unknownActivity:
            DBusError(name: BatonErrorName.unknownActivity, message: "the member has no such current activity")
        case .remote(let frame) where frame.code == .notPermitted:
            DBusError(name: BatonErrorName.notPermitted, message: "the member refused")
        case .remote(let frame): DBusError(name: BatonErrorName.failed, message: "the member answered \(frame.code)")
        case .protocolError(let why): DBusError(name: BatonErrorName.failed, message: "protocol error: \(why)")
        }
    }
}
