// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import BatonCrypto
import BatonTransport

// MARK: Pairing that one careless click cannot defeat (issue 11, security.md "Pairing")

extension PairingService {
    /// A user typed the code the other screen shows (§7.1 "What the users do"): on the initiator the
    /// acceptor's code, on the acceptor the second code the initiator shows once its own user typed
    /// the first. Compared in constant time; a match confirms (and shows the initiator's second code,
    /// or ends the acceptor's wait for initiators), a different code fails the session
    /// (`verification-failed`): the other machine may not be the one meant.
    public func confirmCode(_ path: String, uid: UInt32, code: String) async throws(ServiceFailure) {
        let entry = try ownedSession(path, uid: uid)
        guard case .confirming(let shown) = entry.progress.phase, let driver = entry.driver else { throw .notReady("no code to confirm yet") }
        guard !entry.progress.codeTypedHere else { throw .notReady("the code was already typed here") }
        let expected = entry.progress.role == .initiator ? shown : entry.progress.secondCode
        let typed = code.filter { !$0.isWhitespace }
        if !expected.isEmpty, constantTimeEquals(Array(typed.utf8), Array(expected.utf8)) {
            update(path) { $0.typedCodeMatched() }
            await driver.confirm(true)
        } else {
            log("batond: pairing code typed wrong; session failed")
            update(path) { $0.failed(.verificationFailed) }
            await driver.cancel(as: .verificationFailed("typed code differs"))
        }
    }

    /// The user's final word on the members shown while reviewing: merge them (true) or not.
    public func commit(_ path: String, uid: UInt32, accepted: Bool) async throws(ServiceFailure) {
        let entry = try ownedSession(path, uid: uid)
        guard case .reviewing = entry.progress.phase, reviews[path] != nil else { throw .notReady("nothing to commit yet") }
        answerReview(path, accepted ? .commit : .refused)
    }

    /// The peer's roster arrived: what merging it would change here is shown (members joining, members
    /// of this ring its marks remove, members it re-keys: a dry run of the same merge, nothing stored)
    /// and merged only after the user's Commit; Cancel, a second initiator or the review timeout refuse it.
    func review(_ path: String, _ pairing: PairingResult, channel: any FrameChannel) async {
        let here = await ring.snapshot()
        let review = PairingReview(ours: here.roster, peerRoster: pairing.peerRoster, peer: pairing.peer, me: here.deviceID)
        guard update(path, { $0.reviewing(review) }) else { return }
        let timeout = limits.reviewTimeout
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.answerReview(path, .timedOut)
        }
        let answer = await withCheckedContinuation { reviews[path] = $0 }
        timer.cancel()
        switch answer {
        case .commit: break
        case .refused, .timedOut:
            update(path) { $0.failed(answer == .timedOut ? .timedOut : .rejected) }
            log("batond: pairing not committed (\(answer == .timedOut ? "no answer" : "refused")); nothing merged")
            return
        }
        let id = pairing.peer.deviceID
        do throws(WireError) {
            try await ring.joined(pairing, shown: review, observedHost: (channel as? PlainFrameChannel)?.peerDescription,
                                  bluetoothPeer: (channel as? L2CAPFrameChannel)?.peer)
        } catch {
            update(path) { $0.failed(PairingFailureReason(error)) }
            log("batond: pairing refused: \(PairingFailureReason(error).rawValue)")
            return
        }
        update(path) { $0.paired(peerName: pairing.peer.name, peerID: id) }
        log("batond: paired with \(id.shortForm)")
    }

    enum ReviewAnswer: Sendable { case commit, refused, timedOut }

    func answerReview(_ path: String, _ answer: ReviewAnswer) {
        reviews.removeValue(forKey: path)?.resume(returning: answer)
    }

    /// Until the acceptor's user typed the initiator's code, its listeners stay open: the first
    /// further initiator fails the session as `contested` (an attacker racing the real initiator, or
    /// the real one arriving after an attacker), both connections closed and nothing joined.
    func watchForSecondInitiator(_ path: String, tcp: PlainFrameListener, bluetooth: L2CAPListener?) {
        sessions[path]?.contestWatch = Task { [weak self] in
            while !Task.isCancelled {
                do throws(TransportError) {
                    let second = try await Self.acceptFirst(tcp: tcp, bluetooth: bluetooth, timeout: .seconds(60), keepListening: true)
                    second.close()
                    await self?.contested(path)
                    return
                } catch {
                    guard error == .timedOut else { return }
                }
            }
        }
    }

    func contested(_ path: String) async {
        guard let entry = sessions[path], !entry.progress.phase.isFinished else { return }
        log("batond: a second pairing initiator arrived during a session: aborted as contested")
        update(path) { $0.failed(.contested) }
        entry.closeListeners()
        answerReview(path, .refused)
        await entry.driver?.cancel(as: .contested)
    }
}
