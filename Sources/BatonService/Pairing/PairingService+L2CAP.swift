// SPDX-License-Identifier: GPL-2.0-or-later
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

    /// Opens the pairing channel to an acceptor's L2CAP listener. With LE privacy the acceptor's
    /// pairing advert comes from a resolvable private address that rotates (kernel `rpa_timeout`), and
    /// the kernel only connects to the address it is given: so the address last heard with this
    /// session's advert wins over the caller's (which `bt-pair discover` may have seen before a
    /// rotation), and a connect that fails is tried once more if the advert was heard from a new
    /// address meanwhile.
    func connectPairingL2CAP(peer: BluetoothAddress, psm: UInt16, addressType: LEAddressType?,
                             sessionID: [UInt8]) async throws(ServiceFailure) -> L2CAPFrameChannel {
        guard let (local, localType) = await radio.bluetoothAdapter() else {
            throw .notReady("no Bluetooth adapter is ready")
        }
        var target = await pairingDialTarget(peer: peer, psm: psm, addressType: addressType, sessionID: sessionID)
        var attempt = 1
        let clock = ContinuousClock()
        let deadline = clock.now + Self.pairingDialBudget
        while true {
            let attemptTimeout = min(Self.pairingDialTimeout, deadline - clock.now)
            let started = clock.now
            // BlueZ's discovery (an active scan) competes with the kernel's own scan for the peer: paused
            // while connecting.
            await radio.pauseScanningForConnect()
            let result: Result<L2CAPFrameChannel, TransportError>
            do {
                result = .success(try await L2CAPConnector.connect(adapterAddress: local, adapterAddressType: localType,
                                                                   peerAddress: target.address, peerAddressType: target.type,
                                                                   psm: psm, timeout: attemptTimeout))
            } catch {
                result = .failure(error)
            }
            await radio.resumeScanningAfterConnect()
            switch result {
            case .success(let channel):
                log("batond: pairing connected over L2CAP to \(channel.peer)")
                return channel
            case .failure(let error):
                let took = Self.seconds(clock.now - started)
                // Another dial only while the budget leaves it a useful time (the caller's Pair waits 40 s).
                let another = attempt < Self.pairingDialAttempts && deadline - clock.now >= Self.pairingDialMinimum
                if another, let moved = await rotatedPairingAddress(from: target.address, psm: psm, sessionID: sessionID) {
                    log("batond: pairing connect to \(target.address) failed after \(took) s (\(error)); its advert moved to \(moved.address) (private address rotation); dialling again")
                    target = moved
                    attempt += 1
                    continue
                }
                // A connection request can go unanswered while the acceptor's controller is between
                // advertising sets; its advert still heard, one more dial is worth the wait.
                if another, error == .connectTimedOut,
                   Self.heardSessionAddress(await radio.recentPairingAdverts(), psm: psm, sessionID: sessionID) != nil {
                    log("batond: pairing connect to \(target.address) (\(target.type)) timed out after \(took) s while its advert is still heard; dialling again")
                    attempt += 1
                    continue
                }
                throw .unknownDevice("cannot reach ble:\(target.address)/0x\(String(psm, radix: 16)) (\(attempt) dial(s), last \(took) s): \(Self.describeDial(error, over: .bluetooth))")
            }
        }
    }

    /// Dials per pairing (each up to `pairingDialTimeout`), all within `pairingDialBudget`, so that
    /// Pair answers before its caller's 40 s (BatonClient) gives up; the acceptor waits 120 s.
    static let pairingDialAttempts = 3
    static let pairingDialTimeout: Duration = .seconds(15)
    static let pairingDialBudget: Duration = .seconds(32)
    static let pairingDialMinimum: Duration = .seconds(5)

    static func seconds(_ duration: Duration) -> String {
        let (whole, attoseconds) = duration.components
        return "\(whole).\(attoseconds / 100_000_000_000_000_000)"
    }

    /// Where to dial: the address this session's pairing advert (same PSM) was last heard from; else
    /// the caller's address with the given type, else the type heard with it, else public.
    private func pairingDialTarget(peer: BluetoothAddress, psm: UInt16, addressType: LEAddressType?,
                                   sessionID: [UInt8]) async -> (address: BluetoothAddress, type: LEAddressType) {
        let heard = await radio.recentPairingAdverts()
        if let session = Self.heardSessionAddress(heard, psm: psm, sessionID: sessionID) { return session }
        let heardType = heard.first { $0.address == peer }?.addressType
        return (peer, addressType ?? heardType ?? .public)
    }

    /// After a failed connect (scanning resumed): the session's advert heard from another address
    /// within a few seconds, or nil.
    private func rotatedPairingAddress(from dialled: BluetoothAddress, psm: UInt16,
                                       sessionID: [UInt8]) async -> (address: BluetoothAddress, type: LEAddressType)? {
        for _ in 0..<6 {
            if let session = Self.heardSessionAddress(await radio.recentPairingAdverts(), psm: psm, sessionID: sessionID),
               session.address != dialled {
                return session
            }
            try? await Task.sleep(for: .milliseconds(500))
        }
        return nil
    }

    static func heardSessionAddress(_ heard: [HeardPairingAdvert], psm: UInt16,
                                    sessionID: [UInt8]) -> (address: BluetoothAddress, type: LEAddressType)? {
        guard let advert = heard.filter({ $0.advert.sessionID == sessionID && $0.advert.psm == psm })
                .max(by: { $0.heardAtMilliseconds < $1.heardAtMilliseconds }) else { return nil }
        return (advert.address, advert.addressType)
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
