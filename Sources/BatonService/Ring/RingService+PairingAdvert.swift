import BatonCore
import Dispatch

/// A pairing advert heard on the radio (protocol §5): who is waiting in `bt-pair accept` nearby.
struct HeardPairingAdvert: Sendable, Hashable {
    var advert: PairingAdvert
    var address: String
    var heardAtMilliseconds: Int64
}

extension RingService {
    /// How long a heard pairing advert stays listed after its last report.
    static let pairingAdvertLifetimeMilliseconds: Int64 = 130_000

    /// While a session waits for its initiator, the radio carries the clear pairing advert
    /// instead of the ring advert (at most 120 s, protocol §5); the ring advert comes back after.
    func advertisePairing(sessionID: [UInt8], tcpPublished: Bool) async {
        guard let radio, let advert = try? PairingAdvert(sessionID: sessionID, tcpPublished: tcpPublished, psm: nil,
                                                          name: keeper.state.name) else { return }
        do {
            try await radio.advertise(companyID: configuration.companyID, data: advert.encoded, connectable: false)
            book.notice("pairing advert on the air")
        } catch {
            book.notice("pairing advert refused: \(error)")
        }
    }

    /// Puts the ring advert (or nothing) back once no session waits any more.
    func restoreRingAdvert() async {
        guard let radio, ownWaitingSessionIDs().isEmpty else { return }
        let actions = sender.radioReset()
        if actions.isEmpty {
            await radio.stopAdvertising()
            await advertisePresenceIfRinged()
        } else {
            for case .advertise(let bytes) in actions {
                try? await radio.advertise(companyID: configuration.companyID, data: bytes, connectable: false)
            }
        }
    }

    /// Records a pairing advert from the scanner (bounded: the 16 most recent sessions).
    func heardPairing(_ data: [UInt8], from address: String) {
        guard let advert = try? PairingAdvert(decoding: data) else { return }
        let now = Self.monotonicMilliseconds()
        pairingAdverts[advert.sessionID.hexString] = HeardPairingAdvert(advert: advert, address: address, heardAtMilliseconds: now)
        if pairingAdverts.count > 16, let oldest = pairingAdverts.min(by: { $0.value.heardAtMilliseconds < $1.value.heardAtMilliseconds }) {
            pairingAdverts[oldest.key] = nil
        }
    }

    /// Pairing adverts heard lately, without this device's own sessions.
    func recentPairingAdverts() -> [HeardPairingAdvert] {
        let now = Self.monotonicMilliseconds()
        let own = Set(ownWaitingSessionIDs())
        return pairingAdverts.values
            .filter { now - $0.heardAtMilliseconds <= Self.pairingAdvertLifetimeMilliseconds && !own.contains($0.advert.sessionID.hexString) }
            .sorted { $0.advert.name < $1.advert.name }
    }
}
