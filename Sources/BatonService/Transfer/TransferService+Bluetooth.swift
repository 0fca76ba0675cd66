// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonTransport
import Synchronization

/// The transfer over Bluetooth LE (§8.3): the L2CAP listener beside the TCP one, with its channel
/// budgets, and the client's L2CAP connect to a member's `ble:` endpoint.
extension TransferService {
    /// The L2CAP listener of the BLE fallback (§8.3), when an adapter is ready and the PSM is free.
    /// Without an IP endpoint for other machines (a loopback or no listener) the ring advert turns
    /// connectable, since a peer can only connect to an advertising device; that advert then carries
    /// the adapter's own address instead of a throw-away one, which is the price of being reachable.
    func listenOnBluetooth() async {
        guard let (address, type) = await radio.bluetoothAdapter() else { return }
        let listener: L2CAPListener
        do {
            listener = try L2CAPListener(adapterAddress: address, addressType: type, psm: RingService.transferPSM)
        } catch {
            log("batond: no L2CAP transfer listener: \(Self.describe(error))")
            return
        }
        bluetoothListener = listener
        log("batond: transfers also on \(RingService.bluetoothTransferEndpoint(address, type))")
        // As the TCP listener (§8.1, §8.3): at most this many channels in the handshake, and members'
        // channels on a budget of their own, so strangers holding channels cannot lock members out.
        let handshakes = ChannelBudget(limit: secureL2CAP.configuration.maxConnections)
        let members = ChannelBudget(limit: Self.maxMemberChannels)
        bluetoothAcceptTask = Task { [weak self, listener, secureL2CAP, log] in
            while !Task.isCancelled {
                let raw: L2CAPFrameChannel
                do { raw = try await listener.accept(timeout: .seconds(3600)) } catch TransportError.timedOut { continue } catch { return }
                guard handshakes.take() else {
                    raw.close()
                    continue
                }
                Task {
                    let channel: SecureChannel
                    do throws(TransportError) {
                        channel = try await secureL2CAP.accept(raw)
                        handshakes.give()
                    } catch {
                        handshakes.give()
                        log("batond: transfer handshake over L2CAP refused: \(Self.describe(error))")
                        return
                    }
                    guard members.take() else {
                        channel.close()
                        return
                    }
                    defer { members.give() }
                    log("batond: transfer channel over L2CAP from \(raw.peer)")
                    await self?.serve(channel)
                }
            }
        }
        let reachableOverIP = localEndpoints.contains { endpoint in
            guard let (host, _) = RingService.splitEndpoint(endpoint) else { return false }
            return !(host.hasPrefix("127.") || host == "::1")
        }
        if !reachableOverIP { await radio.setRingAdvertConnectable(true) }
    }

    func connectOverBluetooth(address: BluetoothAddress, type: LEAddressType, psm: UInt16) async throws(TransportError) -> SecureChannel {
        guard let (own, ownType) = await radio.bluetoothAdapter() else { throw .addressUnavailable("no Bluetooth adapter is ready") }
        await radio.pauseScanningForConnect()
        let result: Result<SecureChannel, TransportError>
        do {
            result = .success(try await secureL2CAP.connect(adapterAddress: own, adapterAddressType: ownType, peerAddress: address,
                                                           peerAddressType: type, psm: psm, timeout: configuration.bluetoothConnectTimeout))
        } catch {
            result = .failure(error)
        }
        await radio.resumeScanningAfterConnect()
        return try result.get()
    }
}

/// Counts the L2CAP transfer channels open at once, bounded by `limit`.
final class ChannelBudget: Sendable {
    private let inUse = Mutex(0)
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Takes one slot; false when all are in use.
    func take() -> Bool {
        inUse.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    func give() { inUse.withLock { $0 = max(0, $0 - 1) } }
}
