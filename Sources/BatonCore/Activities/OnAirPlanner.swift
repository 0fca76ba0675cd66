// SPDX-License-Identifier: LGPL-2.1-or-later
/// What this device has on the air (swift-nio style: inputs in, actions out, carried out in order).
/// Wraps `AdvertSender` and adds the daemon's rules around it:
/// - a ring of one is silent (§4.2): the revision and counters still move, but nothing is sealed;
///   the ring advert (the current activity, else presence) goes out as soon as the ring has another
///   member and stops when the last other member leaves;
/// - while a pairing session waits, the radio carries its clear pairing advert (§5) instead, and
///   the ring advert waits: its counters are still persisted at once, the bytes are put back when
///   no session waits any more;
/// - the ring advert is connectable only when the service says so (an L2CAP transfer listener and
///   no IP endpoint other machines can reach, §8.3); a pairing advert when it announces a PSM.
/// It owns the `PublicationBook` (below): what each user published and what the advert stands
/// for, so one value says both what is on the air and what FetchActivity may ask for.
public struct OnAirPlanner: Sendable {
    public enum Action: Hashable, Sendable {
        /// Write these counters durably, and the boot mark where a disk restore cannot reach it,
        /// before the next action (§4.2, AdvertSender.Action.persist).
        case persist(SenderCounters, SenderBootMark)
        /// Replace whatever is advertised with this ring advert.
        case advertiseRing([UInt8], connectable: Bool)
        /// Replace whatever is advertised with this pairing advert (`encoded` gives the bytes).
        case advertisePairing(PairingAdvert, connectable: Bool)
        /// Stop advertising.
        case stop
    }

    /// What the last advertise action put on the air.
    public enum OnAir: Hashable, Sendable {
        case nothing
        case ring([UInt8], connectable: Bool)
        case pairing(PairingAdvert)
    }

    public private(set) var sender: AdvertSender
    public private(set) var onAir: OnAir = .nothing
    /// Pairing adverts of sessions waiting for their initiator, oldest first; the newest is on the air.
    public private(set) var waitingPairing: [PairingAdvert] = []
    public private(set) var ringAdvertConnectable = false
    public private(set) var ringHasOtherMembers: Bool
    /// What each user published and which of them the advert stands for.
    public private(set) var publications = PublicationBook()
    /// The kind of clipboard copy the device offers (ClipboardService's shelf decides); nil: none.
    public private(set) var clipboard: ClipboardKind?
    /// Without a radio only counters are kept (the content still counts for FetchActivity).
    public let hasRadio: Bool

    public init(sender: AdvertSender, hasRadio: Bool, ringHasOtherMembers: Bool) {
        self.sender = sender
        self.hasRadio = hasRadio
        self.ringHasOtherMembers = ringHasOtherMembers
    }

    /// True while a pairing advert holds the air and the ring advert waits.
    public var ringAdvertWaits: Bool { !waitingPairing.isEmpty }

    /// The session ids of this device's own waiting sessions (not listed as heard nearby).
    public var waitingSessionIDs: [[UInt8]] { waitingPairing.map(\.sessionID) }

    /// The radio became usable (the daemon started scanning): the ring advert when there is a ring.
    public mutating func radioStarted(nowSeconds: Int64) -> [Action] {
        startIfRinged(nowSeconds: nowSeconds)
    }

    /// `uid` published `record`: the book records it and the advert stands for it (a new revision).
    public mutating func publish(_ record: ActivityRecord, uid: UInt32, nowSeconds: Int64) -> [Action] {
        air(publications.publish(record, uid: uid), nowSeconds: nowSeconds)
    }

    /// `uid` has no current activity any more: forgotten, and presence if the advert stood for it.
    public mutating func withdraw(uid: UInt32, nowSeconds: Int64) -> [Action] {
        air(publications.withdraw(uid: uid), nowSeconds: nowSeconds)
    }

    /// The actions for what the book says the advert must carry.
    private mutating func air(_ change: PublicationBook.Air, nowSeconds: Int64) -> [Action] {
        switch change {
        case .activity(let content): publish(content, nowSeconds: nowSeconds)
        case .presence: withdraw(nowSeconds: nowSeconds)
        case .unchanged: []
        }
    }

