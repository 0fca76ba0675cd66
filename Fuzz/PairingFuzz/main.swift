// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes the pairing state machine (§7) in every phase, and PropertyValueCodec.decode.
//
// The harness drives a real initiator and responder once, keeping a copy of each session at
// every phase. It also derives the sealing keys itself from the spec (§7.2), so that fuzzed
// plaintexts can be sealed as the peer would and reach the message decoders behind the AEAD.
//
// First byte 0xE0 or more: the rest is one property value to decode (canonical: it must encode
// back to the same bytes). Otherwise it picks a phase (mod the number of phases) and the rest
// is a list of operations, each chosen by one byte:
//   0 a frame of any type with a fuzzed payload       1 a fuzzed plaintext sealed by the peer
//   2 the user's answer                               3 the clock moves on
import BatonCore
import BatonCrypto

func localInfo(_ name: String, seed: UInt8) -> LocalPairingInfo {
    let identity = try! Ed25519PrivateKey(seed: [UInt8](repeating: seed, count: 32))
    let secret = try! AdvertisingSecret.issue(root: [UInt8](repeating: seed &+ 100, count: 32), generation: UInt32(seed), day: 20_833)
    let own = try! RosterMember.signed(name: name, identity: identity, secret: secret)
    return LocalPairingInfo(name: name, identityKey: identity, roster: Roster(version: 1, members: [own]))
}

/// How the peer seals toward a session: key, additional data and the counter it expects next.
struct PeerSealer: Sendable {
    let key: AESGCMKey
    let aad: [UInt8]
    var counter: UInt64

    func seal(_ plaintext: [UInt8], counter: UInt64) -> [UInt8] {
        var nonce: [UInt8] = [0, 0, 0, 0]
        nonce.appendBigEndian(counter)
        var payload: [UInt8] = []
        payload.appendBigEndian(counter)
        guard let sealed = try? AESGCM.seal(key: key, nonce: nonce, plaintext: plaintext, aad: aad) else { return payload }
        return payload + sealed.ciphertext + sealed.tag
    }

    func open(_ payload: [UInt8]) -> [UInt8] {
        let counter = payload.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        var nonce: [UInt8] = [0, 0, 0, 0]
        nonce.appendBigEndian(counter)
        return try! AESGCM.open(key: key, nonce: nonce, ciphertext: Array(payload.dropFirst(8).dropLast(16)),
                                tag: Array(payload.suffix(16)), aad: aad)
    }
}

struct Stage: Sendable {
    let name: String
    let session: PairingSession
    let sealer: PeerSealer?
    /// The identity key a completed pairing in this stage must report for the peer.
    let expectedPeerKey: [UInt8]
}

struct Fixture: Sendable {
    let stages: [Stage]
    let seeds: [[UInt8]]
}

func frames(_ actions: [PairingSession.Action]) -> [Frame] {
    actions.compactMap { if case .send(let frame) = $0 { frame } else { nil } }
}

