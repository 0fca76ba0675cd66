// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonTransport

/// A ring change refused because its ring record could not be saved (GetStatus "RingChangeRefused").
public struct RefusedRingChange: Sendable, Hashable {
    /// Unix seconds.
    public var time: Int64
    /// What was refused, why, and the fix, in words for a person.
    public var sentence: String
}

extension RingService {
    /// Writes the ring record a change's actions persist (`state`, the changed copy's) before anything
    /// of the change happens, and returns the other actions. Throws, having written nothing, when the
    /// record cannot be saved; the caller then drops the copy (§7.3: refused as a whole).
    func saveFirst(_ actions: [RingKeeper.Action], state: RingKeeper.State) throws -> [RingKeeper.Action] {
        let persists = actions.contains { if case .persist = $0 { return true }; return false }
        guard persists else { return actions }
        try store.saveRing(state)
        return actions.filter { if case .persist = $0 { return false }; return true }
    }

    /// Records and logs a change refused because the ring record could not be saved.
    func refused(_ change: String, _ error: any Error) {
        let sentence = Self.unsavedSentence("\(change) was refused", error)
        lastRefusedChange = RefusedRingChange(time: clock.unixSeconds(), sentence: sentence)
        log("batond: " + sentence)
    }

    /// "X was refused: the ring record could not be saved in the state directory (why); nothing
    /// changed. Free space or make the state directory writable for batond, then try again."
    nonisolated static func unsavedSentence(_ what: String, _ error: any Error) -> String {
        "\(what): the ring record could not be saved in the state directory (\(echoed("\(error)", limit: 160))); nothing changed. "
            + "Free disk space or make the state directory writable for batond, then try again"
    }

    /// GetStatus "RingChangeRefused": the last ring change refused because it could not be saved.
    public func refusedChange() -> RefusedRingChange? { lastRefusedChange }

    /// `refusedChange` as GetStatus answers `uid`: the sentence names the pairing peer or member
    /// (name and short id), which PairingSession1 keeps from other accounts (PeerName, PeerId), so
    /// only the machine's ring users (the pairing privilege: root, the daemon's user, group baton)
    /// read it; every other account gets nil.
    public func refusedChange(for uid: UInt32) -> RefusedRingChange? {
        configuration.privilege.allows(uid: uid) ? lastRefusedChange : nil
    }

    /// `bt-pair reset-identity` (§7 "A new identity"): this machine forgets its ring (secrets,
    /// roster, RingSyncs owed, the members' peer records) and its device identity, and starts a ring
    /// of one under a fresh identity, as after being removed. The new ring record is written first
    /// (sealed as every ring record); if that fails nothing changes. Then the radio takes the new
    /// secret and forgets the members, and every observer (transfer: TLS identity and pins;
    /// continuation; DNS-SD) gets the new snapshot. Nothing is sent to the other members: they list
    /// the old id until it is removed there. Returns the new id and the previous one.
    func resetIdentity() async throws(ServiceFailure) -> (deviceID: DeviceID, previous: DeviceID) {
        let previous = keeper.deviceID
        var fresh = keeper
        let actions: [RingKeeper.Action]
        do { actions = try fresh.resetIdentity(today: Self.keyDay(clock: clock), random: SystemRandom()) } catch {
            throw .failed("no new identity could be made: \(Self.describe(error))")
        }
        do { try store.saveRing(fresh.state) } catch {
            log("batond: identity reset refused: the new ring cannot be saved (\(error))")
            throw .failed("the new identity could not be saved in the state directory (\(error)); nothing changed: free space or fix the directory, then try again")
        }
        keeper = fresh
        peers = [:]
        lastSyncRetry = [:]
        do { try store.savePeers(peers) } catch { log("batond: cannot save peers: \(error)") }
        // Persisted above: the rest is for the running parts.
        await apply(actions.filter { if case .persist = $0 { return false }; return true })
        log("batond: identity reset: this machine left its ring; it is now \(keeper.deviceID.shortForm) (was \(previous.shortForm)), a ring of one")
        return (keeper.deviceID, previous)
    }

    /// A pairing succeeded: the rings merge (every other member hears of it by RingSync), the peer's
    /// endpoints become hints, and the radio starts advertising (the ring is no longer one, §4.2).
    /// Throws, changing nothing, when the peer may not join (removed from this ring, or this device).
    /// A ring record that cannot be saved (a full disk, a state directory batond cannot write) refuses
    /// the join as a whole: the keeper goes back, nothing reaches the radio or the members, and the
    /// session fails `not-saved` (`.malformed(unsavedRing)`).
    ///
    /// `shown` is what the person reviewed (§7.2 "What the users do"): when this ring changed since
    /// (a member's RingSync merged meanwhile) so that the merge would now change something else, the
    /// join is refused and nothing changes (`ring-changed`, `.malformed(changedSinceReview)`).
    func joined(_ pairing: PairingResult, shown: PairingReview? = nil, observedHost: String?,
                bluetoothPeer: L2CAPSocketAddress?) async throws(WireError) {
        if let shown, PairingReview(ours: keeper.state.roster, peerRoster: pairing.peerRoster, peer: pairing.peer,
                                    me: keeper.deviceID) != shown {
            log("batond: pairing with \(pairing.peer.deviceID.shortForm) refused: the ring changed since the review, the commit would change other members than shown")
            throw .malformed(Self.changedSinceReview)
        }
        var next = keeper
        var actions = try next.pair(pairing, random: SystemRandom())
        let id = pairing.peer.deviceID
        do { actions = try saveFirst(actions, state: next.state) } catch {
            refused("the pairing with \(echoed(pairing.peer.name, limit: 24)) (\(id.shortForm))", error)
            throw .malformed(Self.unsavedRing)
        }
        keeper = next
        if peers[id] == nil { peers[id] = RingStore.PeerInfo(pairedSince: clock.unixSeconds()) }
        do { try store.savePeers(peers) } catch { log("batond: cannot save peers: \(error)") }
        recordPairingEndpoints(id, announced: pairing.peerEndpoints, observedHost: observedHost, bluetoothPeer: bluetoothPeer)
        // The new member got our roster in the pairing itself.
        actions.removeAll { if case .sync(let to) = $0 { return to == id }; return false }
        await apply(actions)
    }
}
