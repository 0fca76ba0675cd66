#if canImport(Glibc)
import Glibc
#endif
import BatonCore
import BatonTransport
import Dispatch

// MARK: Pairing over L2CAP (§8.3)

extension PairingService {
    /// An L2CAP listener for an accepting session on the adapter's own address, on the first free
    /// dynamic PSM; nil without a ready adapter or without kernel Bluetooth (TCP alone then).
    func openPairingL2CAPListener() async -> L2CAPListener? {
        guard let (address, type) = await radio.bluetoothAdapter() else { return nil }
        var lastError: TransportError?
        for psm in L2CAPSocketAddress.dynamicPSMs {
            do {
                return try L2CAPListener(adapterAddress: address, addressType: type, psm: psm)
            } catch {
                lastError = error
                // Only a taken PSM is worth another try.
                guard case .socket(_, let code) = error, code == EADDRINUSE else { break }
            }
        }
        await radio.notice("pairing without L2CAP: \(lastError.map { "\($0)" } ?? "no free PSM")")
        return nil
    }

    /// Opens the pairing channel to an acceptor's L2CAP listener. The address type is the given one,
    /// else the one heard with that address in a recent pairing advert, else public.
    func connectPairingL2CAP(peer: BluetoothAddress, psm: UInt16, addressType: LEAddressType?) async throws(ServiceFailure) -> L2CAPFrameChannel {
        guard let (local, localType) = await radio.bluetoothAdapter() else {
            throw .notReady("no Bluetooth adapter is ready")
        }
        let heardType = await radio.recentPairingAdverts().first { $0.address.uppercased() == peer.description }?.addressType
        let peerType = addressType ?? (heardType == "random" ? .random : .public)
        // BlueZ's discovery (an active scan) competes with the kernel's own scan for the peer: paused
        // while connecting.
        await radio.pauseScanningForConnect()
        let result: Result<L2CAPFrameChannel, TransportError>
        do {
            result = .success(try await L2CAPConnector.connect(adapterAddress: local, adapterAddressType: localType,
                                                               peerAddress: peer, peerAddressType: peerType, psm: psm, timeout: .seconds(15)))
        } catch {
            result = .failure(error)
        }
        await radio.resumeScanningAfterConnect()
        switch result {
        case .success(let channel):
            log("batond: pairing connected over L2CAP to \(channel.peer)")
            return channel
        case .failure(let error):
            throw .unknownDevice("cannot reach ble:\(peer)/0x\(String(psm, radix: 16)): \(error)")
        }
    }

    /// The first initiator to arrive on either listener; a channel that arrived at the same moment on
    /// the other is closed. Both listeners are closed then, unless `keepListening` (an acceptor's
    /// session watches them for a second initiator).
    static func acceptFirst(tcp: PlainFrameListener, bluetooth: L2CAPListener?, timeout: Duration,
                            keepListening: Bool = false) async throws(TransportError) -> any FrameChannel {
        typealias Outcome = Result<any FrameChannel, TransportError>
        let outcome: Outcome = await withTaskGroup(of: Outcome.self) { group in
            group.addTask {
                do throws(TransportError) { return .success(try await tcp.accept(timeout: timeout)) } catch { return .failure(error) }
            }
            if let bluetooth {
                group.addTask {
                    do throws(TransportError) { return .success(try await bluetooth.accept(timeout: timeout)) } catch { return .failure(error) }
                }
            }
            var winner: (any FrameChannel)?
            var failure: TransportError?
            for await result in group {
                switch result {
                case .success(let channel):
                    if winner == nil {
                        winner = channel
                        if !keepListening {
                            tcp.close()
                            bluetooth?.close()
                        }
                        // A closed descriptor does not always wake a waiting dispatch source.
                        group.cancelAll()
                    } else {
                        channel.close()
                    }
                case .failure(let error):
                    // One transport failing leaves the other waiting; a closed listener after a win is expected.
                    if failure == nil || failure == .closed { failure = error }
                }
            }
            if let winner { return .success(winner) }
            return .failure(failure ?? .closed)
        }
        return try outcome.get()
    }
}
