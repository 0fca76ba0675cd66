// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// Why a pairing session failed, with the names PairingSession1.Error and bt-pair use.
public enum PairingFailureReason: String, Hashable, Sendable, CaseIterable {
    /// The user (here or on the peer) refused the code, or the session was cancelled.
    case rejected
    case timedOut = "timed-out"
    /// Commitment, seal or signature did not verify: possibly a man in the middle.
    case verificationFailed = "verification-failed"
    case transport
    case protocolError = "protocol"
    /// The peer is a device this ring removed: refused before any of the ring was sent (§7.2).
    case peerRemoved = "peer-removed"
    /// A second initiator reached the acceptor during the session: treated as an attack, nothing joined.
    case contested

    /// The reason a `PairingSession` failure gives.
    public init(_ error: WireError) {
        switch error {
        case .rejected: self = .rejected
        case .timedOut: self = .timedOut
        case .commitMismatch, .authenticationFailed, .badSignature, .weakKey, .replayedSequence: self = .verificationFailed
        case .peerRemoved: self = .peerRemoved
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
    case reviewing(peerMembers: [ReviewedMember])
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

    /// The code as PairingSession1.Code shows it: only the acceptor shows it. The initiator's user
    /// must type what the acceptor shows (ConfirmCode), so the code is never on the initiator's
    /// screen for a reflex to copy.
    public var visibleCode: String { role == .responder ? shownCode : "" }

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
    public mutating func codeShown(_ code: String) -> Bool {
        guard move(to: .confirming(code: code), from: { $0 == .connected }) else { return false }
        shownCode = code
        return true
    }

    /// The rosters are exchanged; `peerMembers` wait for the user's Commit.
    @discardableResult
    public mutating func reviewing(_ peerMembers: [ReviewedMember]) -> Bool {
        move(to: .reviewing(peerMembers: peerMembers), from: { phase in
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
        guard case .reviewing(let members) = phase else { return [] }
        return members.map { "\($0.name) (\($0.deviceID.shortForm))" }
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
