// SPDX-License-Identifier: LGPL-2.1-or-later
/// Who may edit each document, and which revision this machine holds (§6.6). Pure: the daemon
/// persists the book (with `AppliedClaims`) after every change that returns, before it answers.
///
/// Revisions of one document form one line because only the session's owner saves: it counts its
/// commits; a claimer takes the owner's revision. So "the other copy changed meanwhile" is always
/// visible as a revision that is not the one expected, and is refused instead of overwritten.

/// Who owns a document's edit session, as this machine knows it.
public enum EditSessionOwner: Hashable, Sendable, Codable {
    case thisMachine
    case peer(DeviceID)
}

/// One document as this machine holds it.
public struct DocumentLedger: Hashable, Sendable, Codable {
    public var documentID: String
    public var current: DocumentRevision
    public var owner: EditSessionOwner
}

public enum EditSessionError: Error, Hashable, Sendable {
    /// This machine does not own the session (it was released to, or is held by, `owner`).
    case notOwner(EditSessionOwner)
    /// This machine has no copy of the document.
    case unknownDocument
    /// The revision check failed: this copy is at `local`, the change expected `expected`.
    case conflict(local: UInt64, expected: UInt64)
    /// The book holds its limit of documents.
    case tooManyDocuments(limit: Int)
    /// 2⁶⁴−1 commits: the document cannot be saved again.
    case revisionExhausted
    /// A digest that is not 32 bytes.
    case invalidDigest
}

/// What importing a granted revision did (§6.6 receiver rules).
public enum DocumentImport: Hashable, Sendable {
    /// The first copy of this document on this machine.
    case imported
    /// This machine's copy moved from the base revision to the granted one.
    case updated
    /// This revision was imported before (a replayed grant): nothing changed.
    case alreadyApplied
}

public struct EditSessionBook: Hashable, Sendable, Codable {
    public static let defaultDocumentLimit = 256

    public private(set) var ledgers: [String: DocumentLedger] = [:]
    public let documentLimit: Int

    public init(documentLimit: Int = EditSessionBook.defaultDocumentLimit) {
        self.documentLimit = max(1, documentLimit)
    }

    public func ledger(_ documentID: String) -> DocumentLedger? { ledgers[documentID] }

    public func owner(of documentID: String) -> EditSessionOwner? { ledgers[documentID]?.owner }

    /// The local app committed a snapshot with `digest`. Only the owner saves; a new document starts
    /// at revision 1 owned here. The same digest again is no new revision.
    @discardableResult
    public mutating func commitLocal(_ documentID: String, digest: [UInt8]) throws(EditSessionError) -> DocumentRevision {
        guard let ledger = ledgers[documentID] else {
            try ensureRoom()
            let first = try Self.revision(1, digest)
            ledgers[documentID] = DocumentLedger(documentID: documentID, current: first, owner: .thisMachine)
            return first
        }
        guard ledger.owner == .thisMachine else { throw .notOwner(ledger.owner) }
        guard ledger.current.digest != digest else { return ledger.current }
        guard ledger.current.revision < .max else { throw .revisionExhausted }
        let next = try Self.revision(ledger.current.revision + 1, digest)
        ledgers[documentID]?.current = next
        return next
    }

    /// Whether `peer` may take the session now (checked before the owner asks its app to save).
    public func checkRelease(_ claim: EditSessionClaim, to peer: DeviceID) throws(EditSessionError) {
        guard let ledger = ledgers[claim.documentID] else { throw .unknownDocument }
        switch ledger.owner {
        case .thisMachine: break
        case .peer(let holder) where holder == peer: break
        case .peer: throw .notOwner(ledger.owner)
        }
        // A claimer ahead of the owner holds a revision the owner never made.
        guard claim.baseRevision <= ledger.current.revision else {
            throw .conflict(local: ledger.current.revision, expected: claim.baseRevision)
        }
    }

    /// Releases the session to `peer` at the current (just saved) revision. A peer that already
    /// holds it is granted the same revision again.
    public mutating func release(_ claim: EditSessionClaim, to peer: DeviceID) throws(EditSessionError) -> DocumentRevision {
        try checkRelease(claim, to: peer)
        ledgers[claim.documentID]?.owner = .peer(peer)
        return ledgers[claim.documentID]!.current
    }

    /// The claimer's side: the owner granted `granted` to a claim made when this copy was at `base`.
    /// Applied once: the same revision again is `alreadyApplied`; a copy that changed since the
    /// claim, or a grant older than it, is a conflict and this copy is kept.
    @discardableResult
    public mutating func importGranted(_ documentID: String, base: UInt64, granted: DocumentRevision,
                                       from peer: DeviceID) throws(EditSessionError) -> DocumentImport {
        guard let ledger = ledgers[documentID] else {
            guard base == 0 else { throw .conflict(local: 0, expected: base) }
            try ensureRoom()
            ledgers[documentID] = DocumentLedger(documentID: documentID, current: granted, owner: .thisMachine)
            return .imported
        }
        if ledger.current == granted {
            ledgers[documentID]?.owner = .thisMachine
            return .alreadyApplied
        }
        guard ledger.current.revision == base, granted.revision > base else {
            throw .conflict(local: ledger.current.revision, expected: base)
        }
        // Owning it here means this copy may have been edited since: never overwrite that.
        guard ledger.owner != .thisMachine else { throw .conflict(local: ledger.current.revision, expected: base) }
        ledgers[documentID] = DocumentLedger(documentID: documentID, current: granted, owner: .thisMachine)
        return .updated
    }

    /// Drops a document this machine owns (its activity ended); a released one stays, so its
    /// owner stays known.
    public mutating func forget(_ documentID: String) throws(EditSessionError) {
        guard let ledger = ledgers[documentID] else { return }
        guard ledger.owner == .thisMachine else { throw .notOwner(ledger.owner) }
        ledgers[documentID] = nil
    }

    /// Drops a document's record whoever owns it: the daemon evicts records no activity refers to,
    /// so that the limit cannot be held forever.
    public mutating func evict(_ documentID: String) { ledgers[documentID] = nil }

    private func ensureRoom() throws(EditSessionError) {
        guard ledgers.count < documentLimit else { throw .tooManyDocuments(limit: documentLimit) }
    }

    private static func revision(_ number: UInt64, _ digest: [UInt8]) throws(EditSessionError) -> DocumentRevision {
        do { return try DocumentRevision(revision: number, digest: digest) } catch { throw .invalidDigest }
    }
}
