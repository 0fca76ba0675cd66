import BatonAPI
import BatonCore
import BatonDBus

/// org.baton.PairingSession1: one object per pairing session; its owner (or root) confirms or cancels.
extension RingBus {
    static func properties(_ session: PairingSessionState) -> [String: DBusValue] {
        [
            "State": .string(session.state), "Role": .string(session.role), "Code": .string(session.code),
            "PeerName": .string(session.peerName), "PeerId": .string(session.peerID), "Error": .string(session.error),
            "Port": .uint16(session.port), "SessionId": .string(session.sessionID.hexString),
        ]
    }

    func sessionChanged(_ path: String, before: PairingSessionState, after: PairingSessionState) {
        let old = Self.properties(before)
        let changed = Self.properties(after).filter { old[$0.key] != $0.value }
        guard !changed.isEmpty else { return }
        try? connection.emitPropertiesChanged(path: path, interface: BatonInterface.pairingSession, changed: changed)
    }

    func sessionInterface(_ path: String) -> DBusInterface {
        let pairing = self.pairing
        func property(_ name: String, _ signature: String) -> DBusProperty {
            DBusProperty(name, signature: signature) {
                guard let session = await pairing.session(path) else { throw DBusError(ServiceFailure.unknownObject("gone")) }
                return Self.properties(session)[name] ?? .string("")
            }
        }
        return DBusInterface(BatonInterface.pairingSession, methods: [
            DBusMethod("Confirm", in: [DBusArgument("accepted", "b")]) { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.connection.connectionUnixUser(call.sender)
                let accepted = call.arguments.first?.boolValue ?? false
                try await mappingFailures { () throws(ServiceFailure) in try await pairing.confirm(path, uid: uid, accepted: accepted) }
                return []
            },
            DBusMethod("Cancel") { [weak self] call in
                guard let self else { return [] }
                let uid = try await self.connection.connectionUnixUser(call.sender)
                try await mappingFailures { () throws(ServiceFailure) in try await pairing.cancel(path, uid: uid) }
                return []
            },
        ], properties: [
            property("State", "s"), property("Role", "s"), property("Code", "s"), property("PeerName", "s"),
            property("PeerId", "s"), property("Error", "s"), property("Port", "q"), property("SessionId", "s"),
        ])
    }
}
