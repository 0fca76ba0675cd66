// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonDBus

/// One entry of Ring1.ListMembers (`aa{sv}`). The peer fields are absent for this machine.
public struct RingMember: Sendable, Hashable {
    public var name: String
    public var deviceID: String
    /// xxxx-xxxx
    public var shortID: String
    /// This machine.
    public var isSelf: Bool
    /// Unix seconds; nil for this machine.
    public var pairedSince: Int64?
    public var lastSeen: Int64?
    public var lastRSSI: Int16?
    /// HOST:PORT endpoints last announced by the member; nil for this machine.
    public var endpoints: [String]?
    /// The short id of the member that paired this one, when this machine learned it from another
    /// member's roster (not by pairing with it itself); nil otherwise.
    public var introducedBy: String?
    /// With `introducedBy`: whether that member has since left the ring (removed, or taken out by a
    /// cascade); the attribution stays. Nil without `introducedBy`, or from a daemon that does not say.
    public var introducerRemoved: Bool?

    public init(name: String, deviceID: String, shortID: String, isSelf: Bool, pairedSince: Int64? = nil,
                lastSeen: Int64? = nil, lastRSSI: Int16? = nil, endpoints: [String]? = nil, introducedBy: String? = nil,
                introducerRemoved: Bool? = nil) {
        self.introducedBy = introducedBy
        self.introducerRemoved = introducerRemoved
        self.name = name
        self.deviceID = deviceID
        self.shortID = shortID
        self.isSelf = isSelf
        self.pairedSince = pairedSince
        self.lastSeen = lastSeen
        self.lastRSSI = lastRSSI
        self.endpoints = endpoints
    }

    public init(_ value: DBusValue) throws(BatonAPIError) {
        guard let entry = value.asDictionary, let name = entry["Name"]?.stringValue, let deviceID = entry["DeviceId"]?.stringValue,
              let shortID = entry["ShortId"]?.stringValue, let isSelf = entry["Self"]?.boolValue else {
            throw .unexpectedReply("ListMembers entry lacks Name, DeviceId, ShortId (s) or Self (b)")
        }
        self.init(name: name, deviceID: deviceID, shortID: shortID, isSelf: isSelf, pairedSince: entry["PairedSince"]?.int64Value,
                  lastSeen: entry["LastSeen"]?.int64Value, lastRSSI: entry["LastRSSI"]?.int16Value,
                  endpoints: entry["Endpoints"]?.stringArrayValue, introducedBy: entry["IntroducedBy"]?.stringValue,
                  introducerRemoved: entry["IntroducerRemoved"]?.boolValue)
    }

    public var dbusValue: DBusValue {
        var entry: [String: DBusValue] = [
            "Name": .string(name), "DeviceId": .string(deviceID), "ShortId": .string(shortID), "Self": .boolean(isSelf),
        ]
        if let pairedSince { entry["PairedSince"] = .int64(pairedSince) }
        if let lastSeen { entry["LastSeen"] = .int64(lastSeen) }
        if let lastRSSI { entry["LastRSSI"] = .int16(lastRSSI) }
        if let endpoints { entry["Endpoints"] = .stringArray(endpoints) }
        if let introducedBy { entry["IntroducedBy"] = .string(introducedBy) }
        if let introducerRemoved { entry["IntroducerRemoved"] = .boolean(introducerRemoved) }
        return .propertyDictionary(entry)
    }

    /// The whole ListMembers reply.
    public static func list(_ reply: [DBusValue]) throws(BatonAPIError) -> [RingMember] {
        guard let items = reply.first?.arrayValue else { throw .unexpectedReply("ListMembers returned \(reply.map(\.signature))") }
        var members: [RingMember] = []
        for item in items { members.append(try RingMember(item)) }
        return members
    }
}

/// One machine waiting in `Pairing1.Accept`, as Pairing1.Discover reports it (`aa{sv}` entry).
public struct PairingEndpoint: Sendable, Hashable {
    public var name: String
    public var sessionID: String
    public var address: String
    public var port: UInt16
    public var host: String
    /// "tcp" (DNS-SD) or "ble" (its pairing advert was heard; no TCP endpoint known).
    public var transport: String
    /// The L2CAP PSM of a "ble" entry (0: its advert offers no channel).
    public var psm: UInt16
    /// "public" or "random" for "ble" entries, else empty.
    public var addressType: String

