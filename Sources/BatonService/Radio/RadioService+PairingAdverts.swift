import BatonCore
import Dispatch

/// A pairing advert heard on the radio (protocol §5): who is waiting in `bt-pair accept` nearby.
struct HeardPairingAdvert: Sendable, Hashable {
    var advert: PairingAdvert
    var address: String
    /// "public" or "random" as BlueZ reported the advertiser; an L2CAP connect needs it.
    var addressType: String
    var heardAtMilliseconds: Int64
}

extension RadioService {
    /// How long a heard pairing advert stays listed after its last report.
    static let pairingAdvertLifetimeMilliseconds: Int64 = 130_000

    /// Records a pairing advert from the scanner (bounded: the 16 most recent sessions).
    func heardPairing(_ advert: PairingAdvert, from address: String, addressType: String) {
        let now = Self.monotonicMilliseconds()
        pairingAdverts[advert.sessionID.hexString] = HeardPairingAdvert(advert: advert, address: address, addressType: addressType,
                                                                        heardAtMilliseconds: now)
        if pairingAdverts.count > 16, let oldest = pairingAdverts.min(by: { $0.value.heardAtMilliseconds < $1.value.heardAtMilliseconds }) {
            pairingAdverts[oldest.key] = nil
        }
    }

    /// Pairing adverts heard lately, without this device's own sessions.
    func recentPairingAdverts() -> [HeardPairingAdvert] {
        let now = Self.monotonicMilliseconds()
        let own = Set(planner.waitingSessionIDs)
        return pairingAdverts.values
            .filter { now - $0.heardAtMilliseconds <= Self.pairingAdvertLifetimeMilliseconds && !own.contains($0.advert.sessionID) }
            .sorted { $0.advert.name < $1.advert.name }
    }
}