let fixture: Fixture = {
    let sessionID: [UInt8] = [0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58]
    let initiatorKey = try! X25519PrivateKey(rawRepresentation: [UInt8](repeating: 0x21, count: 32))
    let responderKey = try! X25519PrivateKey(rawRepresentation: [UInt8](repeating: 0x42, count: 32))
    let initiatorNonce = [UInt8](repeating: 0x13, count: 16)
    let responderNonce = [UInt8](repeating: 0x31, count: 16)
    let initiatorInfo = localInfo("alpha", seed: 1)
    let responderInfo = localInfo("beta", seed: 2)
    let initiatorPublic = initiatorInfo.identityKey.publicKey
    let responderPublic = responderInfo.identityKey.publicKey

    var initiator = try! PairingSession(role: .initiator, sessionID: sessionID, ephemeralKey: initiatorKey, nonce: initiatorNonce, local: initiatorInfo)
    var responder = try! PairingSession(role: .responder, sessionID: sessionID, ephemeralKey: responderKey, nonce: responderNonce, local: responderInfo)

    // Keys per §7.1–7.2, computed independently of PairingSession.
    let commitment = SHA256.hash("baton/v1 commit".utf8Bytes + initiatorKey.publicKey + initiatorNonce)
    let transcript = SHA256.hash("baton/v1 pair".utf8Bytes + sessionID + commitment + initiatorKey.publicKey + initiatorNonce
                                 + responderKey.publicKey + responderNonce)
    let shared = try! initiatorKey.sharedSecret(with: responderKey.publicKey)
    let keys = try! HKDF.deriveKey(ikm: shared, salt: transcript, info: "baton/v1 pair keys".utf8Bytes, count: 64)
    let aad = "baton/v1 sealed".utf8Bytes + transcript
    let towardsResponder = PeerSealer(key: try! AESGCMKey(Array(keys[0..<32])), aad: aad, counter: 0)
    let towardsInitiator = PeerSealer(key: try! AESGCMKey(Array(keys[32..<64])), aad: aad, counter: 0)
    func at(_ sealer: PeerSealer, _ counter: UInt64) -> PeerSealer { PeerSealer(key: sealer.key, aad: sealer.aad, counter: counter) }

    var stages: [Stage] = []
    stages.append(Stage(name: "initiator idle", session: initiator, sealer: nil, expectedPeerKey: responderPublic))
    stages.append(Stage(name: "responder awaiting commit", session: responder, sealer: nil, expectedPeerKey: initiatorPublic))
    let commit = frames(initiator.start(nowSeconds: 0))[0]
    stages.append(Stage(name: "initiator awaiting hello", session: initiator, sealer: nil, expectedPeerKey: responderPublic))
    let hello = frames(responder.receive(commit, nowSeconds: 0))[0]
    stages.append(Stage(name: "responder awaiting reveal", session: responder, sealer: nil, expectedPeerKey: initiatorPublic))
    let reveal = frames(initiator.receive(hello, nowSeconds: 0))[0]
    stages.append(Stage(name: "initiator confirming", session: initiator, sealer: towardsInitiator, expectedPeerKey: responderPublic))
    _ = responder.receive(reveal, nowSeconds: 0)
    stages.append(Stage(name: "responder confirming", session: responder, sealer: towardsResponder, expectedPeerKey: initiatorPublic))
    let responderConfirm = frames(responder.userConfirmed(true))[0]
    _ = initiator.receive(responderConfirm, nowSeconds: 0)
    stages.append(Stage(name: "initiator confirming, peer confirmed", session: initiator, sealer: at(towardsInitiator, 1),
                        expectedPeerKey: responderPublic))
    var initiatorMessages = frames(initiator.userConfirmed(true))
    // The roster waits for the peer's identity (§7.2), so it is not among these.
    precondition(initiatorMessages.count == 2, "initiator should send confirm and identity")
    stages.append(Stage(name: "initiator exchanging", session: initiator, sealer: at(towardsInitiator, 1), expectedPeerKey: responderPublic))
    let responderIdentity = frames(responder.receive(initiatorMessages[0], nowSeconds: 0))
    precondition(responderIdentity.count == 1, "responder should send its identity")
    stages.append(Stage(name: "responder exchanging", session: responder, sealer: at(towardsResponder, 1), expectedPeerKey: initiatorPublic))
    _ = responder.receive(initiatorMessages[1], nowSeconds: 0)
    stages.append(Stage(name: "responder holding identity", session: responder, sealer: at(towardsResponder, 2),
                        expectedPeerKey: initiatorPublic))
    // The initiator sends its roster once it holds the responder's identity.
    var initiatorAfterIdentity = initiator
    initiatorMessages += frames(initiatorAfterIdentity.receive(responderIdentity[0], nowSeconds: 0))
    precondition(initiatorMessages.count == 3, "initiator should send its roster after the peer's identity")

    // The harness's own key derivation must agree with the session's, or sealed fuzzing is blind.
    let confirmPlaintext = towardsResponder.open(initiatorMessages[0].payload)
    precondition(towardsResponder.seal(confirmPlaintext, counter: 0) == initiatorMessages[0].payload, "harness keys disagree")
    var finishing = responder
    let finished = finishing.receive(initiatorMessages[2], nowSeconds: 0)
    precondition(finished.contains { if case .completed = $0 { true } else { false } }, "harness run did not complete")

    // Seeds: the frames and plaintexts of the real run, each in the phase that expects it.
    func seed(_ stage: Int, _ operations: [[UInt8]]) -> [UInt8] { [UInt8(stage)] + operations.flatMap { $0 } }
    func frameOperation(_ frame: Frame) -> [UInt8] {
        var op: [UInt8] = [0, UInt8(FrameType.allCases.firstIndex(of: frame.type)!)]
        op.appendChunk(frame.payload)
        return op
    }
    func sealedOperation(_ plaintext: [UInt8]) -> [UInt8] {
        var op: [UInt8] = [1, 0]
        op.appendChunk(plaintext)
        return op
    }
    let identityPlaintext = towardsResponder.open(initiatorMessages[1].payload)
    let rosterPlaintext = towardsResponder.open(initiatorMessages[2].payload)
    let errorFrame = Frame(type: .error, requestID: 0, payload: ErrorFrame(code: .notPermitted, message: "no").payload)
    let seeds: [[UInt8]] = [
        seed(0, [frameOperation(hello), [3, 200]]),
        seed(1, [frameOperation(commit)]),
        seed(2, [frameOperation(hello), [2, 1]]),
        seed(3, [frameOperation(reveal)]),
        seed(4, [sealedOperation(confirmPlaintext), [2, 1]]),
        seed(5, [[2, 1], sealedOperation(confirmPlaintext), sealedOperation(identityPlaintext), sealedOperation(rosterPlaintext)]),
        seed(8, [sealedOperation(identityPlaintext), sealedOperation(rosterPlaintext)]),
        seed(9, [sealedOperation(rosterPlaintext)]),
        seed(9, [frameOperation(errorFrame)]),
        [0xE0] + identityPlaintext,
        [0xE0] + rosterPlaintext,
    ]
    return Fixture(stages: stages, seeds: seeds)
}()

