// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// What this device brings to a pairing.
public struct LocalPairingInfo: Sendable {
    public var name: String
    public var identityKey: Ed25519PrivateKey
    /// Holds this device's own signed entry (its secret): sent only once the peer is checked (§7.2).
    public var roster: Roster
    /// "host:port" of this device's TLS listener (§7.2 "endpoints"), hints for the peer.
    public var endpoints: [String]

    public init(name: String, identityKey: Ed25519PrivateKey, roster: Roster, endpoints: [String] = []) {
        self.name = name
        self.identityKey = identityKey
        self.roster = roster
        self.endpoints = endpoints
    }
}

/// What a successful pairing yields: the peer, and its ring to merge (§7.2).
public struct PairingResult: Hashable, Sendable {
    public var peer: RosterMember
    public var peerRoster: Roster
    /// The peer's TLS endpoints as it announced them (hints; may be empty).
    public var peerEndpoints: [String] = []
}

/// The optional "endpoints" list of the identity message (§7.2): at most 8 "host:port" strings
/// of 1–64 bytes each.
public enum PairingEndpoints {
    public static let maxCount = 8
    public static let maxBytes = 64

    public static func validate(_ endpoints: [String]) throws(WireError) {
        guard endpoints.count <= maxCount else { throw .malformed("endpoints count") }
        for endpoint in endpoints {
            let bytes = endpoint.utf8
            guard !bytes.isEmpty, bytes.count <= maxBytes, bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
                  let colon = endpoint.lastIndex(of: ":"), let port = UInt16(endpoint[endpoint.index(after: colon)...]), port > 0,
                  colon != endpoint.startIndex else {
                throw .malformed("endpoint")
            }
        }
    }
}

/// Commit–reveal SAS pairing (§7), one state machine for both roles. Inputs in (frames,
/// the user's answer, clock ticks), actions out. Randomness is passed in at creation.
public struct PairingSession: Sendable {
    public static let maxSealedPlaintext = 4_096
    public static let timeoutSeconds: Int64 = 120

    public enum Role: Sendable { case initiator, responder }

    public enum Action: Hashable, Sendable {
        case send(Frame)
        /// Show this 6-digit code and ask the user to confirm it.
        case showCode(String)
        case completed(PairingResult)
        case failed(WireError)
    }

    enum Phase: Sendable, Equatable {
        case idle, awaitingHello, awaitingCommit, awaitingReveal, confirming, exchanging, done, failed
    }

    public let role: Role
    public let sessionID: [UInt8]
    private let ephemeral: X25519PrivateKey
    private let nonce: [UInt8]
    private let local: LocalPairingInfo
    private var phase: Phase
    private var deadline: Int64?
    private var commitment: [UInt8] = []
    private var peerPublic: [UInt8] = []
    private var peerNonce: [UInt8] = []
    private var transcript: [UInt8] = []
    private var sendKey: AESGCMKey?
    private var receiveKey: AESGCMKey?
    private var sendCounter: UInt64 = 0
    private var receiveCounter: UInt64 = 0
    private var localConfirmed = false
    private var peerConfirmed = false
    /// The peer's identity message, checked; its signed roster entry (with its secret) comes with its roster.
    private var peer: (name: String, identityKey: [UInt8])?
    private var peerRoster: Roster?
    /// The peer's roster parts so far (§7.2 message 3, RosterChunks).
    private var peerRosterParts = RosterChunks.Assembler()
    private var rosterSent = false
    private var peerEndpoints: [String] = []
    public private(set) var code: String?
    /// The second code (§7.1), shown by the initiator once its user typed `code` correctly; the
    /// responder's user types it, so the responder too confirms what the other screen shows.
    public private(set) var secondCode: String?

    /// `ephemeralKey` and `nonce` (16 bytes) must be fresh randomness for this session.
    public init(role: Role, sessionID: [UInt8], ephemeralKey: X25519PrivateKey, nonce: [UInt8], local: LocalPairingInfo) throws(WireError) {
        guard sessionID.count == 8 else { throw .malformed("session id length") }
        guard nonce.count == 16 else { throw .malformed("nonce length") }
        self.role = role
        self.sessionID = sessionID
        self.ephemeral = ephemeralKey
        self.nonce = nonce
        self.local = local
        self.phase = role == .initiator ? .idle : .awaitingCommit
    }

    public var isFinished: Bool { phase == .done || phase == .failed }

    static func commitment(publicKey: [UInt8], nonce: [UInt8]) -> [UInt8] {
        SHA256.hash("baton/v1 commit".utf8Bytes + publicKey + nonce)
    }

