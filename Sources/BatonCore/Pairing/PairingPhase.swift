// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// Why a pairing session failed, with the names PairingSession1.Error and bt-pair use.
public enum PairingFailureReason: String, Hashable, Sendable, CaseIterable {
    /// The user (here or on the peer) refused the code, or the session was cancelled.
    case rejected
    case timedOut = "timed-out"
    /// A typed code differs from this side's, or commitment, seal or signature did not verify: the
    /// other machine may not be the one meant (a mistyped code, or a man in the middle).
    case verificationFailed = "verification-failed"
    case transport
    case protocolError = "protocol"
    /// The peer is a device this ring removed: refused before any of the ring was sent (§7.2).
    case peerRemoved = "peer-removed"
    /// A second initiator reached the acceptor during the session: treated as an attack, nothing joined.
    case contested
    /// Both sides agreed, but this machine could not save the ring record with the new member (a
    /// full disk, a state directory batond cannot write): nothing joined here (§7.3).
    case notSaved = "not-saved"
    /// This ring changed between the review and the Commit (a member's RingSync) so that the commit
    /// would no longer make exactly the changes shown: nothing joined here (§7.2 "What the users do").
    case ringChanged = "ring-changed"

    /// The reason a `PairingSession` failure gives.
    public init(_ error: WireError) {
        switch error {
        case .rejected: self = .rejected
        case .timedOut: self = .timedOut
        case .commitMismatch, .authenticationFailed, .badSignature, .weakKey, .replayedSequence: self = .verificationFailed
        case .peerRemoved: self = .peerRemoved
        case .malformed("ring not saved"): self = .notSaved
        case .malformed("ring changed since review"): self = .ringChanged
        default: self = .protocolError
        }
    }
}

/// Where a pairing session is; each phase carries what it knows, nothing else.
public enum PairingPhase: Hashable, Sendable {
    /// An acceptor waits for its initiator on `port` (0: no TCP listener).
    case waiting(port: UInt16, sessionID: [UInt8])
    case connected
    /// The code is shown; the user's answer is awaited.
    case confirming(code: String)
    /// Keys and rosters exchanged: the members the peer brings are shown, and the user's final
    /// Commit (or Cancel, or the timeout: a refusal) decides whether they are merged here.
    /// `review` is what the commit would change here (members joining, removed, re-keyed).
    case reviewing(PairingReview)
    case paired(peerName: String, peerID: DeviceID)
    case failed(PairingFailureReason)

    /// PairingSession1.State.
    public var stateName: String {
        switch self {
        case .waiting: "waiting"
        case .connected: "connected"
        case .confirming: "confirming"
        case .reviewing: "reviewing"
        case .paired: "paired"
        case .failed: "failed"
        }
    }

    public var isWaiting: Bool { if case .waiting = self { true } else { false } }

    public var isFinished: Bool {
        switch self {
        case .paired, .failed: true
        case .waiting, .connected, .confirming, .reviewing: false
        }
    }
}

extension PairingSession.Role {
    /// PairingSession1.Role.
    public var name: String { self == .initiator ? "initiator" : "responder" }
}

/// One pairing session as D-Bus shows it: fixed facts and the phase. Transitions only go
/// forward (waiting → connected → confirming → paired), any unfinished phase may fail, and a
/// finished session stays as it finished: a late transport error cannot overwrite a refusal.
public struct PairingProgress: Hashable, Sendable {
    public let role: PairingSession.Role
    public let sessionID: [UInt8]
    /// The TCP listener's port for an acceptor; 0 for an initiator. Shown for the session's life.
    public let port: UInt16
    public private(set) var phase: PairingPhase
    /// The code once computed; still kept after the session finished.
    public private(set) var shownCode = ""

    /// The second code (§7.1 "What the users do"): the initiator shows it once its user typed the
    /// acceptor's code correctly; the acceptor's user types it.
    public private(set) var secondCode = ""
    /// This side's user typed the code the other screen shows, and it matched.
    public private(set) var codeTypedHere = false