func runSession(_ stage: Stage, _ input: inout FuzzInput) {
    var session = stage.session
    var sealer = stage.sealer
    var now: Int64 = 1
    var steps = 0
    while !input.isEmpty && steps < 32 {
        steps += 1
        let wasFinished = session.isFinished
        let actions: [PairingSession.Action]
        switch input.byte() % 4 {
        case 0:
            let type = FrameType.allCases[Int(input.byte()) % FrameType.allCases.count]
            actions = session.receive(Frame(type: type, requestID: 0, payload: input.chunk()), nowSeconds: now)
        case 1:
            // Mostly the counter the session expects; sometimes one a little off.
            let skew = input.byte()
            guard var current = sealer else {
                actions = session.receive(Frame(type: .pairSealed, requestID: 0, payload: input.chunk()), nowSeconds: now)
                break
            }
            let counter = skew < 0xF0 ? current.counter : current.counter &+ UInt64(skew - 0xEF)
            actions = session.receive(Frame(type: .pairSealed, requestID: 0, payload: current.seal(input.chunk(), counter: counter)), nowSeconds: now)
            current.counter += 1
            sealer = current
        case 2:
            actions = session.userConfirmed(input.byte() & 1 == 1)
        default:
            now += Int64(input.byte())
            actions = session.tick(nowSeconds: now)
        }
        fuzzCheck(!wasFinished || actions.isEmpty, "\(stage.name): a finished session acted again")
        for action in actions {
            switch action {
            case .failed:
                fuzzCheck(session.isFinished, "\(stage.name): failed but not finished")
            case .completed(let result):
                fuzzCheck(session.isFinished, "\(stage.name): completed but not finished")
                fuzzCheck(result.peer.identityKey == stage.expectedPeerKey, "\(stage.name): completed with an unsigned identity")
            case .send, .showCode:
                break
            }
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let selector = input.byte()
    if selector >= 0xE0 {
        let bytes = input.rest()
        if let value = try? PropertyValueCodec.decode(bytes) {
            fuzzCheck((try? PropertyValueCodec.encode(value)) == bytes, "property value does not re-encode to its input")
        }
        return 0
    }
    runSession(fixture.stages[Int(selector) % fixture.stages.count], &input)
    return 0
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    writeSeedsIfRequested { fixture.seeds }
    return 0
}
