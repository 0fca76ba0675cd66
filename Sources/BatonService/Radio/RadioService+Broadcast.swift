import BatonCore
import BatonCrypto

/// What the advert currently stands for: the activity a FetchActivity may ask for.
public struct Publication: Sendable {
    public var uid: UInt32
    public var record: ActivityRecord
    /// The type hash under this device's current secret (§3).
    public var typeHash: TypeHash
    /// The advert revision (§4.2), not the registry's per-activity one.
    public var revision: UInt32
}

/// The broadcaster: what is on the air. The ring advert (AdvertSender) carries the current
/// activity or presence; a waiting pairing session puts its clear pairing advert there instead.
extension RadioService: ActivityPublisher {
    // MARK: ActivityPublisher

    public func publish(_ record: ActivityRecord, uid: UInt32) async throws(RadioError) {
        // Kept even without a radio: the radio is only discovery, the record is what a fetch returns.
        published[uid] = record
        advertisedUID = uid
        try await advertiseContent(AdvertContent(activityType: record.activityType, hasWebpageURL: record.webpageURL != nil), changed: true)
    }

    public func withdraw(uid: UInt32) async {
        published[uid] = nil
        guard advertisedUID == uid else { return }
        advertisedUID = nil
        try? await advertiseContent(.presence)
    }

    /// The record behind the current advert, for FetchActivity.
    public func currentRecord() -> ActivityRecord? { advertisedUID.flatMap { published[$0] } }

    /// The current activity as a FetchActivity sees it: its type hash and advert revision.
    public func currentPublication() -> Publication? {
        guard let uid = advertisedUID, let record = currentRecord() else { return nil }
        let hash = DerivedKeys(secret: ownSecret).typeHash(record.activityType)
        return Publication(uid: uid, record: record, typeHash: hash, revision: sender.counters.revision)
    }

    func advertiseContent(_ content: AdvertContent, changed: Bool = false) async throws(RadioError) {
        let now = clock.unixSeconds()
        var actions = sender.update(content, nowSeconds: now, changed: changed)
        guard let radio = port else {
            // The radio only does discovery: the content and its revision still count for FetchActivity.
            if let counters = actions.lazy.compactMap({ if case .persist(let c) = $0 { c } else { nil } }).last {
                try? store.saveCounters(counters)
            }
            throw .unavailable("no radio")
        }
        if sender.currentAdvert == nil { actions = sender.start(nowSeconds: now) }
        try await perform(actions, radio: radio)
    }

    func perform(_ actions: [AdvertSender.Action]) async {
        guard let radio = port else { return }
        try? await perform(actions, radio: radio)
    }

    private func perform(_ actions: [AdvertSender.Action], radio: any RadioPort) async throws(RadioError) {
        for action in actions {
            switch action {
            case .persist(let counters):
                // Counters reach the disk before the advert they cover reaches the radio (§4.2).
                do { try store.saveCounters(counters) } catch { throw .failed("cannot persist advert counters") }
            case .advertise(let bytes):
                try await radio.advertise(companyID: companyID, data: bytes, connectable: ringAdvertConnectable)
            case .stop:
                await radio.stopAdvertising()
            }
        }
    }

    /// Clock tick: epoch rotation of the advert and of the matcher window.
    public func tick() async {
        let now = clock.unixSeconds()
        matcher.advance(toEpoch: Protocol.epoch(unixSeconds: now))
        var actions = sender.tick(nowSeconds: now)
        // While the pairing advert is on the air the new ring advert waits for restoreRingAdvert;
        // its counters are still persisted now.
        if !waitingPairingSessions.isEmpty { actions = actions.filter { if case .persist = $0 { true } else { false } } }
        await perform(actions)
    }

    /// A ring of one has nobody to tell; with members, the device advertises at least presence.
    func advertisePresenceIfRinged() async {
        guard port != nil, hasMembers, currentRecord() == nil, waitingPairingSessions.isEmpty else { return }
        do { try await advertiseContent(.presence) } catch { book.notice("advertising failed: \(error)") }
    }

    /// While a session waits for its initiator, the radio carries the clear pairing advert
    /// instead of the ring advert (at most 120 s, protocol §5); the ring advert comes back after.
    /// With an L2CAP listener the advert is connectable: the initiator's kernel only connects to an
    /// advertising peer (§8.3).
    public func advertisePairing(sessionID: [UInt8], name: String, tcpPublished: Bool, psm: UInt16?) async {
        waitingPairingSessions.insert(sessionID.hexString)
        guard let radio = port, let advert = try? PairingAdvert(sessionID: sessionID, tcpPublished: tcpPublished, psm: psm,
                                                                 name: name) else { return }
        do {
            try await radio.advertise(companyID: companyID, data: advert.encoded, connectable: psm != nil)
            book.notice("pairing advert on the air")
        } catch {
            book.notice("pairing advert refused: \(error)")
        }
    }

    /// The session no longer waits for an initiator: the ring advert (or nothing) comes back once no session waits.
    public func pairingStoppedWaiting(sessionID: [UInt8]) async {
        guard waitingPairingSessions.remove(sessionID.hexString) != nil else { return }
        await restoreRingAdvert()
    }

    func restoreRingAdvert() async {
        guard let radio = port, waitingPairingSessions.isEmpty else { return }
        let actions = sender.radioReset()
        if actions.isEmpty {
            await radio.stopAdvertising()
            await advertisePresenceIfRinged()
        } else {
            for case .advertise(let bytes) in actions {
                try? await radio.advertise(companyID: companyID, data: bytes, connectable: ringAdvertConnectable)
            }
        }
    }

    /// Makes the ring advert connectable (or not) and puts it on the air again.
    public func setRingAdvertConnectable(_ connectable: Bool) async {
        guard ringAdvertConnectable != connectable else { return }
        ringAdvertConnectable = connectable
        await restoreRingAdvert()
    }
}