    public init(name: String, sessionID: String, address: String, port: UInt16, host: String = "", transport: String = "tcp",
                psm: UInt16 = 0, addressType: String = "") {
        self.name = name
        self.sessionID = sessionID
        self.address = address
        self.port = port
        self.host = host
        self.transport = transport
        self.psm = psm
        self.addressType = addressType
    }

    /// Nil for an entry without Name, SessionId, Address or Port (older daemons omit the others).
    public init?(_ value: DBusValue) {
        guard let entry = value.asDictionary, let name = entry["Name"]?.stringValue, let session = entry["SessionId"]?.stringValue,
              let address = entry["Address"]?.stringValue, let port = entry["Port"]?.uint16Value else { return nil }
        self.init(name: name, sessionID: session, address: address, port: port, host: entry["Host"]?.stringValue ?? "",
                  transport: entry["Transport"]?.stringValue ?? "tcp", psm: entry["Psm"]?.uint16Value ?? 0,
                  addressType: entry["AddressType"]?.stringValue ?? "")
    }

    public var dbusValue: DBusValue {
        .propertyDictionary(["Name": .string(name), "SessionId": .string(sessionID), "Address": .string(address),
                             "Port": .uint16(port), "Host": .string(host), "Transport": .string(transport),
                             "Psm": .uint16(psm), "AddressType": .string(addressType)])
    }

    /// The whole Discover reply; malformed entries are skipped.
    public static func list(_ reply: [DBusValue]) throws(BatonAPIError) -> [PairingEndpoint] {
        guard let items = reply.first?.arrayValue else { throw .unexpectedReply("Discover returned \(reply.map(\.signature))") }
        return items.compactMap { PairingEndpoint($0) }
    }
}

/// Pairing1.Accept's options (`a{sv}`).
public struct AcceptOptions: Sendable, Hashable {
    /// The address the other machine should dial (only shown to the user).
    public var host: String?

    public init(host: String? = nil) { self.host = host }

    public var dbusValue: DBusValue {
        var options: [String: DBusValue] = [:]
        if let host { options["Host"] = .string(host) }
        return .propertyDictionary(options)
    }
}

/// Pairing1.Pair's options (`a{sv}`).
public struct PairOptions: Sendable, Hashable {
    /// 16 hex digits, printed by the accepting side.
    public var sessionID: String
    /// "public" or "random" for a Bluetooth target; nil to let the daemon choose.
    public var addressType: String?

    public init(sessionID: String, addressType: String? = nil) {
        self.sessionID = sessionID
        self.addressType = addressType
    }

    public var dbusValue: DBusValue {
        var options: [String: DBusValue] = ["SessionId": .string(sessionID)]
        if let addressType { options["AddressType"] = .string(addressType) }
        return .propertyDictionary(options)
    }
}

/// The properties of an org.baton.PairingSession1 object.
public struct PairingSessionProperties: Sendable, Hashable {
    /// The states docs/dbus-api.md lists for PairingSession1.State.
    public enum State: String, Sendable, Hashable {
        case waiting, connected, confirming, reviewing, paired, failed
    }

    /// A `State` raw value, or another word from a newer daemon.
    public var state: String
    public var role: String
    /// The 6-digit code, shown by the acceptor only (the initiator's user types it: ConfirmCode).
    public var code: String
    public var peerName: String
    public var peerID: String
    /// Why it failed: "rejected", "timed-out", "verification-failed", ...
    public var error: String
    public var port: UInt16
    public var sessionID: String
    /// While "reviewing": the members the peer's ring would add, "name (xxxx-xxxx)" each.
    public var peerMembers: [String]
    /// While "reviewing": members of this ring the commit would remove (PeerRemovals).
    public var peerRemovals: [PeerRemoval]
    /// While "reviewing": members of this ring the commit would re-key (PeerGenerations).
    public var peerGenerations: [PeerGeneration]

    /// One PeerRemovals entry, `(ssssb)`: the member's name and short id ("xxxx-xxxx"), the name and
    /// short id of the member that signed the removal ("" and "" when a cascade took it out with the
    /// member that introduced it; "" name when no roster holds the remover's entry any more), and
    /// whether it is this machine.
    public struct PeerRemoval: Sendable, Hashable {
        public var name: String
        public var id: String
        public var removedByName: String
        public var removedByID: String
        public var isThisMachine: Bool