    /// The code as PairingSession1.Code shows it. The acceptor shows the first code from the
    /// moment both keys are known; the initiator shows nothing until its user typed that code
    /// correctly (so a reflex cannot copy it), and then the second code, for the acceptor's user to
    /// type. Each screen thus shows only what the other person must type.
    public var visibleCode: String {
        switch role {
        case .responder: shownCode
        case .initiator: codeTypedHere ? secondCode : ""
        }
    }

    /// An acceptor keeps its pairing advert, its DNS-SD record and its listeners (and any second
    /// initiator fails the session, `contested`) until its own user typed the initiator's code:
    /// only then does it know which machine it is talking to.
    public var wantsInitiators: Bool { role == .responder && !phase.isFinished && !codeTypedHere }

    /// An acceptor starts waiting; an initiator starts connected.
    public init(role: PairingSession.Role, sessionID: [UInt8], listeningPort: UInt16?) {
        self.role = role
        self.sessionID = sessionID
        self.port = listeningPort ?? 0
        phase = listeningPort.map { .waiting(port: $0, sessionID: sessionID) } ?? .connected
    }

    /// The initiator arrived. Returns false when the phase did not change.
    @discardableResult
    public mutating func connected() -> Bool { move(to: .connected, from: { $0.isWaiting }) }

    @discardableResult
    public mutating func codeShown(_ code: String, second: String = "") -> Bool {
        guard move(to: .confirming(code: code), from: { $0 == .connected }) else { return false }
        shownCode = code
        secondCode = second
        return true
    }

    /// This side's user typed the other screen's code and it matched (compared by the caller in
    /// constant time). Only while confirming, once. Returns false when nothing changed.
    @discardableResult
    public mutating func typedCodeMatched() -> Bool {
        guard case .confirming = phase, !codeTypedHere else { return false }
        codeTypedHere = true
        return true
    }

    /// The rosters are exchanged; what merging the peer's would change waits for the user's Commit.
    @discardableResult
    public mutating func reviewing(_ review: PairingReview) -> Bool {
        move(to: .reviewing(review), from: { phase in
            if case .confirming = phase { true } else { phase == .connected }
        })
    }

    @discardableResult
    public mutating func paired(peerName: String, peerID: DeviceID) -> Bool {
        move(to: .paired(peerName: peerName, peerID: peerID), from: { phase in
            switch phase {
            case .confirming, .reviewing, .connected: true
            default: false
            }
        })
    }

    /// The members shown while reviewing (PairingSession1.PeerMembers), "name (xxxx-xxxx)" each.
    public var peerMemberLines: [String] {
        guard case .reviewing(let review) = phase else { return [] }
        return review.joining.map { "\($0.name) (\($0.deviceID.shortForm))" }
    }

    /// What the commit would change here while reviewing; empty otherwise.
    public var review: PairingReview {
        guard case .reviewing(let review) = phase else { return PairingReview() }
        return review
    }

    @discardableResult
    public mutating func failed(_ reason: PairingFailureReason) -> Bool {
        move(to: .failed(reason), from: { !$0.isFinished })
    }

    private mutating func move(to next: PairingPhase, from allowed: (PairingPhase) -> Bool) -> Bool {
        guard allowed(phase) else { return false }
        phase = next
        return true
    }

    /// PairingSession1's string properties by name (Port is the `q` property `port`).
    public var textProperties: [String: String] {
        var peerName = "", peerID = "", error = ""
        switch phase {
        case .paired(let name, let id): peerName = name; peerID = id.description
        case .failed(let reason): error = reason.rawValue
        case .waiting, .connected, .confirming, .reviewing: break
        }
        return ["State": phase.stateName, "Role": role.name, "Code": visibleCode, "PeerName": peerName, "PeerId": peerID,
                "Error": error, "SessionId": sessionID.hexString]
    }
}

/// One member the peer's roster brings, shown before it is merged.
public struct ReviewedMember: Hashable, Sendable {
    public var name: String
    public var deviceID: DeviceID

    public init(name: String, deviceID: DeviceID) {
        self.name = name
        self.deviceID = deviceID
    }
}