    /// The SAS of a transcript hash: u32be(H[0..<4]) mod 10⁶, six digits.
    public static func shortAuthenticationString(transcriptHash h: [UInt8]) -> String {
        let value = h.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % 1_000_000
        let digits = String(value)
        return String(repeating: "0", count: 6 - digits.count) + digits
    }

    /// The second code of a transcript hash: u32be(H[4..<8]) mod 10⁶, six digits (§7.1).
    public static func confirmationCode(transcriptHash h: [UInt8]) -> String {
        shortAuthenticationString(transcriptHash: Array(h.dropFirst(4)))
    }

    /// Initiator only: the first frame.
    public mutating func start(nowSeconds: Int64) -> [Action] {
        guard role == .initiator, phase == .idle else { return [] }
        deadline = nowSeconds + Self.timeoutSeconds
        commitment = Self.commitment(publicKey: ephemeral.publicKey, nonce: nonce)
        phase = .awaitingHello
        return [.send(Frame(type: .pairCommit, requestID: 0, payload: [Protocol.version] + sessionID + commitment))]
    }

    public mutating func tick(nowSeconds: Int64) -> [Action] {
        guard !isFinished, let deadline, nowSeconds >= deadline else { return [] }
        return fail(.timedOut, tellPeer: true)
    }

    /// The user's answer to the code.
    public mutating func userConfirmed(_ accepted: Bool) -> [Action] {
        guard phase == .confirming, !localConfirmed else { return [] }
        var actions = sendSealed(["msg": .string("confirm"), "accepted": .boolean(accepted)])
        guard accepted else {
            phase = .failed
            return actions + [.failed(.rejected)]
        }
        localConfirmed = true
        if peerConfirmed { actions += sendIdentityAndRoster() }
        return actions
    }

    public mutating func receive(_ frame: Frame, nowSeconds: Int64) -> [Action] {
        guard !isFinished else { return [] }
        if deadline == nil { deadline = nowSeconds + Self.timeoutSeconds }
        do throws(WireError) {
            return try handle(frame)
        } catch {
            return fail(error, tellPeer: frame.type != .error)
        }
    }

    private mutating func handle(_ frame: Frame) throws(WireError) -> [Action] {
        switch (frame.type, phase) {
        case (.error, _):
            let error = try ErrorFrame(payload: frame.payload)
            // The peer refused us as a removed device: say so, not just "rejected" (§7.2).
            if error.code == .notPermitted, error.message == "peerRemoved" { throw .peerRemoved }
            throw error.code == .notPermitted ? .rejected : (error.code == .timedOut ? .timedOut : .unexpectedMessage("peer error \(error.code)"))
        case (.pairCommit, .awaitingCommit):
            var reader = ByteReader(frame.payload)
            let version = try reader.readByte()
            guard version == Protocol.version else { throw .unsupportedVersion(version) }
            guard try reader.readBytes(8) == sessionID else { throw .malformed("session id") }
            commitment = try reader.readBytes(32)
            try reader.expectEnd()
            phase = .awaitingReveal
            return [.send(Frame(type: .pairHello, requestID: 0, payload: ephemeral.publicKey + nonce))]
        case (.pairHello, .awaitingHello):
            (peerPublic, peerNonce) = try Self.keyAndNonce(frame.payload)
            try deriveKeys(initiatorKey: ephemeral.publicKey, initiatorNonce: nonce, responderKey: peerPublic, responderNonce: peerNonce)
            phase = .confirming
            return [.send(Frame(type: .pairReveal, requestID: 0, payload: ephemeral.publicKey + nonce)), .showCode(code ?? "")]
        case (.pairReveal, .awaitingReveal):
            (peerPublic, peerNonce) = try Self.keyAndNonce(frame.payload)
            guard constantTimeEquals(Self.commitment(publicKey: peerPublic, nonce: peerNonce), commitment) else { throw .commitMismatch }
            try deriveKeys(initiatorKey: peerPublic, initiatorNonce: peerNonce, responderKey: ephemeral.publicKey, responderNonce: nonce)
            phase = .confirming
            return [.showCode(code ?? "")]
        case (.pairSealed, .confirming), (.pairSealed, .exchanging):
            return try handleSealed(try openSealed(frame.payload))
        default:
            throw .unexpectedMessage("\(frame.type) now")
        }
    }

    private static func keyAndNonce(_ payload: [UInt8]) throws(WireError) -> ([UInt8], [UInt8]) {
        var reader = ByteReader(payload)
        let key = try reader.readBytes(32)
        let nonce = try reader.readBytes(16)
        try reader.expectEnd()
        return (key, nonce)
    }