    /// New advert content: a new revision even when type and flags stayed (`changed`). The clipboard
    /// the device offers stays in it.
    public mutating func publish(_ content: AdvertContent, changed: Bool = true, nowSeconds: Int64) -> [Action] {
        var content = content
        content.clipboard = clipboard
        return advertise(content, changed: changed, nowSeconds: nowSeconds)
    }

    /// The advertised activity was withdrawn: presence again (with the clipboard the device offers).
    public mutating func withdraw(nowSeconds: Int64) -> [Action] {
        var presence = AdvertContent.presence
        presence.clipboard = clipboard
        return advertise(presence, changed: false, nowSeconds: nowSeconds)
    }

    /// The device offers a new clipboard copy of `kind`, or none (nil): a content change, so a new
    /// revision even when the kind stayed (§4.2: receivers ask the offer again, §9 "Clipboard").
    /// Nothing changes when there was no copy and there is none.
    public mutating func setClipboard(_ kind: ClipboardKind?, nowSeconds: Int64) -> [Action] {
        guard kind != nil || clipboard != nil else { return [] }
        clipboard = kind
        var content = sender.content
        content.clipboard = kind
        return advertise(content, changed: true, nowSeconds: nowSeconds)
    }

    /// Clock tick: epoch rotation (held back, but persisted, while a pairing advert is on the air).
    public mutating func tick(nowSeconds: Int64) -> [Action] {
        ring(sender.tick(nowSeconds: nowSeconds))
    }

    /// The own key moved to a later day (§3.1); nothing is resealed for it.
    public mutating func ratchetSecret(_ later: AdvertisingSecret) {
        sender.ratchet(later)
    }

    /// A new own secret after a removal (§7.4).
    public mutating func rotateSecret(_ secret: AdvertisingSecret, nowSeconds: Int64) -> [Action] {
        ring(sender.rotateSecret(secret, nowSeconds: nowSeconds))
    }

    /// The ring gained or lost other members. Gaining starts the ring advert with the current
    /// content (activity, else presence); losing the last one stops it (§4.2). A waiting pairing
    /// advert keeps the air either way.
    public mutating func ringMembersChanged(hasOthers: Bool, nowSeconds: Int64) -> [Action] {
        ringHasOtherMembers = hasOthers
        if hasOthers { return startIfRinged(nowSeconds: nowSeconds) }
        guard sender.currentAdvert != nil else { return [] }
        _ = sender.stop()
        guard hasRadio, waitingPairing.isEmpty else { return [] }
        onAir = .nothing
        return [.stop]
    }

    /// A session started waiting for its initiator: its pairing advert goes on the air.
    public mutating func pairingStartedWaiting(_ advert: PairingAdvert) -> [Action] {
        guard hasRadio else { return [] }
        waitingPairing.removeAll { $0.sessionID == advert.sessionID }
        waitingPairing.append(advert)
        onAir = .pairing(advert)
        return [.advertisePairing(advert, connectable: advert.psm != nil)]
    }

    /// A session stopped waiting (its initiator arrived, it failed or was cancelled). Another
    /// waiting session's advert takes the air if this one had it; with none left the ring advert
    /// comes back (or presence, or nothing).
    public mutating func pairingStoppedWaiting(sessionID: [UInt8], nowSeconds: Int64) -> [Action] {
        guard let index = waitingPairing.firstIndex(where: { $0.sessionID == sessionID }) else { return [] }
        waitingPairing.remove(at: index)
        if let newest = waitingPairing.last {
            guard onAir == .pairing(newest) else { return pairingStartedWaiting(newest) }
            return []
        }
        return restoreRingAdvert(nowSeconds: nowSeconds)
    }

    /// The transfer's reachability changed; the ring advert goes out again with the new setting.
    public mutating func setRingAdvertConnectable(_ connectable: Bool, nowSeconds: Int64) -> [Action] {
        guard ringAdvertConnectable != connectable else { return [] }
        ringAdvertConnectable = connectable
        return restoreRingAdvert(nowSeconds: nowSeconds)
    }

    /// The service stops: nothing on the air.
    public mutating func stop() -> [Action] {
        waitingPairing = []
        onAir = .nothing
        _ = sender.stop()
        return hasRadio ? [.stop] : []
    }

