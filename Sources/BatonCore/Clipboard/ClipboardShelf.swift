// SPDX-License-Identifier: LGPL-2.1-or-later
/// The source's side of the clipboard (§9.5): the one copy this device offers, the kind its advert
/// carries, when it expires, and the answers to the two clipboard requests. Pure: the time and the
/// random offer id come in; the bytes stay with the agent of the account that copied them.
public struct ClipboardShelf: Sendable {
    /// The offer expires this long after the copy unless the app asked for less (Apple's default).
    public static let defaultExpirySeconds: UInt16 = 120

    /// The copy on the shelf.
    public struct Copy: Hashable, Sendable {
        public var offerID: UInt64
        public var kind: ClipboardKind
        /// The local account that copied it (its uid, for asking its agent for the bytes).
        public var uid: UInt32
        public var account: String
        public var items: [ClipboardItem]
        /// Unix seconds after which nothing is answered for it and the advert loses its kind.
        public var expiresAt: Int64
        /// When it was offered.
        public var offeredAt: Int64
    }

    public private(set) var copy: Copy?

    public init() {}

    /// What the advert carries now (bits 4–5).
    public var kind: ClipboardKind? { copy?.kind }

    /// When the shelf next changes by itself (the expiry), for an event-bound timer; nil: never.
    public var nextDeadline: Int64? { copy?.expiresAt }

    /// `account` (uid) copied `items`: the new copy replaces whatever was offered (a content change:
    /// the advert's revision moves, §4.2). `expiresIn` is clamped to 1 ... 3,600 s. The offer id
    /// must be new and unpredictable (batond: 8 random bytes).
    public mutating func offer(uid: UInt32, account: String, kind: ClipboardKind, items: [ClipboardItem],
                               expiresIn: UInt16 = defaultExpirySeconds, offerID: UInt64, nowSeconds: Int64) throws(WireError) {
        let seconds = min(max(expiresIn, 1), ClipboardOffer.maxExpirySeconds)
        // Checked as the frame will be, so nothing is put on the air that cannot be answered.
        _ = try ClipboardOffer(offerID: offerID, kind: kind, expiresIn: seconds, account: account, items: items)
        copy = Copy(offerID: offerID, kind: kind, uid: uid, account: account, items: items, expiresAt: nowSeconds + Int64(seconds),
                    offeredAt: nowSeconds)
    }

    /// Takes the copy back when it is `uid`'s (a secret or local-only copy replaced it, the account
    /// turned the clipboard off, its agent left). True when the advert must lose its kind.
    public mutating func withdraw(uid: UInt32) -> Bool {
        guard copy?.uid == uid else { return false }
        copy = nil
        return true
    }

    /// Shortens the life of `uid`'s copy to `seconds` from now (never lengthens it). False when the copy
    /// is not `uid`'s.
    public mutating func shorten(uid: UInt32, to seconds: UInt16, nowSeconds: Int64) -> Bool {
        guard var current = copy, current.uid == uid else { return false }
        current.expiresAt = min(current.expiresAt, nowSeconds + Int64(max(seconds, 1)))
        copy = current
        return true
    }

    /// Drops an expired copy. True when the advert must lose its kind.
    public mutating func expire(nowSeconds: Int64) -> Bool {
        guard let copy, nowSeconds >= copy.expiresAt else { return false }
        self.copy = nil
        return true
    }

    /// The answer to FetchClipboardOffer: the offer with the whole seconds it has left, or
    /// `Error(unknownActivity)` when nothing is offered.
    public func answerOffer(nowSeconds: Int64) -> Result<ClipboardOffer, ErrorFrame> {
        guard let copy, nowSeconds < copy.expiresAt else { return .failure(ErrorFrame(code: .unknownActivity, message: "no clipboard offer")) }
        let left = UInt16(clamping: copy.expiresAt - nowSeconds)
        do {
            return .success(try ClipboardOffer(offerID: copy.offerID, kind: copy.kind, expiresIn: max(left, 1), account: copy.account, items: copy.items))
        } catch {
            return .failure(ErrorFrame(code: .internalError, message: "offer not encodable"))
        }
    }

