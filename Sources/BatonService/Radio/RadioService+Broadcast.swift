// SPDX-License-Identifier: GPL-2.0-or-later
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

/// The broadcaster: what is on the air, as the OnAirPlanner decides (ring advert with the
/// current activity or presence, silence for a ring of one, a waiting pairing session's advert
/// instead, connectability) and what it stands for (its PublicationBook). This file only carries
/// the planner's actions out.
extension RadioService: ActivityPublisher {
    // MARK: ActivityPublisher

    /// The receipt names the advert revision and what the radio does now (`knownSummary`: no
    /// second call to the adapter on the publish path).
    @discardableResult
    public func publish(_ record: ActivityRecord, uid: UInt32) async throws(RadioError) -> PublishReceipt {
        // Kept even without a radio: the radio is only discovery, the record is what a fetch returns.
        let actions = planner.publish(record, uid: uid, nowSeconds: clock.unixSeconds())
        // Without a radio the content and its revision still count for FetchActivity.
        guard port != nil else {
            try? persistCounters(of: actions)
            throw .unavailable("no radio")
        }
        try await carryOrThrow(actions)
        return PublishReceipt(advertRevision: planner.sender.counters.revision, radio: knownSummary())
    }

    public func withdraw(uid: UInt32) async {
        await carry(planner.withdraw(uid: uid, nowSeconds: clock.unixSeconds()))
    }

    /// The record behind the current advert, for FetchActivity.
    public func currentRecord() -> ActivityRecord? { planner.publications.current?.record }

    /// The current activity as a FetchActivity sees it: its type hash and advert revision.
    public func currentPublication() -> Publication? {
        guard let (uid, record) = planner.publications.current else { return nil }
        let hash = DerivedKeys(secret: ownSecret).typeHash(record.activityType)
        return Publication(uid: uid, record: record, typeHash: hash, revision: planner.sender.counters.revision)
    }

    /// What is on the air now (tests and diagnostics).
    public var onAir: OnAirPlanner.OnAir { planner.onAir }

    /// Clock tick: epoch rotation of the advert and of the matcher window.
    public func tick() async {
        let now = clock.unixSeconds()
        matcher.advance(toEpoch: Protocol.epoch(unixSeconds: now))
        await carry(planner.tick(nowSeconds: now))
    }

    /// While a session waits for its initiator, the radio carries the clear pairing advert
    /// instead of the ring advert (at most 120 s, protocol §5); the ring advert comes back after.
    /// With an L2CAP listener the advert is connectable: the initiator's kernel only connects to an
    /// advertising peer (§8.3).
    public func advertisePairing(sessionID: [UInt8], name: String, tcpPublished: Bool, psm: UInt16?) async {
        guard let advert = try? PairingAdvert(sessionID: sessionID, tcpPublished: tcpPublished, psm: psm, name: name) else {
            notice("pairing advert refused: invalid fields")
            return
        }
        await carry(planner.pairingStartedWaiting(advert))
    }

    /// The session no longer waits for an initiator: the ring advert (or nothing) comes back once no session waits.
    public func pairingStoppedWaiting(sessionID: [UInt8]) async {
        await carry(planner.pairingStoppedWaiting(sessionID: sessionID, nowSeconds: clock.unixSeconds()))
    }

    /// Makes the ring advert connectable (or not) and puts it on the air again.
    public func setRingAdvertConnectable(_ connectable: Bool) async {
        await carry(planner.setRingAdvertConnectable(connectable, nowSeconds: clock.unixSeconds()))
    }

    // MARK: Carrying out the planner's actions

    /// Carries out actions whose failure only shows in the notices.
    func carry(_ actions: [OnAirPlanner.Action]) async {
        do { try await carryOrThrow(actions) } catch { notice("advertising failed: \(error)") }
    }

    /// In order: counters reach the disk before the advert they cover reaches the radio (§4.2).
    func carryOrThrow(_ actions: [OnAirPlanner.Action]) async throws(RadioError) {
        for action in actions {
            switch action {
            case .persist(let counters, let mark):
                try persist(counters, mark)
            case .advertiseRing(let bytes, let connectable):
                guard let port else { continue }
                try await port.advertise(companyID: companyID, data: bytes, connectable: connectable)
            case .advertisePairing(let advert, let connectable):
                guard let port else { continue }
                do {
                    try await port.advertise(companyID: companyID, data: advert.encoded, connectable: connectable)
                    notice("pairing advert on the air")
                } catch {
                    notice("pairing advert refused: \(error)")
                }
            case .stop:
                await port?.stopAdvertising()
            }
        }
    }

    private func persistCounters(of actions: [OnAirPlanner.Action]) throws(RadioError) {
        if let (counters, mark) = actions.lazy.compactMap({ if case .persist(let c, let m) = $0 { (c, m) } else { nil } }).last {
            try persist(counters, mark)
        }
    }

    /// The boot mark (runtime directory) and the counters (state directory), both before the advert
    /// they cover: a failure of either keeps the advert off the air (§4.2 "Restarts").
    private func persist(_ counters: SenderCounters, _ mark: SenderBootMark) throws(RadioError) {
        if let bootMarkRecord {
            do { try bootMarkRecord.save(mark) } catch { throw .failed("cannot write the advert boot mark \(bootMarkRecord.filePath): \(error)") }
        }
        do { try counterRecord.save(counters) } catch { throw .failed("cannot persist advert counters") }
    }
}