    // MARK: Rules

    /// Puts the current ring advert back (the same bytes: no new nonce), or stops and starts
    /// presence when there is none. Nothing while a session waits, or without a radio.
    private mutating func restoreRingAdvert(nowSeconds: Int64) -> [Action] {
        guard hasRadio, waitingPairing.isEmpty else { return [] }
        let actions = sender.radioReset()
        if actions.isEmpty {
            onAir = .nothing
            return [.stop] + startIfRinged(nowSeconds: nowSeconds)
        }
        return ring(actions)
    }

    /// A ring of one has nobody to tell (§4.2); with members, the sender starts with what it holds
    /// (the current activity, else presence), without a new revision.
    private mutating func startIfRinged(nowSeconds: Int64) -> [Action] {
        guard hasRadio, ringHasOtherMembers, sender.currentAdvert == nil else { return [] }
        return ring(sender.start(nowSeconds: nowSeconds))
    }

    /// New content: a new revision always; sealed and sent only with a radio and a ring.
    private mutating func advertise(_ content: AdvertContent, changed: Bool, nowSeconds: Int64) -> [Action] {
        var actions = sender.update(content, nowSeconds: nowSeconds, changed: changed)
        guard hasRadio, ringHasOtherMembers else { return ring(actions) }
        if sender.currentAdvert == nil { actions = sender.start(nowSeconds: nowSeconds) }
        return ring(actions)
    }

    /// The sender's actions as the radio gets them: counters always, bytes only when no pairing
    /// advert holds the air and there is a radio.
    private mutating func ring(_ actions: [AdvertSender.Action]) -> [Action] {
        actions.compactMap { action in
            switch action {
            case .persist(let counters, let mark):
                return .persist(counters, mark)
            case .advertise(let bytes):
                guard hasRadio, waitingPairing.isEmpty else { return nil }
                onAir = .ring(bytes, connectable: ringAdvertConnectable)
                return .advertiseRing(bytes, connectable: ringAdvertConnectable)
            case .stop:
                guard hasRadio else { return nil }
                onAir = .nothing
                return .stop
            }
        }
    }
}

/// What each local user published and what the ring advert stands for: the one place that says
/// it. The radio carries out its answers (`Air`) through the OnAirPlanner and FetchActivity asks
/// it for the record behind the advert. Pure: no clock, no I/O.
///
/// The advert carries one activity for the whole device: the newest publication. A user who
/// withdraws takes the advert back to presence only when it stood for that user; another user's
/// earlier publication does not come back on its own (it is published again when that user's
/// activity changes or becomes current again).
public struct PublicationBook: Sendable, Hashable {
    /// What the advert must carry after a change.
    public enum Air: Sendable, Hashable {
        /// This activity's content (a new advert revision).
        case activity(AdvertContent)
        /// No activity: presence.
        case presence
        /// What is on the air stays.
        case unchanged
    }

    /// Each user's last published record (kept without a radio: FetchActivity still serves it).
    public private(set) var records: [UInt32: ActivityRecord] = [:]
    /// The user whose activity the advert stands for; nil: presence.
    public private(set) var advertised: UInt32?

    public init() {}

    /// `uid` published `record`: the advert stands for it now.
    public mutating func publish(_ record: ActivityRecord, uid: UInt32) -> Air {
        records[uid] = record
        advertised = uid
        return .activity(AdvertContent(activityType: record.activityType, hasWebpageURL: record.webpageURL != nil))
    }

    /// `uid` has no current activity any more: forgotten, and presence if the advert stood for it.
    public mutating func withdraw(uid: UInt32) -> Air {
        records[uid] = nil
        guard advertised == uid else { return .unchanged }
        advertised = nil
        return .presence
    }

    /// The user and record the advert stands for (what a FetchActivity of it gets); nil: presence.
    public var current: (uid: UInt32, record: ActivityRecord)? {
        guard let uid = advertised, let record = records[uid] else { return nil }
        return (uid, record)
    }

    /// `uid`'s last published record, advertised or not.
    public func record(of uid: UInt32) -> ActivityRecord? { records[uid] }
}