    /// Checks FetchClipboardData against the copy on the shelf: the copy and item to stream, or the
    /// Error frame to answer (`unknownActivity` when the copy changed, expired or has no such type;
    /// `malformed` for an offset beyond the item).
    public func answerData(_ request: ClipboardDataRequest, nowSeconds: Int64) -> Result<(copy: Copy, item: ClipboardItem), ErrorFrame> {
        guard let copy, nowSeconds < copy.expiresAt, copy.offerID == request.offerID else {
            return .failure(ErrorFrame(code: .unknownActivity, message: "clipboard changed"))
        }
        guard let item = copy.items.first(where: { $0.mediaType == request.mediaType }) else {
            return .failure(ErrorFrame(code: .unknownActivity, message: "type not offered"))
        }
        guard request.offset <= item.size else { return .failure(ErrorFrame(code: .malformed, message: "offset beyond the item")) }
        return .success((copy, item))
    }
}

/// The receiver's side (§9.5): per member, the last clipboard kind and revision accepted, which
/// accepted adverts call for asking the member's offer, and the offer ids already taken, so a new copy
/// is taken once and an old one never again. Pure.
public struct ClipboardWatch: Sendable {
    public enum Change: Hashable, Sendable {
        /// Ask the member for its offer (FetchClipboardOffer): it may hold a new copy.
        case ask(DeviceID)
        /// The member offers nothing any more: whatever was taken from it is given up.
        case withdrawn(DeviceID)
    }

    /// A question that got no answer is asked again at the next re-sightings, up to this many
    /// questions per revision (§9 "Clipboard").
    public static let askAttempts = 3

    private struct Heard {
        var kind: ClipboardKind
        var revision: UInt32
        var questions = 1
        /// The last question got no answer, and none is out now.
        var unanswered = false
    }

    private var heard: [DeviceID: Heard] = [:]
    private var taken: [DeviceID: UInt64] = [:]

    public init() {}

    /// An advert of `member` that §4.3 accepted, with its revision and clipboard kind. A kind with a
    /// revision not yet seen with a kind asks for the offer (a copy moves the revision; so does any other
    /// content change, and the offer id then tells a new copy from the one already taken).
    public mutating func hear(_ member: DeviceID, kind: ClipboardKind?, revision: UInt32) -> Change? {
        guard let kind else {
            guard heard.removeValue(forKey: member) != nil else { return nil }
            return .withdrawn(member)
        }
        if var entry = heard[member], entry.kind == kind, entry.revision == revision {
            // A re-sighting asks again only after a question of this revision got no answer.
            guard entry.unanswered, entry.questions < Self.askAttempts else { return nil }
            entry.questions += 1
            entry.unanswered = false
            heard[member] = entry
            return .ask(member)
        }
        heard[member] = Heard(kind: kind, revision: revision)
        return .ask(member)
    }

    /// The question to `member` got no answer (no connection, a broken one, an answer that did not
    /// decode): one of its next re-sightings asks again.
    public mutating func askFailed(_ member: DeviceID) {
        heard[member]?.unanswered = true
    }

    /// The member answered with `offer`: true when it is a copy not taken before (hand it on).
    public mutating func answered(_ member: DeviceID, offer: ClipboardOffer) -> Bool {
        heard[member]?.unanswered = false
        guard taken[member] != offer.offerID else { return false }
        taken[member] = offer.offerID
        return true
    }

    /// The member answered that it offers nothing (`Error(unknownActivity)`: it expired or was taken
    /// back meanwhile). What it advertised stays heard, so its re-sightings do not ask again.
    public mutating func answeredNothing(_ member: DeviceID) -> Change? {
        heard[member]?.unanswered = false
        guard taken.removeValue(forKey: member) != nil else { return nil }
        return .withdrawn(member)
    }

    /// The member left the ring: its offer is gone.
    public mutating func forget(_ member: DeviceID) -> Change? {
        let had = heard.removeValue(forKey: member) != nil
        taken[member] = nil
        return had ? .withdrawn(member) : nil
    }

    public func kind(of member: DeviceID) -> ClipboardKind? { heard[member]?.kind }
}
