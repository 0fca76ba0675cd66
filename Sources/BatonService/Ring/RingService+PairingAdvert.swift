#if canImport(Glibc)
import Glibc
#endif
import BatonAPI
import BatonCore
import BatonDBus
import BatonTransport
import Dispatch

/// A pairing advert heard on the radio (protocol §5): who is waiting in `bt-pair accept` nearby.
struct HeardPairingAdvert: Sendable, Hashable {
    var advert: PairingAdvert
    var address: String
    /// "public" or "random" as BlueZ reported the advertiser; an L2CAP connect needs it.
    var addressType: String
    var heardAtMilliseconds: Int64
}

extension RingService {
    /// How long a heard pairing advert stays listed after its last report.
    static let pairingAdvertLifetimeMilliseconds: Int64 = 130_000

    /// While a session waits for its initiator, the radio carries the clear pairing advert
    /// instead of the ring advert (at most 120 s, protocol §5); the ring advert comes back after.
    /// With an L2CAP listener the advert is connectable: the initiator's kernel only connects to an
    /// advertising peer (§8.3).
    func advertisePairing(sessionID: [UInt8], tcpPublished: Bool, psm: UInt16?) async {
        guard let radio, let advert = try? PairingAdvert(sessionID: sessionID, tcpPublished: tcpPublished, psm: psm,
                                                          name: keeper.state.name) else { return }
        do {
            try await radio.advertise(companyID: configuration.companyID, data: advert.encoded, connectable: psm != nil)
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
                try? await radio.advertise(companyID: configuration.companyID, data: bytes, connectable: ringAdvertConnectable)
            }
        }
    }

    /// Records a pairing advert from the scanner (bounded: the 16 most recent sessions).
    func heardPairing(_ data: [UInt8], from address: String, addressType: String) {
        guard let advert = try? PairingAdvert(decoding: data) else { return }
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
        let own = Set(ownWaitingSessionIDs())
        return pairingAdverts.values
            .filter { now - $0.heardAtMilliseconds <= Self.pairingAdvertLifetimeMilliseconds && !own.contains($0.advert.sessionID.hexString) }
            .sorted { $0.advert.name < $1.advert.name }
    }
}

// MARK: Pairing over L2CAP (§8.3)

extension RingService {
    /// An L2CAP listener for an accepting session on the adapter's own address, on the first free
    /// dynamic PSM; nil without a ready adapter or without kernel Bluetooth (TCP alone then).
    func openPairingL2CAPListener() async -> L2CAPListener? {
        guard let radio, let own = await radio.adapterAddress(), let address = try? BluetoothAddress(own.address) else { return nil }
        let type: LEAddressType = own.addressType == "random" ? .random : .public
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
        book.notice("pairing without L2CAP: \(lastError.map { "\($0)" } ?? "no free PSM")")
        return nil
    }

    /// Opens the pairing channel to an acceptor's L2CAP listener. The address type is the given one,
    /// else the one heard with that address in a recent pairing advert, else public.
    func connectPairingL2CAP(peer: BluetoothAddress, psm: UInt16, addressType: LEAddressType?) async throws -> L2CAPFrameChannel {
        guard let radio, let own = await radio.adapterAddress(), let local = try? BluetoothAddress(own.address) else {
            throw DBusError(name: BatonErrorName.notReady, message: "no Bluetooth adapter is ready")
        }
        let heardType = recentPairingAdverts().first { $0.address.uppercased() == peer.description }?.addressType
        let peerType = addressType ?? (heardType == "random" ? .random : .public)
        // BlueZ's discovery (an active scan) competes with the kernel's own scan for the peer: paused
        // while connecting.
        await radio.stopScanning()
        let result: Result<L2CAPFrameChannel, TransportError>
        do {
            result = .success(try await L2CAPConnector.connect(adapterAddress: local, adapterAddressType: own.addressType == "random" ? .random : .public,
                                                               peerAddress: peer, peerAddressType: peerType, psm: psm, timeout: .seconds(15)))
        } catch {
            result = .failure(error)
        }
        do { try await radio.startScanning() } catch { book.notice("scanning could not resume after an L2CAP connect: \(error)") }
        switch result {
        case .success(let channel):
            log("batond: pairing connected over L2CAP to \(channel.peer)")
            return channel
        case .failure(let error):
            throw DBusError(name: BatonErrorName.unknownDevice, message: "cannot reach ble:\(peer)/0x\(String(psm, radix: 16)): \(error)")
        }
    }

    /// The first initiator to arrive on either listener; both listeners are closed then, and a
    /// channel that arrived at the same moment on the other is closed too.
    static func acceptFirst(tcp: PlainFrameListener, bluetooth: L2CAPListener?, timeout: Duration) async throws(TransportError) -> any FrameChannel {
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
                        tcp.close()
                        bluetooth?.close()
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