        public init(name: String, id: String, removedByName: String = "", removedByID: String = "", isThisMachine: Bool = false) {
            self.name = name
            self.id = id
            self.removedByName = removedByName
            self.removedByID = removedByID
            self.isThisMachine = isThisMachine
        }

        public static let signature = "(ssssb)"
        public var dbusValue: DBusValue {
            .structure([.string(name), .string(id), .string(removedByName), .string(removedByID), .boolean(isThisMachine)])
        }

        public init?(_ value: DBusValue) {
            guard let f = value.structValue, f.count >= 5, let name = f[0].stringValue, let id = f[1].stringValue,
                  let byName = f[2].stringValue, let byID = f[3].stringValue, let mine = f[4].boolValue else { return nil }
            self.init(name: name, id: id, removedByName: byName, removedByID: byID, isThisMachine: mine)
        }
    }

    /// One PeerGenerations entry, `(ssuub)`: the member's name and short id, its secret generation
    /// here now and after the commit, and whether it is this machine (which re-keys when the commit
    /// removes a member).
    public struct PeerGeneration: Sendable, Hashable {
        public var name: String
        public var id: String
        public var from: UInt32
        public var to: UInt32
        public var isThisMachine: Bool

        public init(name: String, id: String, from: UInt32, to: UInt32, isThisMachine: Bool = false) {
            self.name = name
            self.id = id
            self.from = from
            self.to = to
            self.isThisMachine = isThisMachine
        }

        public static let signature = "(ssuub)"
        public var dbusValue: DBusValue {
            .structure([.string(name), .string(id), .uint32(from), .uint32(to), .boolean(isThisMachine)])
        }

        public init?(_ value: DBusValue) {
            guard let f = value.structValue, f.count >= 5, let name = f[0].stringValue, let id = f[1].stringValue,
                  let from = f[2].uint32Value, let to = f[3].uint32Value, let mine = f[4].boolValue else { return nil }
            self.init(name: name, id: id, from: from, to: to, isThisMachine: mine)
        }
    }

    public init(state: String, role: String = "", code: String = "", peerName: String = "", peerID: String = "",
                error: String = "", port: UInt16 = 0, sessionID: String = "", peerMembers: [String] = [],
                peerRemovals: [PeerRemoval] = [], peerGenerations: [PeerGeneration] = []) {
        self.peerMembers = peerMembers
        self.peerRemovals = peerRemovals
        self.peerGenerations = peerGenerations
        self.state = state
        self.role = role
        self.code = code
        self.peerName = peerName
        self.peerID = peerID
        self.error = error
        self.port = port
        self.sessionID = sessionID
    }

    /// From Properties.GetAll.
    public init(_ properties: [String: DBusValue]) throws(BatonAPIError) {
        guard let state = properties["State"]?.stringValue else { throw .unexpectedReply("PairingSession1 lacks State") }
        self.init(state: state, role: properties["Role"]?.stringValue ?? "", code: properties["Code"]?.stringValue ?? "",
                  peerName: properties["PeerName"]?.stringValue ?? "", peerID: properties["PeerId"]?.stringValue ?? "",
                  error: properties["Error"]?.stringValue ?? "", port: properties["Port"]?.uint16Value ?? 0,
                  sessionID: properties["SessionId"]?.stringValue ?? "",
                  peerMembers: properties["PeerMembers"]?.stringArrayValue ?? [],
                  peerRemovals: (properties["PeerRemovals"]?.arrayValue ?? []).compactMap(PeerRemoval.init),
                  peerGenerations: (properties["PeerGenerations"]?.arrayValue ?? []).compactMap(PeerGeneration.init))
    }

    public var knownState: State? { State(rawValue: state) }

    public var dbusProperties: [String: DBusValue] {
        [
            "State": .string(state), "Role": .string(role), "Code": .string(code),
            "PeerName": .string(peerName), "PeerId": .string(peerID), "Error": .string(error),
            "Port": .uint16(port), "SessionId": .string(sessionID), "PeerMembers": .stringArray(peerMembers),
            "PeerRemovals": .array(elementSignature: PeerRemoval.signature, peerRemovals.map(\.dbusValue)),
            "PeerGenerations": .array(elementSignature: PeerGeneration.signature, peerGenerations.map(\.dbusValue)),
        ]
    }
}
