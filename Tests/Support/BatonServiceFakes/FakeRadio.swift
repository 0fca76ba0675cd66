// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Synchronization

/// A radio for host tests: records what the daemon advertises and lets the test play reports
/// into the daemon's scanner. A fake; the real radio is tested in the lab.
public final class FakeRadio: RadioPort {
    private let adverts = Mutex<[[UInt8]]>([])
    private let advertising = Mutex<[UInt8]?>(nil)
    private let stream: AsyncStream<RadioEvent>
    private let continuation: AsyncStream<RadioEvent>.Continuation

    public init() { (stream, continuation) = AsyncStream.makeStream() }

    public func events() -> AsyncStream<RadioEvent> { stream }
    public func advertise(companyID: UInt16, data: [UInt8], connectable: Bool) async throws(RadioError) {
        adverts.withLock { $0.append(data) }
        advertising.withLock { $0 = data }
    }
    public func stopAdvertising() async { advertising.withLock { $0 = nil } }
    public func startScanning() async throws(RadioError) { continuation.yield(.stateChanged(.ready)) }
    public func stopScanning() async {}
    /// No L2CAP: transfers run over TCP on loopback.
    public func adapterAddress() async -> RadioAdapterAddress? { nil }

    public var lastAdvert: [UInt8]? { adverts.withLock { $0.last } }
    /// Every advert handed to the radio, oldest first.
    public var allAdverts: [[UInt8]] { adverts.withLock { $0 } }
    /// What the radio carries now: the last advert unless advertising stopped after it.
    public var onAir: [UInt8]? { advertising.withLock { $0 } }

    /// An advert heard with `rssi` (127: the controller does not know it).
    public func hear(_ data: [UInt8], from address: BluetoothAddress = BluetoothAddress(testing: "C0:11:22:33:44:55"), rssi: Int = 127) {
        continuation.yield(.report(AdvertisementReport(address: address, addressType: .random, rssi: rssi, txPower: nil,
                                                       manufacturerData: [Protocol.defaultCompanyID: data])))
    }
}
