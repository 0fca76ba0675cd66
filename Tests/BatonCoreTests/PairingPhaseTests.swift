// SPDX-License-Identifier: GPL-2.0-or-later
import Testing
import BatonCore
import BatonCrypto

@Suite("Pairing phases")
struct PairingPhaseTests {
    let sessionID: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
    let peer = deviceID(7)

    @Test("An acceptor waits, is connected, shows the code and pairs")
    func acceptorPath() {
        var progress = PairingProgress(role: .responder, sessionID: sessionID, listeningPort: 4242)
        #expect(progress.phase == .waiting(port: 4242, sessionID: sessionID))
        #expect(progress.phase.isWaiting && !progress.phase.isFinished)
        #expect(progress.textProperties == ["State": "waiting", "Role": "responder", "Code": "", "PeerName": "", "PeerId": "",
                                            "Error": "", "SessionId": "0102030405060708"])
        #expect(progress.connected() == true)
        #expect(progress.connected() == false)
        #expect(progress.codeShown("123456") == true)
        #expect(progress.phase == .confirming(code: "123456"))
        #expect(progress.paired(peerName: "beta", peerID: peer) == true)
        #expect(progress.phase.isFinished)
        #expect(progress.port == 4242)
        #expect(progress.textProperties == ["State": "paired", "Role": "responder", "Code": "123456", "PeerName": "beta",
                                            "PeerId": peer.description, "Error": "", "SessionId": "0102030405060708"])
    }

    /// Issue 23 finding 5: each screen shows only what the other person types, and the acceptor
    /// wants initiators (advert, listeners, contest) until its own user typed the second code.
    @Test("Each side shows what the other types; the acceptor waits for initiators until its user typed")
    func secondCode() {
        var initiator = PairingProgress(role: .initiator, sessionID: sessionID, listeningPort: nil)
        #expect(initiator.wantsInitiators == false)
        #expect(initiator.typedCodeMatched() == false)  // no code yet
        #expect(initiator.codeShown("123456", second: "654321") == true)
        #expect(initiator.visibleCode == "" && initiator.textProperties["Code"] == "")
        #expect(initiator.typedCodeMatched() == true)
        #expect(initiator.typedCodeMatched() == false)
        #expect(initiator.visibleCode == "654321" && initiator.textProperties["Code"] == "654321")
        #expect(initiator.phase == .confirming(code: "123456"))

        var acceptor = PairingProgress(role: .responder, sessionID: sessionID, listeningPort: 4242)
        #expect(acceptor.wantsInitiators)
        acceptor.connected()
        #expect(acceptor.wantsInitiators, "an acceptor still waits for initiators once the first one connected")
        acceptor.codeShown("123456", second: "654321")
        #expect(acceptor.wantsInitiators && acceptor.visibleCode == "123456")
        #expect(acceptor.typedCodeMatched() == true)
        #expect(!acceptor.wantsInitiators && acceptor.visibleCode == "123456")
        var failed = PairingProgress(role: .responder, sessionID: sessionID, listeningPort: 4242)
        failed.failed(.rejected)
        #expect(!failed.wantsInitiators)
    }

    @Test("The second code is u32be(H[4..<8]) mod 10⁶ (§7.1)")
    func secondCodeDerivation() throws {
        let h = try #require([UInt8](hex: "21b20a30c8ec01750c66ecf071e0b36f9a537047ba3a49c7372962a46f7faf6d"))
        #expect(PairingSession.shortAuthenticationString(transcriptHash: h) == "316144")
        #expect(PairingSession.confirmationCode(transcriptHash: h) == "910069")
        // Leading zeros are kept: 0x000f4240 = 10⁶ gives 000000; 0x00000007 gives 000007.
        #expect(PairingSession.confirmationCode(transcriptHash: [9, 9, 9, 9, 0, 0x0f, 0x42, 0x40] + h) == "000000")
        #expect(PairingSession.confirmationCode(transcriptHash: [9, 9, 9, 9, 0, 0, 0, 7] + h) == "000007")
    }

    @Test("An initiator starts connected with port 0")
    func initiator() {
        let progress = PairingProgress(role: .initiator, sessionID: sessionID, listeningPort: nil)
        #expect(progress.phase == .connected && progress.port == 0)
        #expect(progress.textProperties["Role"] == "initiator" && progress.textProperties["State"] == "connected")
    }

    @Test("Phases only go forward")
    func onlyForward() {
        var progress = PairingProgress(role: .responder, sessionID: sessionID, listeningPort: 1)
        #expect(progress.codeShown("111111") == false)  // not connected yet
        #expect(progress.paired(peerName: "x", peerID: peer) == false)
        #expect(progress.phase.isWaiting)
        progress.connected()
        #expect(progress.codeShown("111111") == true)
        #expect(progress.codeShown("222222") == false)
        #expect(progress.connected() == false)
        #expect(progress.phase == .confirming(code: "111111"))
    }

    @Test("Any unfinished phase may fail; a finished session stays as it finished")
    func failures() {
        for steps in 0...2 {
            var progress = PairingProgress(role: .responder, sessionID: sessionID, listeningPort: 1)
            if steps > 0 { progress.connected() }
            if steps > 1 { progress.codeShown("333333") }
            #expect(progress.failed(.rejected) == true)
            // A late transport error (the listener closed by the cancel) does not overwrite the refusal.
            #expect(progress.failed(.transport) == false)
            #expect(progress.phase == .failed(.rejected))
            #expect(progress.textProperties["Error"] == "rejected" && progress.textProperties["State"] == "failed")
            #expect(progress.connected() == false)
            #expect(progress.paired(peerName: "x", peerID: peer) == false)
        }
        var paired = PairingProgress(role: .initiator, sessionID: sessionID, listeningPort: nil)
        paired.codeShown("444444")
        paired.paired(peerName: "x", peerID: peer)
        #expect(paired.failed(.timedOut) == false)
    }

    @Test("Failure reasons keep their D-Bus names and map pairing errors")
    func reasons() {
        #expect(PairingFailureReason.allCases.map(\.rawValue) == ["rejected", "timed-out", "verification-failed", "transport", "protocol",
                                                                 "peer-removed", "contested", "not-saved", "ring-changed"])
        #expect(PairingFailureReason(.peerRemoved) == .peerRemoved)
        #expect(PairingFailureReason(.malformed("ring not saved")) == .notSaved)
        #expect(PairingFailureReason(.rejected) == .rejected)
        #expect(PairingFailureReason(.timedOut) == .timedOut)
        for error in [WireError.commitMismatch, .authenticationFailed, .badSignature, .weakKey, .replayedSequence] {
            #expect(PairingFailureReason(error) == .verificationFailed)
        }
        for error in [WireError.truncated, .malformed("x"), .unexpectedMessage("y"), .sequenceExhausted] {
            #expect(PairingFailureReason(error) == .protocolError)
        }
    }

    @Test("State names are defined once")
    func stateNames() {
        #expect(PairingPhase.waiting(port: 1, sessionID: []).stateName == "waiting")
        #expect(PairingPhase.connected.stateName == "connected")
        #expect(PairingPhase.confirming(code: "1").stateName == "confirming")
        #expect(PairingPhase.paired(peerName: "a", peerID: peer).stateName == "paired")
        #expect(PairingPhase.failed(.transport).stateName == "failed")
    }
}
