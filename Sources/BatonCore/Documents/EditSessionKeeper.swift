// SPDX-License-Identifier: LGPL-2.1-or-later
/// The owner's side of ClaimEditSession (§6.6) as a state machine: screen the request (a replay
/// gets its stored grant, a refusal its error), let the adapter ask the app to save, then release
/// and record the grant. The adapter persists `book` and `applied` together (one record) before it
/// sends the grant, so a crash either released and remembered, or did neither.
public struct EditSessionKeeper: Hashable, Sendable, Codable {
    public var book: EditSessionBook
    public var applied: AppliedClaims

    public init(book: EditSessionBook = EditSessionBook(), applied: AppliedClaims = AppliedClaims()) {
        self.book = book
        self.applied = applied
    }

    public enum Screening: Hashable, Sendable {
        /// Send this frame and change nothing (a replayed grant, or an error).
        case answer(Frame)
        /// Ask the app to save this document, then call `grant`.
        case save(EditSessionClaim)
    }

    public func screen(_ request: Frame, from peer: DeviceID) -> Screening {
        switch applied.lookup(request, from: peer) {
        case .replay(let grant): return .answer(Frame(type: .editSessionGrant, requestID: request.requestID, payload: grant.payload))
        case .mismatch: return .answer(Self.error(request, ErrorFrame(code: .malformed, message: "request id reused")))
        case .fresh: break
        }
        let claim: EditSessionClaim
        do { claim = try EditSessionClaim(payload: request.payload) } catch { return .answer(Self.error(request, ErrorFrame(error))) }
        do { try book.checkRelease(claim, to: peer) } catch { return .answer(Self.error(request, Self.errorFrame(error))) }
        return .save(claim)
    }

    /// After the save: `savedDigest` is the snapshot the app saved (nil: it did not answer in
    /// time). Without a save the session is not released: `Error(sessionBusy)`, nothing changes.
    public mutating func grant(_ request: Frame, claim: EditSessionClaim, from peer: DeviceID, savedDigest: [UInt8]?) -> Frame {
        var next = book
        do {
            // Already released to this peer (it lost the earlier answer and its journal entry):
            // the same revision again; nothing is saved here, this machine no longer edits it.
            if next.owner(of: claim.documentID) != .peer(peer) {
                guard let savedDigest else {
                    return Self.error(request, ErrorFrame(code: .sessionBusy, message: "the owner did not save in time"))
                }
                try next.commitLocal(claim.documentID, digest: savedDigest)
            }
            let grant = EditSessionGrant(granted: try next.release(claim, to: peer))
            book = next
            applied.record(request, from: peer, grant: grant)
            return Frame(type: .editSessionGrant, requestID: request.requestID, payload: grant.payload)
        } catch {
            return Self.error(request, Self.errorFrame(error))
        }
    }

    /// Whether `grant` needs the app's save for this claim (not when the peer holds it already).
    public func needsSave(_ claim: EditSessionClaim, from peer: DeviceID) -> Bool {
        book.owner(of: claim.documentID) != .peer(peer)
    }

    public static func errorFrame(_ error: EditSessionError) -> ErrorFrame {
        switch error {
        case .unknownDocument: ErrorFrame(code: .unknownActivity, message: "no such document")
        case .notOwner: ErrorFrame(code: .sessionBusy, message: "the session is held by another machine")
        case .conflict: ErrorFrame(code: .documentConflict, message: "the copies diverged")
        case .tooManyDocuments, .revisionExhausted, .invalidDigest: ErrorFrame(code: .internalError, message: "cannot save the document")
        }
    }

    private static func error(_ request: Frame, _ error: ErrorFrame) -> Frame {
        Frame(type: .error, requestID: request.requestID, payload: error.payload)
    }
}