    private mutating func deriveKeys(initiatorKey: [UInt8], initiatorNonce: [UInt8], responderKey: [UInt8], responderNonce: [UInt8]) throws(WireError) {
        transcript = SHA256.hash("baton/v1 pair".utf8Bytes + sessionID + commitment + initiatorKey + initiatorNonce + responderKey + responderNonce)
        code = Self.shortAuthenticationString(transcriptHash: transcript)
        secondCode = Self.confirmationCode(transcriptHash: transcript)
        let shared: [UInt8]
        do { shared = try ephemeral.sharedSecret(with: peerPublic) } catch { throw .weakKey }
        guard let keys = try? HKDF.deriveKey(ikm: shared, salt: transcript, info: "baton/v1 pair keys".utf8Bytes, count: 64),
              let initiatorToResponder = try? AESGCMKey(Array(keys[0..<32])),
              let responderToInitiator = try? AESGCMKey(Array(keys[32..<64])) else { throw .weakKey }
        sendKey = role == .initiator ? initiatorToResponder : responderToInitiator
        receiveKey = role == .initiator ? responderToInitiator : initiatorToResponder
    }

    private var sealedAAD: [UInt8] { "baton/v1 sealed".utf8Bytes + transcript }

    static func sealedNonce(_ counter: UInt64) -> [UInt8] {
        var nonce: [UInt8] = [0, 0, 0, 0]
        nonce.appendBigEndian(counter)
        return nonce
    }

    private mutating func sendSealed(_ message: [String: PropertyValue]) -> [Action] {
        guard let sendKey,
              let plaintext = try? PropertyValueCodec.encode(.dictionary(message), limit: Self.maxSealedPlaintext),
              let sealed = try? AESGCM.seal(key: sendKey, nonce: Self.sealedNonce(sendCounter), plaintext: plaintext, aad: sealedAAD) else {
            return fail(.malformed("cannot seal"), tellPeer: true)
        }
        var payload: [UInt8] = []
        payload.appendBigEndian(sendCounter)
        payload += sealed.ciphertext + sealed.tag
        sendCounter += 1
        return [.send(Frame(type: .pairSealed, requestID: 0, payload: payload))]
    }

    private mutating func openSealed(_ payload: [UInt8]) throws(WireError) -> [String: PropertyValue] {
        var reader = ByteReader(payload)
        let counter = try reader.readUInt64()
        guard counter == receiveCounter else { throw .replayedSequence }
        guard reader.remaining >= 16, let receiveKey else { throw .truncated }
        let body = try reader.readBytes(reader.remaining)
        let plaintext: [UInt8]
        do {
            plaintext = try AESGCM.open(key: receiveKey, nonce: Self.sealedNonce(counter), ciphertext: Array(body.dropLast(16)),
                                        tag: Array(body.suffix(16)), aad: sealedAAD)
        } catch { throw .authenticationFailed }
        receiveCounter += 1
        guard let message = try PropertyValueCodec.decode(plaintext, limit: Self.maxSealedPlaintext).dictionaryValue else {
            throw .malformed("sealed message")
        }
        return message
    }

    private mutating func handleSealed(_ message: [String: PropertyValue]) throws(WireError) -> [Action] {
        switch message["msg"]?.stringValue {
        case "confirm":
            guard phase == .confirming, !peerConfirmed, let accepted = message["accepted"]?.boolValue else { throw .unexpectedMessage("confirm") }
            guard accepted else { throw .rejected }
            peerConfirmed = true
            return localConfirmed ? sendIdentityAndRoster() : []
        case "identity":
            guard phase == .exchanging, peer == nil else { throw .unexpectedMessage("identity") }
            guard let name = message["name"]?.stringValue, let key = message["identityKey"]?.bytesValue,
                  let signature = message["signature"]?.bytesValue else {
                throw .malformed("identity")
            }
            var endpoints: [String] = []
            if let list = message["endpoints"] {
                guard let items = list.arrayValue else { throw .malformed("endpoints") }
                for item in items {
                    guard let text = item.stringValue else { throw .malformed("endpoint") }
                    endpoints.append(text)
                }
                try PairingEndpoints.validate(endpoints)
            }
            guard key.count == 32, name.utf8.count <= RosterMember.maxNameBytes else { throw .malformed("identity") }
            let member = (name: name, identityKey: key)
            // Signed by the peer in the peer's role: our own identity reflected back does not verify.
            let peerRole: Role = role == .initiator ? .responder : .initiator
            guard key != local.identityKey.publicKey,
                  Ed25519.isValidSignature(signature, for: identitySigningInput(name: name, identityKey: key, signer: peerRole),
                                           publicKey: key) else {
                throw .badSignature
            }
            // A device this ring removed learns nothing of it: refused before our roster goes out (§7.2).
            guard !local.roster.isOut(DeviceID(identityKey: key)) else { throw .peerRemoved }
            peer = member
            peerEndpoints = endpoints
            return sendRoster() + finishIfComplete()
        case "roster":
            guard phase == .exchanging, peer != nil, peerRoster == nil else { throw .unexpectedMessage("roster") }
            guard let bytes = try peerRosterParts.add(message) else { return [] }
            let roster = try Roster(decoding: bytes)
            // The roster lists its sender (§7.3): that signed entry must be the identity just checked.
            guard let peer, let entry = roster.members[DeviceID(identityKey: peer.identityKey)], entry.name == peer.name else {
                throw .malformed("roster sender entry")
            }
            peerRoster = roster
            return finishIfComplete()
        default:
            throw .unexpectedMessage("sealed message kind")
        }
    }

