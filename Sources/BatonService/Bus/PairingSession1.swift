// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus

extension PairingSessionProperties {
    /// What PairingSession1 shows for a session: the client reads it back with `init(_:)`, one coding.
    init(_ progress: PairingProgress) {
        let text = progress.textProperties
        self.init(state: progress.phase.stateName, role: progress.role.name, code: progress.visibleCode,
                  peerName: text["PeerName"] ?? "", peerID: text["PeerId"] ?? "", error: text["Error"] ?? "",
                  port: progress.port, sessionID: progress.sessionID.hexString, peerMembers: progress.peerMemberLines,
                  peerRemovals: progress.review.removals.map {
                      PeerRemoval(name: $0.name, id: $0.deviceID.shortForm, removedByName: $0.removedByName,
                                  removedByID: $0.removedBy?.shortForm ?? "", isThisMachine: $0.isThisDevice)
                  },
                  peerGenerations: progress.review.generations.map {
                      PeerGeneration(name: $0.name, id: $0.deviceID.shortForm, from: $0.from, to: $0.to, isThisMachine: $0.isThisDevice)
                  })
    }
}

/// org.baton.PairingSession1: one object per pairing session; its owner (or root) confirms or cancels.
/// A finished session's object stays for the grace of `PairingLimits` (60 s in batond), then goes.
/// The code and what it says about the peer are the owner's (or root's) alone: other local accounts
/// may read a session's progress, not the code on the owner's screen or the peer's ring.
extension RingBus {
    /// Properties read only by the session's owner or root (Get, GetAll, GetManagedObjects);
    /// their changes are signalled to the connection that started the session only.
    static let privateSessionProperties: Set<String> = ["Code", "PeerName", "PeerId", "PeerMembers", "PeerRemovals", "PeerGenerations"]

    static func properties(_ progress: PairingProgress) -> [String: DBusValue] {
        PairingSessionProperties(progress).dbusProperties
    }

    func sessionEvent(_ event: PairingSessionEvent) {
        switch event {
        case .changed(let path, let before, let after):
            let old = Self.properties(before)
            let changed = Self.properties(after).filter { old[$0.key] != $0.value }
            let broadcast = changed.filter { !Self.privateSessionProperties.contains($0.key) }
            let owned = changed.filter { Self.privateSessionProperties.contains($0.key) }
            if !broadcast.isEmpty {
                try? connection.emitPropertiesChanged(path: path, interface: BatonInterface.pairingSession, changed: broadcast)
            }
            if !owned.isEmpty, let owner = sessionPaths.withLock({ $0[path] }) {
                try? connection.emitPropertiesChanged(path: path, interface: BatonInterface.pairingSession, changed: owned, destination: owner)
            }
        case .removed(let path):
            withdrawSession(path)
        }
    }

    /// Exports a new session's object, started by the connection `owner`. A session that ended and
    /// was dropped before its object was exported (a very short grace) is withdrawn at once.
    func exportSession(_ path: String, owner: String) async throws {
        try await connection.export([sessionInterface(path)], at: path)
        sessionPaths.withLock { $0[path] = owner }
        if await pairing.session(path) == nil { withdrawSession(path) }
    }

    func withdrawSession(_ path: String) {
        guard sessionPaths.withLock({ $0.removeValue(forKey: path) }) != nil else { return }
        try? connection.unexport(path: path)
    }

    func sessionInterface(_ path: String) -> DBusInterface {
        let pairing = self.pairing, connection = self.connection
        func property<Value>(_ contract: PropertyContract<Value>) -> DBusProperty {
            let name = contract.name
            return DBusProperty(contract) {
                if Self.privateSessionProperties.contains(name) {
                    // No caller: a broadcast (InterfacesAdded), which must not carry private values.
                    guard let sender = DBusCallContext.sender else { throw DBusError(ServiceFailure.notPermitted("private property")) }
                    let uid = try await connection.connectionUnixUser(sender)
                    try await mappingFailures { () throws(ServiceFailure) in _ = try await pairing.ownedSession(path, uid: uid) }
                }
                guard let progress = await pairing.session(path) else { throw DBusError(ServiceFailure.unknownObject("gone")) }
                return Self.properties(progress)[name] ?? .string("")
            }
        }
        return DBusInterface(BatonInterface.pairingSession, methods: [
            DBusMethod(OrgBaton.PairingSession1.confirm) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.connection.connectionUnixUser(call.sender)
                guard let accepted = call.arguments.first?.boolValue else {
                    throw DBusError(ServiceFailure.invalidArguments("accepted must be a boolean"))
                }
                try await mappingFailures { () throws(ServiceFailure) in try await pairing.confirm(path, uid: uid, accepted: accepted) }
                return []
            },
            DBusMethod(OrgBaton.PairingSession1.confirmCode) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.connection.connectionUnixUser(call.sender)
                guard let code = call.arguments.first?.stringValue else {
                    throw DBusError(ServiceFailure.invalidArguments("code must be a string"))
                }
                try await mappingFailures { () throws(ServiceFailure) in try await pairing.confirmCode(path, uid: uid, code: code) }
                return []
            },
            DBusMethod(OrgBaton.PairingSession1.commit) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.connection.connectionUnixUser(call.sender)
                try await mappingFailures { () throws(ServiceFailure) in try await pairing.commit(path, uid: uid, accepted: true) }
                return []
            },
            DBusMethod(OrgBaton.PairingSession1.cancel) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.connection.connectionUnixUser(call.sender)
                try await mappingFailures { () throws(ServiceFailure) in try await pairing.cancel(path, uid: uid) }
                return []
            },
        ], properties: [
            property(OrgBaton.PairingSession1.state), property(OrgBaton.PairingSession1.role), property(OrgBaton.PairingSession1.code),
            property(OrgBaton.PairingSession1.peerName), property(OrgBaton.PairingSession1.peerId), property(OrgBaton.PairingSession1.error),
            property(OrgBaton.PairingSession1.port), property(OrgBaton.PairingSession1.sessionId), property(OrgBaton.PairingSession1.peerMembers),
            property(OrgBaton.PairingSession1.peerRemovals), property(OrgBaton.PairingSession1.peerGenerations),
        ])
    }
}
