// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto

extension RingService {
    /// A member's RingSync (inside pinned TLS): merged, persisted and acted on; returns the reply's
    /// roster: ours after the merge, or, to a device that is not a member (removed here, or whose
    /// roster removed this device or took it out by a cascade, which then starts over), only the mark
    /// that removed it or the cascading marks (§6.2), never this device's new secret.
    /// A roster with a bad signature, an entry for this device or a refused generation changes nothing
    /// and is refused (the transfer answers an Error frame); the log names the sender and the check, no key.
    public func receivedRoster(_ roster: Roster, from sender: DeviceID) async throws(WireError) -> Roster {
        // The transfer checked the sender against the ring it last saw; the ring checks again against
        // its own: after a new identity here (§7.5) a member of the old ring, on a channel opened
        // before, must not merge the old ring back in.
        let current = snapshot()
        guard current.isMember(sender) || current.wasMember(sender) else {
            log("batond: RingSync from \(sender.shortForm) refused: not a member of this ring")
            throw .notRingMember
        }
        let before = Set(keeper.state.roster.members.keys)
        var next = keeper
        let actions: [RingKeeper.Action]
        do { actions = try next.receive(roster, from: sender, random: SystemRandom()) } catch {
            log("batond: RingSync from \(sender.shortForm) refused: \(Self.describe(error))")
            throw error
        }
        // A merge that cannot be saved is refused as a whole (§7.3): nothing of it is kept or acted on.
        for case .persist(let state) in actions.prefix(1) {
            do { try store.saveRing(state) } catch {
                refused("a RingSync from \(sender.shortForm)", error)
                throw .malformed(Self.unsavedRing)
            }
        }
        keeper = next
        let gone = before.subtracting(keeper.state.roster.members.keys)
        if !gone.isEmpty {
            for id in gone { peers[id] = nil }
            try? store.savePeers(peers)
            log("batond: RingSync from \(sender.shortForm) removed \(gone.count) member(s)")
        }
        let identity = keeper.deviceID
        await apply(actions)
        // A new identity taken while the merge reached the radio (§7.5): the old member gets no
        // reply, least of all the new ring's roster (ResetIdentityAttackTests).
        guard keeper.deviceID == identity else { throw .notRingMember }
        if let notice = keeper.state.roster.removalNotice(for: sender) { return notice }
        if roster.isOut(keeper.deviceID), keeper.state.roster.members[sender] == nil,
           let notice = roster.removalNotice(for: keeper.deviceID) {
            // The sender's roster removed this device (its tombstone) or took it out (cascading marks):
            // it started over; the sender gets the removal notice of this device, nothing new (§6.2).
            return notice
        }
        return keeper.state.roster
    }

    /// A refusal's kind for logs (WireError's texts are fixed, none carries key bytes).
    nonisolated static func describe(_ error: WireError) -> String { "\(error)" }

    /// The refusal of a RingSync whose merge could not be written (answered `internal`, §6.2).
    nonisolated static let unsavedRing = "ring not saved"
    /// A pairing whose review no longer matches what its commit would change (`ring-changed`).
    nonisolated static let changedSinceReview = "ring changed since review"

    /// A RingSync carrying roster `version` was answered by `member`: it no longer needs a retry.
    public func syncDelivered(to member: DeviceID, version: UInt64) async {
        await apply(keeper.syncDelivered(to: member, version: version))
    }

    /// A member showed it is there (an accepted advert, or a Hello it sent): a RingSync it still owes
    /// us (a re-key it missed while away) is retried. Adverts repeat every ~100 ms, so a retry after
    /// an advert waits `syncRetryInterval` since the last one; a Hello retries at once.
    public func sighted(_ member: DeviceID, byHello: Bool) async {
        let actions = keeper.sighted(member)
        guard !actions.isEmpty else { return }
        let now = clock.unixSeconds()
        if !byHello, let last = lastSyncRetry[member], now - last < Self.syncRetryInterval { return }
        lastSyncRetry[member] = now
        log("batond: retrying the RingSync owed to \(member.shortForm)")
        await apply(actions)
    }

    /// Members owed a RingSync (durable; for tests and diagnostics).
    public func pendingSyncs() -> [DeviceID: UInt64] { keeper.state.pendingSyncs }

    static let syncRetryInterval: Int64 = 30
}