    /// "baton/v1 identity" || role of the signer (1 initiator, 2 responder) || H || name || key. No
    /// secret: the identity goes out before the peer is checked, so it must reveal nothing of the ring.
    private func identitySigningInput(name: String, identityKey: [UInt8], signer: Role) -> [UInt8] {
        "baton/v1 identity".utf8Bytes + [signer == .initiator ? 1 : 2] + transcript + Array(name.utf8) + identityKey
    }

    private mutating func sendIdentityAndRoster() -> [Action] {
        phase = .exchanging
        let key = local.identityKey.publicKey
        guard let signature = try? local.identityKey.signature(
            for: identitySigningInput(name: local.name, identityKey: key, signer: role)) else {
            return fail(.malformed("local identity"), tellPeer: true)
        }
        var message: [String: PropertyValue] = [
            "msg": .string("identity"), "name": .string(local.name), "identityKey": .bytes(key), "signature": .bytes(signature),
        ]
        // Hints only, so an invalid local list is left out rather than failing the pairing.
        if !local.endpoints.isEmpty, (try? PairingEndpoints.validate(local.endpoints)) != nil {
            message["endpoints"] = .array(local.endpoints.map { .string($0) })
        }
        return sendSealed(message) + sendRoster() + finishIfComplete()
    }

    /// Message 3 goes out only once our identity is sent and the peer's identity was checked.
    private mutating func sendRoster() -> [Action] {
        guard phase == .exchanging, sendCounter >= 2, peer != nil, !rosterSent else { return [] }
        guard let roster = try? local.roster.encoded() else { return fail(.malformed("local roster"), tellPeer: true) }
        rosterSent = true
        var actions: [Action] = []
        for message in RosterChunks.messages(for: roster) {
            let sent = sendSealed(message)
            actions += sent
            guard case .send? = sent.first else { break }
        }
        return actions
    }

    private mutating func finishIfComplete() -> [Action] {
        guard phase == .exchanging, rosterSent, let peer, let peerRoster,
              let entry = peerRoster.members[DeviceID(identityKey: peer.identityKey)] else { return [] }
        phase = .done
        return [.completed(PairingResult(peer: entry, peerRoster: peerRoster, peerEndpoints: peerEndpoints))]
    }

    /// The Error frame that tells the peer why pairing ended (§7.2 "Failures"): the code by the
    /// table there, the message the failure's name, so both users learn the same cause.
    static func errorFrame(for error: WireError) -> ErrorFrame {
        switch error {
        case .timedOut: ErrorFrame(code: .timedOut, message: "timedOut")
        case .rejected: ErrorFrame(code: .notPermitted, message: "rejected")
        case .unsupportedVersion: ErrorFrame(code: .unsupportedVersion, message: "unsupportedVersion")
        case .payloadTooLarge: ErrorFrame(code: .payloadTooLarge, message: "payloadTooLarge")
        case .commitMismatch: ErrorFrame(code: .malformed, message: "commitMismatch")
        case .weakKey: ErrorFrame(code: .malformed, message: "weakKey")
        case .badSignature: ErrorFrame(code: .malformed, message: "badSignature")
        case .authenticationFailed: ErrorFrame(code: .malformed, message: "authenticationFailed")
        case .replayedSequence: ErrorFrame(code: .malformed, message: "replayedSequence")
        case .unexpectedMessage: ErrorFrame(code: .malformed, message: "unexpectedMessage")
        case .peerRemoved: ErrorFrame(code: .notPermitted, message: "peerRemoved")
        default: ErrorFrame(code: .malformed, message: "malformed")
        }
    }

    private mutating func fail(_ error: WireError, tellPeer: Bool) -> [Action] {
        phase = .failed
        var actions: [Action] = []
        if tellPeer {
            actions.append(.send(Frame(type: .error, requestID: 0, payload: Self.errorFrame(for: error).payload)))
        }
        return actions + [.failed(error)]
    }
}
