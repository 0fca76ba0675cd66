// SPDX-License-Identifier: LGPL-2.1-or-later
/// The small protocols that adapters implement. The core defines them (no I/O here); BlueZ,
/// sockets and clocks live behind them at the edges.

/// One advertising report as a scanner hands it over. Match on payload, never on address:
/// non-connectable adverts come from throw-away random addresses.
public struct AdvertisementReport: Sendable, Hashable {
    public var address: BluetoothAddress
    /// Device1.AddressType as BlueZ says it; nil when BlueZ gave none, or a value other than
    /// "public" and "random".
    public var addressType: LEAddressType?
    /// HCI's 127 ("not available") is kept as reported; see `RSSIStatistics.isKnown`.
    public var rssi: Int?
    public var txPower: Int?
    public var manufacturerData: [UInt16: [UInt8]]
    public var serviceUUIDs: [String]
    public var name: String?

    public init(address: BluetoothAddress, addressType: LEAddressType?, rssi: Int?, txPower: Int?, manufacturerData: [UInt16: [UInt8]],
                serviceUUIDs: [String] = [], name: String? = nil) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.txPower = txPower
        self.manufacturerData = manufacturerData
        self.serviceUUIDs = serviceUUIDs
        self.name = name
    }
}

public enum RadioState: Sendable, Hashable {
    /// No adapter, or bluetoothd is not running; the text says which.
    case unavailable(String)
    case poweredOff
    case ready
}

public enum RadioEvent: Sendable, Hashable {
    case report(AdvertisementReport)
    /// The stack forgot an advertiser (BlueZ removed its Device1 object).
    case vanished(address: BluetoothAddress)
    case stateChanged(RadioState)
    /// Something the status should say (advert rejected, released, restarted...).
    case notice(String)
}

public enum RadioError: Error, Sendable, Hashable {
    case unavailable(String)
    /// The controller has no free advertising instance (BlueZ NotPermitted).
    case instanceLimit
    /// The payload does not fit (BlueZ InvalidLength).
    case invalidLength
    case failed(String)
}

/// Advertising and scanning, as the daemon needs them.
public protocol RadioPort: Sendable {
    /// A stream of everything the radio reports; one consumer.
    func events() -> AsyncStream<RadioEvent>
    /// Replaces the current advert (a new registration, so a new random address for
    /// non-connectable adverts). Kept and re-registered by the adapter after bluetoothd restarts
    /// or the adapter powers on again.
    func advertise(companyID: UInt16, data: [UInt8], connectable: Bool) async throws(RadioError)
    func stopAdvertising() async
    func startScanning() async throws(RadioError)
    func stopScanning() async
    /// The adapter's own LE address, which L2CAP sockets bind (§8.3); nil when unknown or not ready
    /// (and always for a radio without L2CAP). No default: every radio says.
    func adapterAddress() async -> RadioAdapterAddress?
}

/// An adapter's address as BlueZ's Adapter1 reports it.
public struct RadioAdapterAddress: Sendable, Hashable {
    public var address: BluetoothAddress
    /// Adapter1.AddressType.
    public var addressType: LEAddressType

    public init(address: BluetoothAddress, addressType: LEAddressType) {
        self.address = address
        self.addressType = addressType
    }
}

/// Writes log lines (the daemon: standard error; journald adds time and unit). One line per
/// event, no payloads.
public protocol ServiceLog: Sendable {
    func log(_ line: String)
}

/// Wall-clock time in Unix seconds; injected so tests control epochs.
public protocol WallClock: Sendable {
    func unixSeconds() -> Int64
}

/// Seconds on a clock that only moves forward, at the pace of real time, and that a change of the
/// date never steps; for how long something lasts (an offer's expiry), never for a date. Injected so
/// tests control it.
public protocol MonotonicClock: Sendable {
    func monotonicSeconds() -> Int64
}
