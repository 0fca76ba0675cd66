// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAPI
import BatonCore
import BatonDBus
import Synchronization

/// The D-Bus glue of the ring side (ring, radio, pairing, discovery, continuation): Ring1 and
/// Pairing1 at /org/baton/ring, one PairingSession1
/// object per session, one Suggestion1 object per suggestion. Closures check the caller, decode
/// arguments and call typed actor methods; `ServiceFailure`s become D-Bus errors (BusErrors.swift).
public final class RingBus: Sendable {
    let connection: DBusConnection
    let ring: RingService
    let pairing: PairingService
    let discovery: DiscoveryService
    /// Asked about callers PrivilegePolicy does not allow (polkit in batond).
    let authorizer: any Authorizer
    private let attached = Mutex<ContinuationService?>(nil)
    /// Session objects exported (so that stop withdraws them), each with the connection that
    /// started it, which alone is sent the session's private property changes.
    let sessionPaths = Mutex<[String: String]>([:])
    /// The questions out to polkit (bounded: a flood must not hold every handler).
    let polkitQuestions = Mutex(PolkitQuestions())

    public init(connection: DBusConnection, ring: RingService, pairing: PairingService, discovery: DiscoveryService,
                authorizer: any Authorizer) {
        self.connection = connection
        self.authorizer = authorizer
        self.ring = ring
        self.pairing = pairing
        self.discovery = discovery
    }

    /// The continuation behind Ring1.Continue and Suggestion1 (nil: "the transfer is not running").
    public func attach(_ continuation: ContinuationService?) { attached.withLock { $0 = continuation } }

    var continuation: ContinuationService? { attached.withLock { $0 } }

    /// Exports Ring1 and Pairing1 and follows session changes.
    public func export() async throws {
        await pairing.onSessionChange { [weak self] event in self?.sessionEvent(event) }
        try await connection.export([ring1Interface(), pairing1Interface()], at: BatonObjectPath.ring)
    }

    public func unexport() async {
        await pairing.onSessionChange(nil)
        for path in sessionPaths.withLock({ paths in defer { paths = [:] }; return paths.keys }) { try? connection.unexport(path: path) }
        try? connection.unexport(path: BatonObjectPath.ring)
    }

    /// The caller's uid when it may pair and remove: PrivilegePolicy, else polkit's org.baton.pair
    /// (which may ask for an administrator's password); else NotPermitted saying what to do.
    func requirePrivilege(_ sender: String) async throws -> UInt32 {
        try await requireAccess(.pair, sender)
    }

    /// The caller's uid when CallerAccess allows it `action`, else NotPermitted with its sentence.
    func requireAccess(_ action: PolkitAction, _ sender: String) async throws -> UInt32 {
        let uid = try await connection.connectionUnixUser(sender)
        let privilege = ring.configuration.privilege
        let privileged = privilege.allows(uid: uid)
        var answer: PolkitAnswer?
        if CallerAccess.needsPolkit(privileged: privileged) {
            guard polkitQuestions.withLock({ $0.take(uid: uid) }) else {
                throw DBusError(ServiceFailure.notPermitted(PolkitQuestions.busy(group: privilege.group)))
            }
            answer = await authorizer.check(action, caller: sender)
            polkitQuestions.withLock { $0.give(uid: uid) }
        }
        switch CallerAccess.decide(action, privileged: privileged, polkit: answer, group: privilege.group) {
        case .allowed: return uid
        case .refused(let why): throw DBusError(ServiceFailure.notPermitted(why))
        }
    }
}
