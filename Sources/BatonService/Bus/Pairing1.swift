// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import BatonTransport

/// org.baton.Pairing1: Accept, Pair, Remove, RemoveWithIntroduced, ResetIdentity, ListIntroduced, Discover. Every
/// method needs the pairing privilege.
extension RingBus {
    func pairing1Interface() -> DBusInterface {
        DBusInterface(BatonInterface.pairing, methods: [
            DBusMethod(OrgBaton.Pairing1.accept) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.requirePrivilege(call.sender)
                let options: AcceptOptions
                do throws(BatonAPIError) { options = try AcceptOptions(call.arguments.first ?? .propertyDictionary([:])) } catch { throw error.dbusError }
                let pairing = self.pairing
                let path = try await mappingFailures { () throws(ServiceFailure) in try await pairing.acceptPairing(uid: uid, host: options.host) }
                try await self.exportSession(path, owner: call.sender)
                return [.objectPath(path)]
            },
            DBusMethod(OrgBaton.Pairing1.pair) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.requirePrivilege(call.sender)
                guard let target = call.arguments.first?.stringValue, target.utf8.count <= Self.maxTargetBytes else {
                    throw DBusError(ServiceFailure.invalidArguments("target must be HOST:PORT or ble:ADDRESS/PSM"))
                }
                let options: PairOptions
                do throws(BatonAPIError) { options = try PairOptions(call.arguments.last ?? .propertyDictionary([:])) } catch { throw error.dbusError }
                // The acceptor's session id (its pairing advert, its DNS-SD TXT record, or `bt-pair accept`'s output).
                guard let sessionID = [UInt8](hex: options.sessionID), sessionID.count == 8 else {
                    throw DBusError(ServiceFailure.invalidArguments("SessionId must be 16 hex digits"))
                }
                let addressType: LEAddressType?
                switch options.addressType {
                case nil: addressType = nil
                case "public": addressType = .public
                case "random": addressType = .random
                default: throw DBusError(ServiceFailure.invalidArguments("AddressType must be public or random"))
                }
                let pairing = self.pairing
                let path = try await mappingFailures { () throws(ServiceFailure) in
                    try await pairing.pair(uid: uid, target: target, sessionID: sessionID, addressType: addressType)
                }
                try await self.exportSession(path, owner: call.sender)
                return [.objectPath(path)]
            },
            DBusMethod(OrgBaton.Pairing1.remove) { [weak self] call in
                guard let self else { return [] }
                _ = try await self.requirePrivilege(call.sender)
                let ring = self.ring, device = call.arguments.first?.stringValue ?? ""
                try await mappingFailures { () throws(ServiceFailure) in try await ring.remove(device) }
                return []
            },
            DBusMethod(OrgBaton.Pairing1.removeWithIntroduced) { [weak self] call in
                guard let self else { return [] }
                _ = try await self.requirePrivilege(call.sender)
                let ring = self.ring, device = call.arguments.first?.stringValue ?? ""
                try await mappingFailures { () throws(ServiceFailure) in try await ring.remove(device, withIntroduced: true) }
                return []
            },
            DBusMethod(OrgBaton.Pairing1.resetIdentity) { [weak self] call in
                guard let self else { return [] }
                _ = try await self.requirePrivilege(call.sender)
                let pairing = self.pairing
                let reset = try await mappingFailures { () throws(ServiceFailure) in try await pairing.resetIdentity() }
                return [.string(reset.deviceID.description)]
            },
            DBusMethod(OrgBaton.Pairing1.listIntroduced) { [weak self] call in
                guard let self else { return [] }
                _ = try await self.requirePrivilege(call.sender)
                let ring = self.ring, device = call.arguments.first?.stringValue ?? ""
                let members = try await mappingFailures { () throws(ServiceFailure) in try await ring.introduced(by: device) }
                return [.array(elementSignature: "a{sv}", members.map { RingBus.ringMember($0).dbusValue })]
            },
            DBusMethod(OrgBaton.Pairing1.discover) { [weak self] call in
                guard let self else { return [] }
                _ = try await self.requirePrivilege(call.sender)
                guard let seconds = call.arguments.first?.uint32Value, (1...DiscoveryService.maxDiscoverSeconds).contains(seconds) else {
                    throw DBusError(ServiceFailure.invalidArguments("seconds must be 1-\(DiscoveryService.maxDiscoverSeconds)"))
                }
                let discovery = self.discovery
                let found = try await mappingFailures { () throws(ServiceFailure) in try await discovery.discoverPairingEndpoints(seconds: seconds) }
                return [.array(elementSignature: "a{sv}", found.map(Self.discoveredValue))]
            },
        ])
    }

    static func discoveredValue(_ found: DiscoveredPairing) -> DBusValue { found.dbusValue }

    /// The longest Pair target taken: "[IPv6]:port" and "ble:ADDRESS/PSM" fit easily, a host name too.
    static let maxTargetBytes = 300
}
