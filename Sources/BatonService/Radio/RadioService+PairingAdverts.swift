// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Dispatch

extension RadioService {
    /// Records a pairing advert from the scanner (the core's book bounds it to the most recent sessions).
    func heardPairing(_ advert: PairingAdvert, from address: BluetoothAddress, addressType: LEAddressType?) {
        pairingAdverts.record(advert, address: address, addressType: addressType ?? .public,
                              nowMilliseconds: Self.monotonicMilliseconds())
    }

    /// Pairing adverts heard lately, without this device's own sessions.
    func recentPairingAdverts() -> [HeardPairingAdvert] {
        pairingAdverts.recent(nowMilliseconds: Self.monotonicMilliseconds(), excludingSessions: planner.waitingSessionIDs)
    }
}
