// SPDX-License-Identifier: LGPL-2.1-or-later
/// A pairing advert heard on the radio (protocol §5): who is waiting in `bt-pair accept` nearby.
public struct HeardPairingAdvert: Hashable, Sendable {
    public var advert: PairingAdvert
    public var address: BluetoothAddress
    /// As BlueZ reported the advertiser; an L2CAP connect needs it.
    public var addressType: LEAddressType
    /// On a monotonic clock.
    public var heardAtMilliseconds: Int64

    public init(advert: PairingAdvert, address: BluetoothAddress, addressType: LEAddressType, heardAtMilliseconds: Int64) {
        self.advert = advert
        self.address = address
        self.addressType = addressType
        self.heardAtMilliseconds = heardAtMilliseconds
    }
}

/// The pairing adverts heard lately, by session id. Bounded: the most recent `capacity` sessions.
public struct PairingAdvertBook: Sendable {
    public static let capacity = 16
    /// How long a heard pairing advert stays listed after its last report (a session waits at most 120 s).
    public static let lifetimeMilliseconds: Int64 = 130_000

    private var adverts: [[UInt8]: HeardPairingAdvert] = [:]

    public init() {}

    public var count: Int { adverts.count }

    /// A report classified as `HeardAdvert.pairing`.
    public mutating func record(_ advert: PairingAdvert, address: BluetoothAddress, addressType: LEAddressType, nowMilliseconds: Int64) {
        adverts[advert.sessionID] = HeardPairingAdvert(advert: advert, address: address, addressType: addressType,
                                                       heardAtMilliseconds: nowMilliseconds)
        if adverts.count > Self.capacity,
           let oldest = adverts.min(by: { $0.value.heardAtMilliseconds < $1.value.heardAtMilliseconds }) {
            adverts[oldest.key] = nil
        }
    }

    /// Heard within the lifetime, without this device's own sessions, by name.
    public func recent(nowMilliseconds: Int64, excludingSessions own: [[UInt8]]) -> [HeardPairingAdvert] {
        let own = Set(own)
        return adverts.values
            .filter { nowMilliseconds - $0.heardAtMilliseconds <= Self.lifetimeMilliseconds && !own.contains($0.advert.sessionID) }
            .sorted { ($0.advert.name, $0.address.description) < ($1.advert.name, $1.address.description) }
    }

    /// The address type a recent pairing advert from `address` was heard with (for an L2CAP connect).
    public func addressType(of address: BluetoothAddress, nowMilliseconds: Int64, excludingSessions own: [[UInt8]]) -> LEAddressType? {
        recent(nowMilliseconds: nowMilliseconds, excludingSessions: own).first { $0.address == address }?.addressType
    }
}
