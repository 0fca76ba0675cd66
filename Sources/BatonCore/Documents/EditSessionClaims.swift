// SPDX-License-Identifier: LGPL-2.1-or-later
import BatonCrypto

/// The two journals of §6.6, as pure values: the owner's applied claims (answered at most once,
/// kept durably with the book) and the claimer's pending claims (replayed with the same request id).

/// The owner's record of grants it made, per (peer, request id), with a digest of the request and
/// the grant sent. A replayed claim gets the stored grant and releases nothing again; the same id
/// with another payload is malformed. Bounded: the oldest entry goes first.
public struct AppliedClaims: Hashable, Sendable, Codable {
    public static let defaultCapacity = 256

    public struct Entry: Hashable, Sendable, Codable {
        public var peer: DeviceID
        public var requestID: UInt32
        public var requestDigest: [UInt8]
        public var grant: EditSessionGrant
    }

    public enum Lookup: Hashable, Sendable {
        case fresh
        case replay(EditSessionGrant)
        case mismatch
    }

    public private(set) var entries: [Entry] = []
    public let capacity: Int

    public init(capacity: Int = AppliedClaims.defaultCapacity) { self.capacity = max(1, capacity) }

    public static func digest(of request: Frame) -> [UInt8] { SHA256.hash([request.type.rawValue] + request.payload) }

    public func lookup(_ request: Frame, from peer: DeviceID) -> Lookup {
        guard let entry = entries.last(where: { $0.peer == peer && $0.requestID == request.requestID }) else { return .fresh }
        return entry.requestDigest == Self.digest(of: request) ? .replay(entry.grant) : .mismatch
    }

    public mutating func record(_ request: Frame, from peer: DeviceID, grant: EditSessionGrant) {
        entries.removeAll { $0.peer == peer && $0.requestID == request.requestID }
        entries.append(Entry(peer: peer, requestID: request.requestID, requestDigest: Self.digest(of: request), grant: grant))
        if entries.count > capacity { entries.removeFirst(entries.count - capacity) }
    }
}

/// A claim sent and not yet settled: kept durably by the claimer until the granted snapshot is
/// imported (or the claim is refused), so a lost answer is asked again with the same request id.
public struct PendingClaim: Hashable, Sendable, Codable, Identifiable {
    public var requestID: UInt32
    public var peer: DeviceID
    public var claim: EditSessionClaim
    /// What a replay needs to fetch the granted snapshot by itself: the activity type (its type
    /// hash is keyed with the owner's secret, which can change, so it is recomputed, not stored)
    /// and the user whose inbox receives it. Absent (nil) in entries journalled before they were
    /// kept: such a claim waits for the next Continue of its document.
    public var activityType: String?
    public var uid: UInt32?

    public init(requestID: UInt32, peer: DeviceID, claim: EditSessionClaim, activityType: String? = nil, uid: UInt32? = nil) {
        self.requestID = requestID
        self.peer = peer
        self.claim = claim
        self.activityType = activityType
        self.uid = uid
    }

    /// One pending claim per document.
    public var id: String { claim.documentID }

    public var frame: Frame { Frame(type: .claimEditSession, requestID: requestID, payload: claim.payload) }
}

/// The claimer's rule (§6.6): while a claim for a document is pending, no other claim for it is
/// sent and no other revision of it is accepted; the pending one is sent again, unchanged, first.
public struct ClaimQueue: Hashable, Sendable, Codable {
    public static let defaultCapacity = 64

    public enum Start: Hashable, Sendable {
        /// A new claim: journal it, then send it.
        case send(PendingClaim)
        /// An earlier claim for this document is still pending: send it again, unchanged.
        case replay(PendingClaim)
    }

    public private(set) var pending: [PendingClaim] = []
    public let capacity: Int

    public init(capacity: Int = ClaimQueue.defaultCapacity, pending: [PendingClaim] = []) {
        self.capacity = max(1, capacity)
        self.pending = pending
    }

    public enum Refusal: Error, Hashable, Sendable {
        /// As many claims pending as the journal holds.
        case full(limit: Int)
        /// The pending claim for this document went to another machine.
        case pendingElsewhere(PendingClaim)
    }

    /// Starts a claim of `claim` from `peer` with a fresh `requestID`, unless one is pending.
    /// `activityType` and `uid` are journalled with it for a replay's own fetch.
    public mutating func start(_ claim: EditSessionClaim, from peer: DeviceID, requestID: UInt32,
                               activityType: String? = nil, uid: UInt32? = nil) throws(Refusal) -> Start {
        if let earlier = pending.first(where: { $0.claim.documentID == claim.documentID }) {
            guard earlier.peer == peer else { throw .pendingElsewhere(earlier) }
            return .replay(earlier)
        }
        guard pending.count < capacity else { throw .full(limit: capacity) }
        let new = PendingClaim(requestID: requestID, peer: peer, claim: claim, activityType: activityType, uid: uid)
        pending.append(new)
        return .send(new)
    }

    /// Claims to send again, oldest first, when a connection to `peer` opens.
    public func replays(for peer: DeviceID) -> [PendingClaim] { pending.filter { $0.peer == peer } }

    /// Whether a grant answering `requestID` for `documentID` may be imported: only the pending
    /// claim's own answer, never a newer version while it is outstanding.
    public func mayImport(_ documentID: String, answering requestID: UInt32, from peer: DeviceID) -> Bool {
        pending.contains { $0.claim.documentID == documentID && $0.requestID == requestID && $0.peer == peer }
    }

    /// The claim is settled (its grant imported, or refused): it leaves the journal.
    public mutating func settle(_ documentID: String) { pending.removeAll { $0.claim.documentID == documentID } }
}
